"""Views of arrays, which the frontend makes from indexing (no user calls them): ``a[i]`` of an
n-d array (``array.view``) and slices, ``a[1:-1, ::2]`` (``array.slice:<pattern>``, the pattern
in the name's parameter: one entry per given index, ``i`` for an integer, ``s`` and three
flags for a slice's start, stop and step). Each is a view of operand 0: pure, and writing
through the view writes that array."""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from .api import (
    ANY_TARGET,
    I64,
    Expr,
    Intrinsic,
    array_slice,
    array_view,
    convert,
    make_array,
    register,
)


def _view_of(e: Expr, kept: int, operands: int) -> str | None:
    """The checks both views share: an array operand, integer operands, the kept dims."""
    at = e.args[0].type if e.args else None
    if not isinstance(at, T.ArrayType):
        return "operand 0 must be an array"
    if len(e.args) != 1 + operands:
        return f"takes {1 + operands} operands, got {len(e.args)}"
    for i, a in enumerate(e.args[1:], 1):
        if not (isinstance(a.type, T.ScalarType) and a.type.is_int):
            return f"operand {i} is {a.type}, expected an integer"
    rt = e.type
    if not (isinstance(rt, T.ArrayType) and rt.dtype == at.dtype and rt.ndim == kept):
        return f"result is {rt}, expected a {kept}-d array of {at.dtype}"
    return None


def _view_operands(e: Expr) -> str | None:
    at = e.args[0].type if e.args else None
    k = len(e.args) - 1
    if isinstance(at, T.ArrayType) and not 1 <= k < at.ndim:
        return f"a view of a {at.ndim}-d array takes 1 to {at.ndim - 1} indices, got {k}"
    return _view_of(e, at.ndim - k if isinstance(at, T.ArrayType) else 0, k)


def _slice_operands(e: Expr) -> str | None:
    at = e.args[0].type if e.args else None
    pattern = e.attr.partition(":")[2].split(",")
    if not isinstance(at, T.ArrayType) or len(pattern) > at.ndim:
        return f"pattern {','.join(pattern)} does not fit operand 0 ({at})"
    operands = sum(1 if p == "i" else p.count("1") for p in pattern)
    kept = sum(p.startswith("s") for p in pattern) + at.ndim - len(pattern)
    return _view_of(e, kept, operands)


def _reshape_operands(e: Expr) -> str | None:
    at = e.args[0].type if e.args else None
    if isinstance(at, T.ArrayType) and at.layout != "C":
        return f"reshapes a C-contiguous array, got {at}"
    return _view_of(e, len(e.args) - 1, len(e.args) - 1)


def _reshape(fl, e: Expr):
    """``a.reshape(shape)`` of a C-contiguous array: the same memory with the new extents, a
    -1 among them the one that keeps the size (NumPy's)."""
    b = fl.builder
    at = e.args[0].type
    arr = fl.expr(e.args[0])
    size = ir.Constant(I64, 1)
    for d in range(at.ndim):
        size = b.mul(size, b.extract_value(arr, [1, d]))
    dims = [convert(fl, fl.expr(x), x.type, T.int64) for x in e.args[1:]]
    minus_one = ir.Constant(I64, -1)
    known = ir.Constant(I64, 1)
    for v in dims:
        known = b.mul(known, b.select(b.icmp_signed("==", v, minus_one), ir.Constant(I64, 1), v))
    safe = b.select(b.icmp_signed("==", known, ir.Constant(I64, 0)), ir.Constant(I64, 1), known)
    inferred = b.sdiv(size, safe)
    shape = [b.select(b.icmp_signed("==", v, minus_one), inferred, v) for v in dims]
    return make_array(b, b.extract_value(arr, 0), shape, at.dtype, "C")


register(Intrinsic(name="array.reshape", operands=_reshape_operands,
                   lowering={ANY_TARGET: _reshape}, pure=True, view=True))
register(Intrinsic(name="array.view", operands=_view_operands,
                   lowering={ANY_TARGET: array_view}, pure=True, view=True))
register(Intrinsic(name="array.slice", operands=_slice_operands,
                   lowering={ANY_TARGET: array_slice}, pure=True, view=True))
