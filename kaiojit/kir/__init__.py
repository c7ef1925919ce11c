"""The typed kernel IR: its nodes, text form, walker, verifier, analyses, and the registry of
intrinsics. The frontend produces it; every target lowers it."""

from __future__ import annotations

from .nodes import (
    EXPR_OPS,
    Assign,
    Break,
    Continue,
    Expr,
    ExprStmt,
    ForRange,
    If,
    KFunction,
    Return,
    Stmt,
    Store,
    While,
    intrinsic_key,
)
from .walk import (
    body_exprs,
    function_exprs,
    stmt_exprs,
    walk_expr,
    walk_functions,
    walk_stmts,
)

__all__ = [
    "EXPR_OPS", "Assign", "Break", "Continue", "Expr", "ExprStmt", "ForRange", "If",
    "KFunction", "Return", "Stmt", "Store", "While", "body_exprs", "function_exprs",
    "intrinsic_key", "stmt_exprs", "walk_expr", "walk_functions", "walk_stmts",
]
