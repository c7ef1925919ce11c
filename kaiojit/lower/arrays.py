"""Array values in the lowering: ``{ptr, [n x i64] shape, [n x i64] byte strides}``.

Building them (``make_array``), the address of an element (``element_pointer``: Python's
negative indices, the debug bounds check), the strides of contiguous layouts (one
implementation, ``contiguous_strides``), and views: ``a[i]`` of an n-d array and slices.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..kir import Expr
from . import ops
from .llvmtypes import I8, I64, array_struct, ll_mem_type


def make_array(b: ir.IRBuilder, ptr, shape: list, dtype: T.ScalarType, layout: str,
               strides: list | None = None):
    """An array value from a pointer and shape (strides derived from the layout if absent)."""
    ndim = len(shape)
    if strides is None:
        strides = contiguous_strides(b, shape, dtype.itemsize, layout)
    agg = ir.Constant(array_struct(ndim), ir.Undefined)
    agg = b.insert_value(agg, ptr, 0)
    for d in range(ndim):
        agg = b.insert_value(agg, shape[d], [1, d])
        agg = b.insert_value(agg, strides[d], [2, d])
    return agg


def contiguous_strides(b: ir.IRBuilder, shape: list, itemsize: int, layout: str) -> list:
    """Strides (in units of ``itemsize``) of a C- or F-contiguous array of this shape."""
    ndim = len(shape)
    strides = [None] * ndim
    acc = ir.Constant(I64, itemsize)
    order = range(ndim - 1, -1, -1) if layout == "C" else range(ndim)
    for d in order:
        strides[d] = acc
        acc = b.mul(acc, shape[d], flags=("nsw",)) if not (
            isinstance(acc, ir.Constant) and isinstance(shape[d], ir.Constant)
        ) else ir.Constant(I64, acc.constant * shape[d].constant)
    return strides


def byte_strides(b: ir.IRBuilder, arr, at: T.ArrayType, shape: list) -> list:
    """An array's byte strides: computed from its shape for a contiguous layout (LLVM then
    sees constants), read from the value otherwise."""
    if at.layout in ("C", "F"):
        return contiguous_strides(b, shape, at.dtype.itemsize, at.layout)
    return [b.extract_value(arr, [2, d]) for d in range(at.ndim)]


def element_pointer(fl, arr, at: T.ArrayType, indices: list, idx_exprs, loc, base=None):
    """The address of ``arr[indices]``: a signed index below zero counts from the end (unless
    the analysis proved it never negative), and under ``debug`` the target checks bounds.
    ``base``, if given, is the array's data pointer to address from (in place of the value's
    generic one: a shared array's own ``addrspace(3)`` address)."""
    b = fl.builder
    ndim = at.ndim
    shape = [b.extract_value(arr, [1, d]) for d in range(ndim)]
    idx, given = [], []
    sanitize = getattr(fl.target, "sanitize", False)
    for d, (v, ie) in enumerate(zip(indices, idx_exprs)):
        it = ie.type
        v = ops.convert(fl, v, it, T.int64) if it != T.int64 else v
        given.append(v)
        if it.kind == "i" and not fl.nonnegative(ie):
            # Python's negative indices count from the end
            neg = b.icmp_signed("<", v, ir.Constant(I64, 0))
            v = b.select(neg, b.add(v, shape[d]), v)
        if getattr(fl.options, "debug", False) and not sanitize:
            checked = fl.target.bounds_check(fl, v, shape[d], at, d, loc)
            if checked is not None:  # a target that reports instead of trapping: a safe index
                v = checked
        idx.append(v)
    if sanitize:  # the host's checked variant: every index, reported with the whole access
        idx = fl.target.checked_indices(fl, idx, shape, at, loc, given)
    if base is None:
        base = b.extract_value(arr, 0)
    if at.layout in ("C", "F"):
        strides = contiguous_strides(b, shape, 1, at.layout)
        offset = None
        for v, st in zip(idx, strides):
            term = v if isinstance(st, ir.Constant) and st.constant == 1 else \
                b.mul(v, st, flags=("nsw",))
            offset = term if offset is None else b.add(offset, term, flags=("nsw",))
        ptr = base if offset is None else \
            b.gep(base, [offset], inbounds=True, source_etype=ll_mem_type(at.dtype))
    else:  # (offset None: a 0-d array's one element, a[()])
        offset = None
        for d, v in enumerate(idx):
            term = b.mul(v, b.extract_value(arr, [2, d]), flags=("nsw",))
            offset = term if offset is None else b.add(offset, term, flags=("nsw",))
        ptr = base if offset is None else b.gep(base, [offset], inbounds=True, source_etype=I8)
    if sanitize:  # what the access through this pointer reports (host_sanitize.track)
        fl.san_accesses[ptr] = fl.san_access
    return ptr


