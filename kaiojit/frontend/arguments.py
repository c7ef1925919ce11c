"""Checks and conversions of a call's arguments, shared by the typing rules of builtins and of
intrinsics (``kaiojit/intrinsics/``): argument counts, numbers, constant integers and shapes,
dtype arguments. Each failure is a located ``TypingError`` naming the call or the argument."""

from __future__ import annotations

import ast

from .. import types as T
from ..kir import Expr
from .values import PyObj, type_words


def call_args(typer, node: ast.Call, n_min: int, n_max: int | None = None,
              name: str = "") -> list[Expr]:
    """The typed positional arguments of a call of ``name`` taking ``n_min`` to ``n_max``."""
    if node.keywords:
        kw = node.keywords[0]
        typer.error(f"{name}() takes no keyword argument {kw.arg!r}", kw.value)
    n_max = n_min if n_max is None else n_max
    if not n_min <= len(node.args) <= n_max:
        want = str(n_min) if n_min == n_max else f"{n_min} to {n_max}"
        typer.error(f"{name}() takes {want} arguments, got {len(node.args)}", node)
    return [typer.expr(a) for a in node.args]


def scalar_arg(typer, e: Expr, node, what: str) -> T.ScalarType:
    """``e``'s type, which must be a number (``what`` names the call in the message)."""
    if not isinstance(e.type, T.ScalarType):
        typer.error(f"{what} needs a number, got {type_words(e.type)}", node)
    return e.type


def const_int(typer, node, what: str) -> int:
    """The value of an argument that must be a constant integer."""
    e = typer.expr(node)
    if e.op != "const" or not isinstance(e.attr, int) or isinstance(e.attr, bool):
        typer.error(f"{what} must be a constant integer", node)
    return e.attr


def const_shape(typer, node) -> tuple[int, ...]:
    """A constant shape: an integer or a tuple of them, none negative; a local variable
    assigned a constant once (``n = 100``) is that constant, as numba folds it."""
    e = typer.expr(node)
    if e.op not in ("const", "tuple"):
        value = _single_constant_assignment(typer.src.node, node)
        if value is not None:
            e = typer.expr(value)
    items = list(e.args) if e.op == "tuple" else [e]
    shape = []
    for it in items:
        if it.op != "const" or not isinstance(it.attr, int) or isinstance(it.attr, bool):
            typer.error("the shape must be a constant integer or a tuple of them (a module-level "
                        "constant works)", node)
        if it.attr < 0:
            typer.error(f"shape dimensions must not be negative, got {it.attr}", node)
        shape.append(it.attr)
    return tuple(shape)


def _single_constant_assignment(fdef: ast.FunctionDef, node) -> ast.expr | None:
    """The value of ``name = <constant or tuple of constants>`` where that is the only
    assignment of the local variable ``node`` names in ``fdef``; else None."""
    if not isinstance(node, ast.Name):
        return None
    stores = [n for n in ast.walk(fdef)
              if isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store)]
    if len(stores) != 1:
        return None
    for a in ast.walk(fdef):
        if isinstance(a, ast.Assign) and a.targets == stores:
            value = a.value
            items = value.elts if isinstance(value, ast.Tuple) else [value]
            if all(isinstance(i, ast.Constant) for i in items):
                return value
    return None


def dtype_arg(typer, node) -> T.ScalarType:
    """A dtype argument: a kaiojit scalar type or anything NumPy takes as a dtype."""
    r = typer.visit(node)
    v = r.value if isinstance(r, PyObj) else None
    if isinstance(v, (T.ScalarType, T.RecordType)):  # records: arrays of structs
        return v
    if getattr(r, "op", None) == "const" and isinstance(r.type, T.StringType):  # "int32"
        try:
            return T.from_dtype(r.attr)
        except TypeError:
            typer.error(f"Invalid NumPy dtype specified: {r.attr!r} (kaiojit has no type "
                        "for it)", node)
    try:
        if v is not None and not isinstance(v, (int, float)):
            return T.from_dtype(v)
    except TypeError:
        pass
    typer.error("dtype must be a kaiojit or NumPy scalar type, e.g. kj.float32", node)


def float_type(t: T.ScalarType) -> T.ScalarType:
    """The float type math on ``t`` computes in (integers promote to float64, as in Python)."""
    return t if t.is_float else T.float64
