"""Bit counting and reversal: ``kj.popc``, ``kj.clz``, ``kj.ffs`` (int32 results, never
negative) and ``kj.brev`` (the argument's type), from LLVM's bit intrinsics. All pure."""

from __future__ import annotations

from llvmlite import ir

from .. import language as L
from .. import types as T
from .api import (ANY_TARGET, I1, I32, INT, Expr, Intrinsic, Operands, Same, call_args, register,
                  scalar_arg, type_words)


def _typing(name: str):
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, f"kj.{name}")
        t = scalar_arg(typer, a, node.args[0], f"kj.{name}()")
        if not t.is_int:
            typer.error(f"kj.{name}() needs an integer, got {type_words(t)}", node.args[0])
        if a.weak:
            a, t = typer.coerce(a, T.int64, node), T.int64
        rt = t if name == "brev" else T.int32
        return typer.intrinsic(f"bits.{name}", rt, (a,), node)
    return typing


def _lower(fl, e: Expr):
    name = e.attr[len("bits."):]
    b = fl.builder
    v = fl.expr(e.args[0])
    ty = v.type
    false = ir.Constant(I1, 0)
    if name == "brev":
        return b.call(fl.mod.declare(f"llvm.bitreverse.i{ty.width}", ty, [ty]), [v])
    if name == "popc":
        r = b.call(fl.mod.declare(f"llvm.ctpop.i{ty.width}", ty, [ty]), [v])
    elif name == "clz":
        r = b.call(fl.mod.declare(f"llvm.ctlz.i{ty.width}", ty, [ty, I1]), [v, false])
    else:  # ffs: one plus the index of the lowest set bit, 0 for 0
        tz = b.call(fl.mod.declare(f"llvm.cttz.i{ty.width}", ty, [ty, I1]), [v, false])
        is_zero = b.icmp_unsigned("==", v, ir.Constant(ty, 0))
        r = b.select(is_zero, ir.Constant(ty, 0), b.add(tz, ir.Constant(ty, 1)))
    if ty.width > 32:
        return b.trunc(r, I32)
    if ty.width < 32:
        return b.zext(r, I32)
    return r


for _name in ("popc", "clz", "ffs", "brev"):
    register(Intrinsic(
        name=f"bits.{_name}",
        operands=Operands(INT, result=Same(0) if _name == "brev" else T.int32),
        lowering={ANY_TARGET: _lower}, calls={getattr(L, _name): _typing(_name)},
        pure=True, elementwise=True, nonnegative=_name != "brev"))
