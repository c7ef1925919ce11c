"""A float's parts: ``math.frexp``, ``math.ldexp`` and ``math.modf``, as numba-cuda gives them.

``frexp(x)`` is ``(m, e)`` with ``x == m * 2**e`` and ``0.5 <= |m| < 1``: ``m`` of ``x``'s
float type, ``e`` an int32 (numba's ``intc``). Zero, infinities and NaN give ``(x, 0)`` (numba's
choice; NumPy's ``np.frexp`` gives ``-1`` for the last two). It is computed from the bits, the
same on every target (subnormals are scaled by 2**64 first, exactly).

``ldexp(x, n)`` is ``x * 2**n`` rounded once (libm's ``ldexp`` on the host, libdevice's on the
GPU); an integer ``n`` wider than 32 bits is clamped to int32 first, which changes no result.

``modf(x)`` is ``(fraction, integral part)``, both of ``x``'s float type and with ``x``'s sign
(``modf(-0.5)`` is ``(-0.5, -0.0)``); an infinity gives ``(±0.0, ±inf)``, NaN ``(nan, nan)``.

``round(x, n)`` of a float is numba's (CPython's portable fallback): ``x`` scaled by ``10**n``
in float64, rounded half to even, scaled back; the result has ``x``'s type. An ``x * 10**n``
that overflows gives ``x`` back, infinities and NaN give themselves, and an ``n`` so negative
that ``10**-n`` overflows gives a zero of ``x``'s sign.

float16 and bfloat16 compute in float32 (exact for all three functions' parts) and round back.
"""

from __future__ import annotations

import math

from llvmlite import ir

from .. import types as T
from .api import (ANY_TARGET, FLOAT, INT, Expr, Intrinsic, Kind, Operands, Same, call_args,
                  convert, float_type, ll_type, math_call, register, scalar_arg)

PAIR = Kind("a pair", lambda t: isinstance(t, T.TupleType) and len(t.elements) == 2)
I32 = ir.IntType(32)


def _float_of(typer, a: Expr, node, what: str) -> T.ScalarType:
    t = scalar_arg(typer, a, node, f"{what}()")
    if t.is_complex:
        typer.error(f"{what}() needs a real number, got {t}", node)
    return float_type(t)


def _frexp(typer, node):
    (a,) = call_args(typer, node, 1, 1, "math.frexp")
    ft = _float_of(typer, a, node.args[0], "math.frexp")
    return typer.intrinsic("math.frexp", T.TupleType((ft, T.int32)),
                           (typer.coerce(a, ft, node),), node)


def _modf(typer, node):
    (a,) = call_args(typer, node, 1, 1, "math.modf")
    ft = _float_of(typer, a, node.args[0], "math.modf")
    return typer.intrinsic("math.modf", T.TupleType((ft, ft)), (typer.coerce(a, ft, node),), node)


def _ldexp(typer, node):
    a, n = call_args(typer, node, 2, 2, "math.ldexp")
    ft = _float_of(typer, a, node.args[0], "math.ldexp")
    nt = scalar_arg(typer, n, node.args[1], "math.ldexp()")
    if nt.kind not in "biu":
        typer.error(f"math.ldexp()'s exponent must be an integer, got {nt}", node.args[1])
    if nt.kind == "b" or n.weak:
        n = typer.coerce(n, T.int32, node)
    return typer.intrinsic("math.ldexp", ft, (typer.coerce(a, ft, node), n), node)


# --- lowering ------------------------------------------------------------------------------------

def _wide(fl, t: T.ScalarType, v):
    """(type computed in, value): half-precision floats in float32."""
    if t.bits == 16:
        return T.float32, convert(fl, v, t, T.float32)
    return t, v


def _pair(fl, t: T.TupleType, first, second):
    b = fl.builder
    s = ir.Constant(ll_type(t), ir.Undefined)
    return b.insert_value(b.insert_value(s, first, 0), second, 1)


def _lower_frexp(fl, e: Expr):
    b = fl.builder
    t0 = e.args[0].type
    t, x = _wide(fl, t0, fl.expr(e.args[0]))
    width, mant = (32, 23) if t == T.float32 else (64, 52)
    it = ir.IntType(width)
    emask, half_bias = (1 << (width - mant - 1)) - 1, (1 << (width - mant - 2)) - 2
    special = b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_ordered(
        "==", math_call(fl, "fabs", t, [x]), x.type(math.inf)))
    special = b.or_(special, b.fcmp_ordered("==", x, x.type(0.0)))
    subnormal = b.icmp_unsigned("==", b.and_(b.bitcast(x, it), it(emask << mant)), it(0))
    y = b.select(subnormal, b.fmul(x, x.type(2.0 ** 64)), x)
    bits = b.bitcast(y, it)
    field = b.and_(b.lshr(bits, it(mant)), it(emask))
    exp = b.sub(field, b.select(subnormal, it(half_bias + 64), it(half_bias)))
    exp = b.trunc(exp, I32) if width > 32 else exp
    m = b.bitcast(b.or_(b.and_(bits, it(~(emask << mant) & ((1 << width) - 1))),
                        it(half_bias << mant)), y.type)
    m = b.select(special, x, m)
    exp = b.select(special, I32(0), exp)
    return _pair(fl, e.type, convert(fl, m, t, t0), exp)


