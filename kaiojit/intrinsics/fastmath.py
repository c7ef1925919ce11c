"""The GPU's fast approximate math: ``kj.ex2_approx(x)``, 2 to the power of a float32.

On the GPU it is one ``ex2.approx.ftz.f32`` (the MUFU unit: a maximum relative error of
2**-22.5 over the whole range, subnormal inputs and results flushed to zero), what attention
kernels use for their softmax with the scale and log2(e) folded into one multiply. On the host
it is ``llvm.exp2.f32`` (correctly rounded to within an ulp there): the two agree to the GPU's
stated error, and exactly at the points a softmax relies on: ``ex2_approx(-inf) == 0``,
``ex2_approx(0) == 1``, ``ex2_approx(+inf) == inf``, NaN for NaN.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from .api import Expr, Intrinsic, Operands, call_args, math_call, register, scalar_arg

F32 = ir.FloatType()


def _typing(typer, node):
    (x,) = call_args(typer, node, 1, 1, "kj.ex2_approx")
    t = scalar_arg(typer, x, node.args[0], "kj.ex2_approx()")
    if not (t.is_float or t.is_int or t.is_bool) or t.is_complex:
        typer.error(f"kj.ex2_approx() takes a real number, got {t}", node.args[0])
    return typer.intrinsic("fastmath.ex2_approx", T.float32,
                           (typer.coerce(x, T.float32, node.args[0]),), node)


def _nvptx(fl, e: Expr):
    asm = ir.InlineAsm(ir.FunctionType(F32, [F32]), "ex2.approx.ftz.f32 $0, $1;", "=f,f",
                       side_effect=False)
    return fl.builder.call(asm, [fl.expr(e.args[0])])


def _host(fl, e: Expr):
    return math_call(fl, "exp2", T.float32, [fl.expr(e.args[0])])


register(Intrinsic(
    name="fastmath.ex2_approx", operands=Operands(T.float32, result=T.float32),
    lowering={"nvptx": _nvptx, "host": _host}, calls={"kj.ex2_approx": _typing},
    pure=True, elementwise=True))

__all__: list[str] = []
