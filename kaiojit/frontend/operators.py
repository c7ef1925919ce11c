"""Python's ``operator`` module in kernels: ``operator.add(a, b)`` is ``a + b``; the function
may also be named by a global or closure variable, or passed to a device function, as numba
allows.

Each call types as the expression it stands for (the same node kinds, the same rules and
messages, located at the call's arguments)."""

from __future__ import annotations

import ast
import operator

BINARY = {
    operator.add: ast.Add, operator.sub: ast.Sub, operator.mul: ast.Mult,
    operator.truediv: ast.Div, operator.floordiv: ast.FloorDiv, operator.mod: ast.Mod,
    operator.pow: ast.Pow, operator.lshift: ast.LShift, operator.rshift: ast.RShift,
    operator.and_: ast.BitAnd, operator.or_: ast.BitOr, operator.xor: ast.BitXor,
}
COMPARE = {
    operator.lt: ast.Lt, operator.le: ast.LtE, operator.gt: ast.Gt, operator.ge: ast.GtE,
    operator.eq: ast.Eq, operator.ne: ast.NotEq,
}
UNARY = {operator.neg: ast.USub, operator.pos: ast.UAdd, operator.invert: ast.Invert,
         operator.not_: ast.Not}


def _arity(typer, node, n: int, name: str) -> None:
    if node.keywords or len(node.args) != n:
        typer.error(f"operator.{name}() takes {n} positional argument{'s' * (n > 1)}", node)


def _as(node, expr: ast.expr) -> ast.expr:
    return ast.copy_location(expr, node)


def _binary(name: str, op):
    def typing(typer, node):
        _arity(typer, node, 2, name)
        return typer.visit(_as(node, ast.BinOp(node.args[0], op(), node.args[1])))
    return typing


def _compare(name: str, op):
    def typing(typer, node):
        _arity(typer, node, 2, name)
        return typer.visit(_as(node, ast.Compare(node.args[0], [op()], [node.args[1]])))
    return typing


def _unary(name: str, op):
    def typing(typer, node):
        _arity(typer, node, 1, name)
        return typer.visit(_as(node, ast.UnaryOp(op(), node.args[0])))
    return typing


def operator_table() -> dict:
    """{operator function: typing rule} for the builtins table (frontend/builtins.py)."""
    table = {fn: _binary(fn.__name__, op) for fn, op in BINARY.items()}
    table.update({fn: _compare(fn.__name__, op) for fn, op in COMPARE.items()})
    table.update({fn: _unary(fn.__name__, op) for fn, op in UNARY.items()})
    return table
