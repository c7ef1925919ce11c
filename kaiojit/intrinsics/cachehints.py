"""Loads and stores with a cache hint, CUDA's ``__ldca`` ... ``__stwt`` and numba's
``cuda.ldca`` ...: ``kj.ldcg(array, index)`` reads one element, ``kj.stcs(array, index, value)``
writes one (``index`` an integer, or a tuple of one per dimension).

On a GPU they are ``ld.global.<hint>.b<bits>`` / ``st.global.<hint>.b<bits>`` (``ca`` cache at
all levels, ``cg`` in L2 only, ``cs`` streaming, ``lu`` last use, ``cv`` volatile; ``wb``
write-back, ``wt`` write-through). The cpu backend has no caches to hint: a plain load or
store, checked as any. Integers and floats only, as numba's (no bool, complex or records).
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from .api import (
    I16,
    I32,
    I64,
    Expr,
    Intrinsic,
    ll_mem_type,
    register,
    scalar_arg,
    type_words,
)

LOADS = ("ca", "cg", "cs", "lu", "cv")
STORES = ("cg", "cs", "wb", "wt")
# PTX register class of an element of each width (8 bits travel in a 32-bit register)
_REGISTER = {8: ("r", I32), 16: ("h", I16), 32: ("r", I32), 64: ("l", I64)}


def _indices(typer, arr: Expr, node, what: str) -> list[Expr]:
    """``index`` of ``what(array, index, ...)``: one integer per dimension (a pointer's one),
    numba's errors."""
    idx = typer.expr(node)
    ndim = _ndim(arr.type)
    if isinstance(idx.type, T.TupleType):
        items = [typer.tuple_item(idx, i) for i in range(len(idx.type.elements))]
        if len(items) != ndim:
            typer.error(f"Expected {ndim} indices, got {len(items)}", node)
    else:
        if ndim != 1:
            typer.error(f"Expected {ndim} indices, got a scalar", node)
        items = [idx]
    out = []
    for it in items:
        if not (isinstance(it.type, T.ScalarType) and it.type.is_int):
            typer.error(f"{type_words(it.type)} is not a valid index", node)
        out.append(typer.coerce(it, T.int64, node))
    return out


def _ndim(t) -> int:
    return t.ndim if isinstance(t, T.ArrayType) else 1  # a CPointer: one index


def _array(typer, node, args: list, what: str) -> Expr:
    arr = typer.expr(args[0])
    t = arr.type
    if not isinstance(t, (T.ArrayType, T.CPointer)):
        typer.error(f"{what} requires an array or a pointer first, got {type_words(t)}",
                    args[0])
    dt = t.dtype
    if not isinstance(dt, T.ScalarType) or dt.is_bool or dt.kind not in "iuf":
        typer.error(f"{what} requires array of integer or float type", args[0])
    return arr


def _typing(op: str, stores: bool):
    """``ld<hint>(array, index)`` or ``st<hint>(array, index, value)``."""
    def typing(typer, node):
        n = 3 if stores else 2
        if len(node.args) != n or node.keywords:
            spelled = "(array, index, value) takes three" if stores else "(array, index) takes two"
            typer.error(f"{op}{spelled} arguments", node)
        arr = _array(typer, node, node.args, op)
        operands = [arr, *_indices(typer, arr, node.args[1], op)]
        if not stores:
            return typer.intrinsic(f"cache.{op}", arr.type.dtype, tuple(operands), node)
        value = typer.expr(node.args[2])
        scalar_arg(typer, value, node.args[2], op)
        operands.append(typer.coerce(value, arr.type.dtype, node.args[2]))
        return typer.intrinsic(f"cache.{op}", T.void, tuple(operands), node)
    return typing


def _operands(stores: bool):
    def check(e: Expr) -> str | None:
        at = e.args[0].type if e.args else None
        if not isinstance(at, (T.ArrayType, T.CPointer)):
            return "operand 0 must be an array or a pointer"
        if len(e.args) != 1 + _ndim(at) + stores:
            return f"takes an array, {_ndim(at)} indices{' and a value' if stores else ''}"
        if stores and e.args[-1].type != at.dtype:
            return f"the value is {e.args[-1].type}, the array holds {at.dtype}"
        want = T.void if stores else at.dtype
        return None if e.type == want else f"result is {e.type}, expected {want}"
    return check


def _pointer(fl, e: Expr):
    at = e.args[0].type
    idx_exprs = e.args[1:1 + _ndim(at)]
    arr = fl.expr(e.args[0])
    if isinstance(at, T.CPointer):  # ptr + i elements, unchecked (a pointer has no extent)
        return fl.builder.gep(arr, [fl.expr(idx_exprs[0])], source_etype=ll_mem_type(at.dtype)), at
    return fl.element_pointer(arr, at, [fl.expr(i) for i in idx_exprs], idx_exprs, e.loc), at


def _ptx_access(fl, e: Expr):
    """The element's address, its type, the PTX register class and LLVM type of its bits,
    and the hint (``cg`` of ``cache.ldcg``)."""
    ptr, at = _pointer(fl, e)
    reg, reg_ty = _REGISTER[at.dtype.bits]
    return ptr, at.dtype, reg, reg_ty, e.attr[len("cache.ld"):]


def _ptx_load(fl, e: Expr):
    ptr, dt, reg, reg_ty, hint = _ptx_access(fl, e)
    b = fl.builder
    bits = _inline(fl, reg_ty, f"ld.global.{hint}.b{dt.bits} $0, [$1];", f"={reg},l", [ptr])
    if bits.type.width > dt.bits:  # a byte, from its 32-bit register
        bits = b.trunc(bits, ir.IntType(dt.bits))
    mem = ll_mem_type(dt)
    return bits if bits.type == mem else b.bitcast(bits, mem)


def _ptx_store(fl, e: Expr):
    ptr, dt, reg, reg_ty, hint = _ptx_access(fl, e)
    b = fl.builder
    value = fl.expr(e.args[-1])
    bits = value if not dt.is_float else b.bitcast(value, ir.IntType(dt.bits))
    if bits.type != reg_ty:
        bits = b.zext(bits, reg_ty)
    _inline(fl, None, f"st.global.{hint}.b{dt.bits} [$0], $1;", f"l,{reg},~{{memory}}",
            [ptr, bits])


def _inline(fl, ret, text: str, constraints: str, args: list):
    asm = ir.InlineAsm(ir.FunctionType(ret or ir.VoidType(), [a.type for a in args]), text,
                       constraints, side_effect=True)
    return fl.builder.call(asm, args)


def _host_load(fl, e: Expr):
    ptr, at = _pointer(fl, e)
    return fl.target.load(fl, ptr, at.dtype)


def _host_store(fl, e: Expr):
    ptr, at = _pointer(fl, e)
    fl.target.store(fl, ptr, fl.expr(e.args[-1]), at.dtype)


for _hint in LOADS:
    register(Intrinsic(
        name=f"cache.ld{_hint}", operands=_operands(False),
        lowering={"nvptx": _ptx_load, "host": _host_load},
        calls={f"kj.ld{_hint}": _typing(f"ld{_hint}", False)}))
for _hint in STORES:
    register(Intrinsic(
        name=f"cache.st{_hint}", operands=_operands(True),
        lowering={"nvptx": _ptx_store, "host": _host_store},
        calls={f"kj.st{_hint}": _typing(f"st{_hint}", True)}, writes=(0,)))
