"""The typed kernel IR: its nodes, text form, walker, verifier, analyses, and the registry of
intrinsics (``kir.analysis`` holds the analyses). The frontend produces it; every target
lowers it."""

from __future__ import annotations

from .intrinsics import ANY_TARGET, Intrinsic, Operands, lookup, register
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
from .printer import expr_text, function_text
from .verify import IRError, verify
from .walk import (
    body_exprs,
    function_exprs,
    stmt_exprs,
    walk_expr,
    walk_functions,
    walk_stmts,
)

__all__ = [
    "ANY_TARGET", "EXPR_OPS", "Assign", "Break", "Continue", "Expr", "ExprStmt", "ForRange",
    "IRError", "If", "Intrinsic", "KFunction", "Operands", "Return", "Stmt", "Store", "While",
    "body_exprs", "expr_text", "function_exprs", "function_text", "intrinsic_key", "lookup",
    "register", "stmt_exprs", "verify", "walk_expr", "walk_functions", "walk_stmts",
]