# --- views ---------------------------------------------------------------------------------------


def array_view(fl, e: Expr):
    """``a[i]`` of an n-d array (intrinsic ``array.view``): the (n-1)-d view at that leading
    index."""
    b = fl.builder
    at = e.args[0].type
    arr = fl.expr(e.args[0])
    indices = [fl.expr(i) for i in e.args[1:]]
    k = len(indices)
    full = indices + [ir.Constant(I64, 0)] * (at.ndim - k)
    zero_exprs = [Expr("const", T.int64, attr=0)] * (at.ndim - k)
    ptr = element_pointer(fl, arr, at, full, list(e.args[1:]) + zero_exprs, e.loc)
    shape = [b.extract_value(arr, [1, d]) for d in range(at.ndim)]
    strides = byte_strides(b, arr, at, shape)
    return make_array(b, ptr, shape[k:], at.dtype, e.type.layout, strides[k:])


def array_slice(fl, e: Expr):
    """A view by integers and Python slices (intrinsic ``array.slice:<pattern>``, see
    ``ExpressionTyping.array_slice``): bounds normalized as Python does (negative ones count
    from the end, then clamped), the new shape the slice's length, the new stride the old one
    times the step."""
    b = fl.builder
    at = e.args[0].type
    arr = fl.expr(e.args[0])
    pattern = e.attr.split(":", 1)[1].split(",")
    operands = iter(e.args[1:])
    shape = [b.extract_value(arr, [1, d]) for d in range(at.ndim)]
    strides = byte_strides(b, arr, at, shape)
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    offset = zero
    new_shape, new_strides = [], []
    for d in range(at.ndim):
        spec = pattern[d] if d < len(pattern) else "s000"
        n, stride = shape[d], strides[d]
        if spec == "i":
            ie = next(operands)
            v = fl.expr(ie)
            if not fl.nonnegative(ie):
                v = b.select(b.icmp_signed("<", v, zero), b.add(v, n), v)
            offset = b.add(offset, b.mul(v, stride))
            continue
        start_e = next(operands) if spec[1] == "1" else None
        stop_e = next(operands) if spec[2] == "1" else None
        step_e = next(operands) if spec[3] == "1" else None
        step = fl.expr(step_e) if step_e is not None else one
        start, length = slice_bounds(b, n, step,
                                     fl.expr(start_e) if start_e is not None else None,
                                     fl.expr(stop_e) if stop_e is not None else None)
        offset = b.add(offset, b.mul(start, stride))
        new_shape.append(length)
        new_strides.append(b.mul(stride, step))
    base = b.gep(b.extract_value(arr, 0), [offset], source_etype=I8)
    return make_array(b, base, new_shape, at.dtype, e.type.layout, new_strides)


def slice_bounds(b: ir.IRBuilder, n, step, start, stop):
    """Python's ``slice(start, stop, step).indices(n)``: the first index and the length
    (a zero step gives an empty view instead of Python's ValueError)."""
    zero, one, minus_one = ir.Constant(I64, 0), ir.Constant(I64, 1), ir.Constant(I64, -1)
    neg = b.icmp_signed("<", step, zero)
    lower = b.select(neg, minus_one, zero)
    upper = b.select(neg, b.sub(n, one), n)

    def clamp(v, default):
        if v is None:
            return default
        counted = b.select(b.icmp_signed("<", v, zero), b.add(v, n), v)
        low = b.select(b.icmp_signed("<", counted, lower), lower, counted)
        return b.select(b.icmp_signed(">", low, upper), upper, low)

    first = clamp(start, b.select(neg, upper, lower))
    last = clamp(stop, b.select(neg, lower, upper))
    safe_step = b.select(b.icmp_signed("==", step, zero), one, step)
    span_up = b.sub(last, first)        # step > 0: elements in [first, last)
    span_down = b.sub(first, last)      # step < 0: elements in (last, first]
    span = b.select(neg, span_down, span_up)
    magnitude = b.select(neg, b.neg(safe_step), safe_step)
    count = b.sdiv(b.add(span, b.sub(magnitude, one)), magnitude)
    empty = b.or_(b.icmp_signed("<=", span, zero), b.icmp_signed("==", step, zero))
    return first, b.select(empty, zero, count)


__all__ = ["array_slice", "array_view", "byte_strides", "contiguous_strides",
           "element_pointer", "make_array", "slice_bounds"]
