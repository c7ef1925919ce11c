"""Records (NumPy structured dtypes): ``record.ref`` (the address of ``a[i]`` in a record
array, a view of it), ``record.get:<field>`` and ``record.set:<field>`` (a field read or
written at its NumPy offset). Typed in ``kaiojit/frontend/records.py``.

A field is accessed with the alignment NumPy guarantees: its own in an aligned record
(``np.dtype(..., align=True)``), one byte in a packed one, whose fields may sit anywhere.
"""

from __future__ import annotations

import math

from llvmlite import ir

from .. import types as T
from .api import (ANY_TARGET, I8, I64, Expr, Intrinsic, counted_loop, ll_mem_type, make_array,
                  register)


def _field(e: Expr, rec_type: T.RecordType) -> tuple[str, T.ScalarType, int]:
    name = e.param
    ft, offset = rec_type.field(name)
    return name, ft, offset


def _check_ref(e: Expr) -> str | None:
    at = e.args[0].type if e.args else None
    if not (isinstance(at, T.ArrayType) and isinstance(at.dtype, T.RecordType)):
        return f"operand 0 is {at}, expected an array of records"
    if len(e.args) != 1 + at.ndim or any(
            not (isinstance(a.type, T.ScalarType) and a.type.is_int) for a in e.args[1:]):
        return f"takes the array and {at.ndim} integer indices"
    return None if e.type == at.dtype else f"result is {e.type}, expected {at.dtype}"


def _check_field(setter: bool, view: bool = False):
    def check(e: Expr) -> str | None:
        rt = e.args[0].type if e.args else None
        if not isinstance(rt, T.RecordType):
            return f"operand 0 is {rt}, expected a record"
        found = rt.field(e.param)
        if found is None:
            return f"the record has no field {e.param!r}"
        if isinstance(found[0], T.SubarrayType) != view:
            return f"field {e.param!r} is {found[0]}"
        if view:
            ft = found[0]
            return None if len(e.args) == 1 and e.type == T.ArrayType(
                ft.dtype, len(ft.shape), "C") else f"views {ft} as {e.type}"
        if setter:
            ok = len(e.args) == 2 and e.args[1].type == found[0] and e.type == T.void
            return None if ok else f"stores {e.args[-1].type} into a {found[0]} field"
        return None if len(e.args) == 1 and e.type == found[0] else \
            f"reads a {found[0]} field as {e.type}"
    return check


def _lower_ref(fl, e: Expr):
    arr_e, idx_e = e.args[0], e.args[1:]
    indices = [fl.expr(i) for i in idx_e]
    return fl.element_pointer(fl.expr(arr_e), arr_e.type, indices, idx_e, e.loc)


def _field_pointer(fl, e: Expr):
    rt = e.args[0].type
    _, ft, offset = _field(e, rt)
    ptr = fl.builder.gep(fl.expr(e.args[0]), [ir.Constant(I64, offset)], source_etype=I8)
    align = math.gcd(ft.align, offset) if offset else ft.align
    return ptr, ft, (align if rt.aligned else 1)


def _lower_get(fl, e: Expr):
    b = fl.builder
    ptr, ft, align = _field_pointer(fl, e)
    v = b.load(ptr, typ=ll_mem_type(ft), align=align)
    return b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if ft.is_bool else v


def _lower_set(fl, e: Expr):
    b = fl.builder
    ptr, ft, align = _field_pointer(fl, e)
    v = fl.expr(e.args[1])
    fl.target.store_packed(fl, ptr, b.zext(v, I8) if ft.is_bool else v, align)


def _lower_view(fl, e: Expr):
    """``r.h`` of an array field: its address and constant shape, C-contiguous."""
    rt = e.args[0].type
    _, ft, offset = _field(e, rt)
    ptr = fl.builder.gep(fl.expr(e.args[0]), [ir.Constant(I64, offset)], source_etype=I8)
    shape = [ir.Constant(I64, n) for n in ft.shape]
    return make_array(fl.builder, ptr, shape, ft.dtype, "C")


