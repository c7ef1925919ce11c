"""Where a thread is: the special registers (``kj.threadIdx.x``, ``kj.blockIdx``,
``kj.blockDim``, ``kj.gridDim``, ``kj.laneid``) and ``kj.grid(n)`` / ``kj.gridsize(n)``."""

from __future__ import annotations

from .. import language as L
from .. import types as T
from .api import ANY_TARGET, I64, Expr, Intrinsic, Operands, const_int, register

_REGISTERS = {"threadIdx": "tid", "blockIdx": "ctaid", "blockDim": "ntid", "gridDim": "nctaid"}


# blockIdx, blockDim and gridDim are int64, so that ``blockIdx.x * blockDim.x + threadIdx.x``
# does not wrap past 2**31 threads (numba computes it in 64 bits too); threadIdx is int32
_WIDE = {"ctaid", "ntid", "nctaid"}


def _lower_sreg(fl, e: Expr):
    value = fl.target.sreg(fl, e.attr[len("sreg."):])
    return fl.builder.zext(value, I64) if e.type == T.int64 else value


for _user, _ptx in _REGISTERS.items():
    for _axis in "xyz":
        register(Intrinsic(
            name=f"sreg.{_ptx}.{_axis}",
            operands=Operands(result=T.int64 if _ptx in _WIDE else T.int32),
            lowering={ANY_TARGET: _lower_sreg},
            values=(getattr(getattr(L, _user), _axis),), pure=True, nonnegative=True))

register(Intrinsic(
    name="sreg.laneid", operands=Operands(result=T.int32), lowering={ANY_TARGET: _lower_sreg},
    values=(L.laneid,), pure=True, nonnegative=True))


def _grid_typing(kind: str):
    """``kj.grid(ndim)`` / ``kj.gridsize(ndim)``: an int64 for 1, a tuple for 2 or 3."""
    def typing(typer, node):
        if len(node.args) != 1 or node.keywords:
            typer.error(f"kj.{kind}() takes one argument, the number of dimensions", node)
        ndim = const_int(typer, node.args[0], f"kj.{kind}()'s argument")
        if ndim not in (1, 2, 3):
            typer.error(f"kj.{kind}() takes 1, 2 or 3, got {ndim}", node.args[0])
        items = tuple(
            typer.intrinsic(f"{kind}.{axis}", T.int64, (), node) for axis in "xyz"[:ndim]
        )
        if ndim == 1:
            return items[0]
        return Expr("tuple", T.TupleType((T.int64,) * ndim), items, loc=typer.loc(node))
    return typing


def _lower_grid(fl, e: Expr):
    """64-bit, from 32-bit special registers that are never negative."""
    kind, axis = e.attr.split(".")
    b = fl.builder
    target = fl.target
    ntid = b.zext(target.sreg(fl, f"ntid.{axis}"), I64)
    if kind == "grid":
        ctaid = b.zext(target.sreg(fl, f"ctaid.{axis}"), I64)
        tid = b.zext(target.sreg(fl, f"tid.{axis}"), I64)
        return b.add(b.mul(ctaid, ntid, flags=("nuw", "nsw")), tid, flags=("nuw", "nsw"))
    nctaid = b.zext(target.sreg(fl, f"nctaid.{axis}"), I64)
    return b.mul(ntid, nctaid, flags=("nuw", "nsw"))


for _kind, _stub in (("grid", L.grid), ("gridsize", L.gridsize)):
    for _axis in "xyz":
        register(Intrinsic(
            name=f"{_kind}.{_axis}", operands=Operands(result=T.int64),
            lowering={ANY_TARGET: _lower_grid},
            calls={_stub: _grid_typing(_kind)} if _axis == "x" else {},
            pure=True, nonnegative=True))