def _lower_modf(fl, e: Expr):
    b = fl.builder
    t = e.args[0].type
    x = fl.expr(e.args[0])
    whole = math_call(fl, "trunc", t, [x])
    infinite = b.fcmp_ordered("==", math_call(fl, "fabs", t, [x]), x.type(math.inf))
    frac = b.select(infinite, x.type(0.0), b.fsub(x, whole))
    return _pair(fl, e.type, math_call(fl, "copysign", t, [frac, x]), whole)


def _exponent32(fl, e: Expr):
    """ldexp's exponent as an int32, clamped (a wider one saturates the result anyway)."""
    b = fl.builder
    nt = e.args[1].type
    n = fl.expr(e.args[1])
    if nt.bits < 32:
        return b.sext(n, I32) if nt.kind == "i" else b.zext(n, I32)
    if nt.bits == 32 and nt.kind == "i":
        return n
    lo, hi = n.type(-(1 << 31)), n.type((1 << 31) - 1)
    if nt.kind == "i":
        n = b.select(b.icmp_signed("<", n, lo), lo, b.select(b.icmp_signed(">", n, hi), hi, n))
    else:
        n = b.select(b.icmp_unsigned(">", n, hi), hi, n)
    return b.trunc(n, I32) if nt.bits > 32 else n


def _ldexp_with(call):
    def lower(fl, e: Expr):
        t0 = e.type
        t, x = _wide(fl, t0, fl.expr(e.args[0]))
        return convert(fl, call(fl, t, x, _exponent32(fl, e)), t, t0)
    return lower


def _nvptx_ldexp(fl, t, x, n):
    fl.mod.needs_libdevice = True
    sym = "__nv_ldexpf" if t == T.float32 else "__nv_ldexp"
    return fl.builder.call(fl.mod.declare(sym, x.type, [x.type, I32]), [x, n])


def _host_ldexp(fl, t, x, n):
    sym = "ldexpf" if t == T.float32 else "ldexp"
    return fl.builder.call(fl.mod.declare(sym, x.type, [x.type, I32]), [x, n])


def _lower_round_to(fl, e: Expr):
    b = fl.builder
    t = e.type
    x = convert(fl, fl.expr(e.args[0]), t, T.float64)
    n = fl.expr(e.args[1])
    f64 = x.type

    def ten(k: int):
        return f64(10.0 ** k)

    positive = b.icmp_signed(">=", n, n.type(0))
    big = b.icmp_signed(">", n, n.type(22))
    k = b.select(positive, b.select(big, b.sub(n, n.type(22)), n), b.neg(n))
    pow1 = ten(0)
    for i in range(1, 23):  # exact powers of ten; beyond 1e22 pow()
        pow1 = b.select(b.icmp_signed("==", k, k.type(i)), ten(i), pow1)
    far = math_call(fl, "pow", T.float64, [ten(1), b.sitofp(k, f64)])
    pow1 = b.select(b.icmp_signed(">", k, k.type(22)), far, pow1)
    pow2 = b.select(b.and_(positive, big), ten(22), ten(0))
    y = b.select(positive, b.fmul(b.fmul(x, pow1), pow2), b.fdiv(x, pow1))
    z = math_call(fl, "rint", T.float64, [y])
    halfway = b.fcmp_ordered("==", math_call(fl, "fabs", T.float64, [b.fsub(y, z)]), f64(0.5))
    even = b.fmul(f64(2.0), math_call(fl, "rint", T.float64, [b.fmul(y, f64(0.5))]))
    z = b.select(halfway, even, z)
    r = b.select(positive, b.fdiv(b.fdiv(z, pow2), pow1), b.fmul(z, pow1))
    inf = f64(math.inf)
    r = b.select(b.fcmp_ordered("==", pow1, inf), b.fmul(x, f64(0.0)), r)
    keep = b.or_(b.fcmp_unordered("uno", x, x),
                 b.fcmp_ordered("==", math_call(fl, "fabs", T.float64, [x]), inf))
    keep = b.or_(keep, b.and_(positive, b.fcmp_ordered(
        "==", math_call(fl, "fabs", T.float64, [y]), inf)))
    return convert(fl, b.select(keep, x, r), T.float64, t)


register(Intrinsic(name="math.round_to", operands=Operands(FLOAT, INT, result=Same(0)),
                   lowering={ANY_TARGET: _lower_round_to}, pure=True))
register(Intrinsic(name="math.frexp", operands=Operands(FLOAT, result=PAIR),
                   lowering={ANY_TARGET: _lower_frexp}, calls={math.frexp: _frexp}, pure=True))
register(Intrinsic(name="math.modf", operands=Operands(FLOAT, result=PAIR),
                   lowering={ANY_TARGET: _lower_modf}, calls={math.modf: _modf}, pure=True))
register(Intrinsic(name="math.ldexp", operands=Operands(FLOAT, INT, result=FLOAT),
                   lowering={"nvptx": _ldexp_with(_nvptx_ldexp), "host": _ldexp_with(_host_ldexp)},
                   calls={math.ldexp: _ldexp}, pure=True))