def _check_assign(e: Expr) -> str | None:
    """(destination record, source): a record of its type, or (param: a field of the
    destination that is an array) the view of a field of the same array type."""
    if len(e.args) != 2 or not isinstance(e.args[0].type, T.RecordType):
        return "takes a destination record and a source"
    if e.param == "":
        return None if e.args[1].type == e.args[0].type else \
            f"copies a {e.args[1].type} into a {e.args[0].type}"
    found = e.args[0].type.field(e.param)
    src = e.args[1]
    if found is None or not isinstance(found[0], T.SubarrayType):
        return f"field {e.param!r} is not an array field"
    if not (src.op == "intrinsic" and src.attr == "record.view"
            and src.args[0].type.field(src.param)[0] == found[0]):
        return f"the source of field {e.param!r} is not a field of its type"
    return None


def _lower_assign(fl, e: Expr):
    """A whole record, or an array field from a field of the same shape: the bytes moved
    (memmove: ``a[i] = a[i]`` is one region)."""
    b = fl.builder
    dest_rec, src = e.args
    dest = fl.expr(dest_rec)
    if e.param:
        _, ft, offset = _field(e, dest_rec.type)
        dest = b.gep(dest, [ir.Constant(I64, offset)], source_etype=I8)
        source = b.extract_value(fl.expr(src), 0)
        nbytes = ft.itemsize
    else:
        source, nbytes = fl.expr(src), dest_rec.type.itemsize
    ptr = ir.PointerType()
    move = fl.mod.declare("llvm.memmove.p0.p0.i64", ir.VoidType(),
                          [ptr, ptr, I64, ir.IntType(1)])
    b.call(move, [dest, source, ir.Constant(I64, nbytes), ir.Constant(ir.IntType(1), 0)])


def _check_fill(e: Expr) -> str | None:
    """(destination record, source array) for an array field of the source's dtype and
    dimensions."""
    rt = e.args[0].type if len(e.args) == 2 else None
    found = rt.field(e.param) if isinstance(rt, T.RecordType) else None
    if found is None or not isinstance(found[0], T.SubarrayType):
        return f"field {e.param!r} is not an array field of a record"
    at = e.args[1].type
    ok = isinstance(at, T.ArrayType) and at.dtype == found[0].dtype and \
        at.ndim == len(found[0].shape)
    return None if ok else f"cannot fill a {found[0]} field from {at}"


def _lower_fill(fl, e: Expr):
    """``r.h = a``: element ``i`` of the field (C order) from ``a`` at the same index; the
    field's shape is constant, ``a`` is read through its strides (bounds-checked under
    ``debug=True`` and the cpu backend's checked mode, as any indexing)."""
    b = fl.builder
    rec_e, src_e = e.args
    _, ft, offset = _field(e, rec_e.type)
    dest = b.gep(fl.expr(rec_e), [ir.Constant(I64, offset)], source_etype=I8)
    align = (math.gcd(ft.dtype.align, offset) if offset else ft.dtype.align) \
        if rec_e.type.aligned else 1
    src = fl.expr(src_e)
    elt = ll_mem_type(ft.dtype)
    zeros = [Expr("const", T.int64, attr=0)] * len(ft.shape)
    with counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, math.prod(ft.shape))) as k:
        index, rest = [], k
        for n in reversed(ft.shape):
            index.append(b.urem(rest, ir.Constant(I64, n)))
            rest = b.udiv(rest, ir.Constant(I64, n))
        at = fl.element_pointer(src, src_e.type, index[::-1], zeros, e.loc)
        v = b.load(at, typ=elt)
        fl.target.store_packed(fl, b.gep(dest, [k], source_etype=elt), v, align)


register(Intrinsic(name="record.fill", operands=_check_fill,
                   lowering={ANY_TARGET: _lower_fill}, writes=(0,), param=str))
register(Intrinsic(name="record.assign", operands=_check_assign,
                   lowering={ANY_TARGET: _lower_assign}, writes=(0,), param=str))
register(Intrinsic(name="record.view", operands=_check_field(False, view=True),
                   lowering={ANY_TARGET: _lower_view}, pure=True, view=True, param=str))
register(Intrinsic(name="record.ref", operands=_check_ref, lowering={ANY_TARGET: _lower_ref},
                   pure=True, view=True))
register(Intrinsic(name="record.get", operands=_check_field(False),
                   lowering={ANY_TARGET: _lower_get}, param=str))  # the field's name
register(Intrinsic(name="record.set", operands=_check_field(True),
                   lowering={ANY_TARGET: _lower_set}, writes=(0,), param=str))
