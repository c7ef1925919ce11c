"""Complex numbers for every target: a complex value is an LLVM ``{float, float}`` (or
``{double, double}``) struct, real part first, as NumPy lays complex numbers out in memory.

Arithmetic follows NumPy's loops (``+ - *`` on the parts, ``/`` by Smith's method, as NumPy's
complex division does); the ``cmath`` functions are built from real math functions of the
parts, which every target lowers (libdevice on the GPU, libm on the host).
"""

from __future__ import annotations

import math

from llvmlite import ir

from .. import types as T
from .llvmtypes import ll_type

# The real operations complex ones are built from (``ops.math_call`` and ``ops.convert``),
# handed over by ``ops`` when it is imported: ops dispatches complex operands here, so this
# module cannot import it back.
_REAL: dict = {}


def use_real_operations(math_call, convert) -> None:
    _REAL.update(math_call=math_call, convert=convert)


# --- parts ------------------------------------------------------------------------------------

def parts(fl, v):
    b = fl.builder
    return b.extract_value(v, 0), b.extract_value(v, 1)


def make(fl, t: T.ScalarType, re, im):
    b = fl.builder
    pair = ir.Constant(ll_type(t), ir.Undefined)
    return b.insert_value(b.insert_value(pair, re, 0), im, 1)


def _fc(v, x: float):
    return ir.Constant(v.type, x)


# --- conversions and comparisons --------------------------------------------------------------

def convert(fl, v, src: T.ScalarType, dst: T.ScalarType):
    """A conversion where ``src`` or ``dst`` is complex (NumPy's casts: a real number gets a
    zero imaginary part; complex to real keeps the real part; to bool tests both parts)."""
    real_convert = _REAL["convert"]
    b = fl.builder
    if src.is_complex and dst.is_complex:
        re, im = parts(fl, v)
        return make(fl, dst, real_convert(fl, re, src.component, dst.component),
                    real_convert(fl, im, src.component, dst.component))
    if dst.is_complex:
        part = dst.component
        re = real_convert(fl, v, src, part)
        return make(fl, dst, re, _fc(re, 0.0))
    re, im = parts(fl, v)
    if dst.is_bool:
        zero = _fc(re, 0.0)
        return b.or_(b.fcmp_unordered("!=", re, zero), b.fcmp_unordered("!=", im, zero))
    return real_convert(fl, re, src.component, dst)


def compare(fl, op: str, a, b_):
    """``==`` or ``!=`` (the typer allows no ordering of complex numbers)."""
    b = fl.builder
    (ar, ai), (br, bi) = parts(fl, a), parts(fl, b_)
    if op == "==":
        return b.and_(b.fcmp_ordered("==", ar, br), b.fcmp_ordered("==", ai, bi))
    return b.or_(b.fcmp_unordered("!=", ar, br), b.fcmp_unordered("!=", ai, bi))


# --- arithmetic -------------------------------------------------------------------------------

def neg(fl, t: T.ScalarType, v):
    b = fl.builder
    re, im = parts(fl, v)
    return make(fl, t, b.fneg(re, flags=fl.fastmath), b.fneg(im, flags=fl.fastmath))


def conj(fl, t: T.ScalarType, v):
    re, im = parts(fl, v)
    return make(fl, t, re, fl.builder.fneg(im))


def mul_parts(fl, ar, ai, br, bi):
    b, fm = fl.builder, fl.fastmath
    re = b.fsub(b.fmul(ar, br, flags=fm), b.fmul(ai, bi, flags=fm), flags=fm)
    im = b.fadd(b.fmul(ar, bi, flags=fm), b.fmul(ai, br, flags=fm), flags=fm)
    return re, im


def div_parts(fl, ar, ai, br, bi):
    """Smith's method, as NumPy's complex division (scales by the larger part of the divisor,
    so |b|**2 never overflows)."""
    math_call = _REAL["math_call"]
    b, fm = fl.builder, fl.fastmath
    t = T.float32 if ar.type == ir.FloatType() else T.float64
    abr, abi = math_call(fl, "fabs", t, [br]), math_call(fl, "fabs", t, [bi])
    real_big = b.fcmp_ordered(">=", abr, abi)
    # |br| >= |bi|
    rat1 = b.fdiv(bi, br, flags=fm)
    scl1 = b.fdiv(_fc(ar, 1.0), b.fadd(br, b.fmul(bi, rat1, flags=fm), flags=fm), flags=fm)
    re1 = b.fmul(b.fadd(ar, b.fmul(ai, rat1, flags=fm), flags=fm), scl1, flags=fm)
    im1 = b.fmul(b.fsub(ai, b.fmul(ar, rat1, flags=fm), flags=fm), scl1, flags=fm)
    # both zero: NumPy divides each part by the zero magnitudes (inf or nan)
    both_zero = b.and_(b.fcmp_ordered("==", abr, _fc(ar, 0.0)),
                       b.fcmp_ordered("==", abi, _fc(ar, 0.0)))
    re1 = b.select(both_zero, b.fdiv(ar, abr, flags=fm), re1)
    im1 = b.select(both_zero, b.fdiv(ai, abi, flags=fm), im1)
    # |bi| > |br|
    rat2 = b.fdiv(br, bi, flags=fm)
    scl2 = b.fdiv(_fc(ar, 1.0), b.fadd(bi, b.fmul(br, rat2, flags=fm), flags=fm), flags=fm)
    re2 = b.fmul(b.fadd(b.fmul(ar, rat2, flags=fm), ai, flags=fm), scl2, flags=fm)
    im2 = b.fmul(b.fsub(b.fmul(ai, rat2, flags=fm), ar, flags=fm), scl2, flags=fm)
    return b.select(real_big, re1, re2), b.select(real_big, im1, im2)


def binop(fl, op: str, t: T.ScalarType, a, b_):
    b, fm = fl.builder, fl.fastmath
    (ar, ai), (br, bi) = parts(fl, a), parts(fl, b_)
    if op == "+":
        return make(fl, t, b.fadd(ar, br, flags=fm), b.fadd(ai, bi, flags=fm))
    if op == "-":
        return make(fl, t, b.fsub(ar, br, flags=fm), b.fsub(ai, bi, flags=fm))
    if op == "*":
        return make(fl, t, *mul_parts(fl, ar, ai, br, bi))
    if op == "/":
        return make(fl, t, *div_parts(fl, ar, ai, br, bi))
    if op == "**":
        n = _small_integer(b_)
        if n is not None:  # NumPy multiplies out small integer powers: exact where it can be
            return make(fl, t, *_integer_power(fl, ar, ai, n))
        # a ** b = exp(b * log(a)); 0 ** b is 0 for b with a positive real part
        lr, li = _log_parts(fl, t.component, ar, ai)
        er, ei = _exp_parts(fl, t.component, *mul_parts(fl, br, bi, lr, li))
        zero, one = _fc(ar, 0.0), _fc(ar, 1.0)
        a_zero = b.and_(b.fcmp_ordered("==", ar, zero), b.fcmp_ordered("==", ai, zero))
        b_zero = b.and_(b.fcmp_ordered("==", br, zero), b.fcmp_ordered("==", bi, zero))
        re, im = b.select(a_zero, zero, er), b.select(a_zero, zero, ei)
        return make(fl, t, b.select(b_zero, one, re), b.select(b_zero, zero, im))  # a ** 0j = 1
    raise AssertionError(f"complex binop {op}")


def _small_integer(v) -> int | None:
    """The exponent if ``v`` is a constant complex number with an integer real part of at
    most 100 in magnitude and no imaginary part (NumPy's fast path for powers)."""
    if not isinstance(v, ir.Constant) or not isinstance(v.constant, (list, tuple)):
        return None
    re, im = (c.constant for c in v.constant)
    if im != 0 or re != int(re) or abs(re) > 100:
        return None
    return int(re)


def _integer_power(fl, ar, ai, n: int):
    """a ** n by squaring (a reciprocal for negative n, as NumPy's ``cpow``)."""
    one, zero = _fc(ar, 1.0), _fc(ar, 0.0)
    rr, ri = one, zero
    br, bi = ar, ai
    k = abs(n)
    while k:
        if k & 1:
            rr, ri = mul_parts(fl, rr, ri, br, bi)
        k >>= 1
        if k:
            br, bi = mul_parts(fl, br, bi, br, bi)
    if n < 0:
        rr, ri = div_parts(fl, one, zero, rr, ri)
    return rr, ri


# --- cmath ------------------------------------------------------------------------------------

def _exp_parts(fl, pt: T.ScalarType, x, y):
    math_call = _REAL["math_call"]
    b = fl.builder
    r = math_call(fl, "exp", pt, [x])
    c, s = math_call(fl, "cos", pt, [y]), math_call(fl, "sin", pt, [y])
    # a zero imaginary part stays exactly zero (exp of a real number)
    y_zero = b.fcmp_ordered("==", y, _fc(y, 0.0))
    re, im = b.fmul(r, c), b.select(y_zero, y, b.fmul(r, s))
    # C99 Annex G: exp(-inf + i(inf or nan)) = 0; exp(+inf + i(inf or nan)) = inf + i nan
    y_bad = b.not_(_finite(fl, pt, y))
    neg_inf = b.and_(y_bad, b.fcmp_ordered("==", x, _fc(x, -math.inf)))
    pos_inf = b.and_(y_bad, b.fcmp_ordered("==", x, _fc(x, math.inf)))
    zero = _fc(x, 0.0)
    re = b.select(neg_inf, zero, b.select(pos_inf, x, re))
    im = b.select(neg_inf, zero, b.select(pos_inf, _fc(x, math.nan), im))
    return re, im


def _finite(fl, pt: T.ScalarType, v):
    """v is neither infinite nor NaN (an i1)."""
    fabs = _REAL["math_call"](fl, "fabs", pt, [v])
    return fl.builder.fcmp_ordered("<", fabs, _fc(v, math.inf))


def _log_parts(fl, pt: T.ScalarType, x, y):
    math_call = _REAL["math_call"]
    return (math_call(fl, "log", pt, [math_call(fl, "hypot", pt, [x, y])]),
            math_call(fl, "atan2", pt, [y, x]))


def _sqrt_parts(fl, pt: T.ScalarType, x, y):
    """The principal square root, as C's csqrt: t = sqrt((|x| + |z|) / 2)."""
    math_call = _REAL["math_call"]
    b = fl.builder
    zero = _fc(x, 0.0)
    ax, ay = math_call(fl, "fabs", pt, [x]), math_call(fl, "fabs", pt, [y])
    t = math_call(fl, "sqrt", pt, [b.fmul(b.fadd(ax, math_call(fl, "hypot", pt, [x, y])),
                                          _fc(x, 0.5))])
    two_t = b.fadd(t, t)
    pos_re, pos_im = t, b.fdiv(y, two_t)
    neg_re, neg_im = b.fdiv(ay, two_t), math_call(fl, "copysign", pt, [t, y])
    positive = b.fcmp_ordered(">=", x, zero)
    re = b.select(positive, pos_re, neg_re)
    im = b.select(positive, pos_im, neg_im)
    is_zero = b.and_(b.fcmp_ordered("==", x, zero), b.fcmp_ordered("==", y, zero))
    re, im = b.select(is_zero, zero, re), b.select(is_zero, y, im)
    y_inf = b.fcmp_ordered("==", ay, _fc(y, math.inf))  # Annex G: sqrt(x + i inf) = inf + i inf
    return b.select(y_inf, ay, re), b.select(y_inf, y, im)


def _hyperbolic_parts(fl, pt, x, y, cosh: bool):
    """sinh or cosh of x + iy from the real functions of the parts, with C99 Annex G's values
    where a part is infinite, NaN or zero (the plain formula gives NaN parts there)."""
    math_call = _REAL["math_call"]
    b = fl.builder

    def f(n, v):
        return math_call(fl, n, pt, [v])
    zero, nan = _fc(x, 0.0), _fc(x, math.nan)
    if cosh:
        re, im = b.fmul(f("cosh", x), f("cos", y)), b.fmul(f("sinh", x), f("sin", y))
        y_zero_im = b.fmul(math_call(fl, "copysign", pt, [zero, x]), y)
        y_zero_re = f("cosh", x)
        x_zero_re, x_zero_im = nan, b.fmul(x, zero)  # cosh(±0 + i(inf|nan)) = nan ± i0
    else:
        re, im = b.fmul(f("sinh", x), f("cos", y)), b.fmul(f("cosh", x), f("sin", y))
        y_zero_re, y_zero_im = f("sinh", x), y
        x_zero_re, x_zero_im = x, nan  # sinh(±0 + i(inf|nan)) = ±0 + i nan
    y_bad = b.not_(_finite(fl, pt, y))
    x_inf = b.fcmp_ordered("==", f("fabs", x), _fc(x, math.inf))
    x_zero = b.fcmp_ordered("==", x, zero)
    y_zero = b.fcmp_ordered("==", y, zero)
    inf_bad = b.and_(x_inf, y_bad)  # (inf, inf|nan) -> inf + i nan
    re = b.select(inf_bad, _fc(x, math.inf), re)
    im = b.select(inf_bad, nan, im)
    zero_bad = b.and_(x_zero, y_bad)
    re = b.select(zero_bad, x_zero_re, re)
    im = b.select(zero_bad, x_zero_im, im)
    return b.select(y_zero, y_zero_re, re), b.select(y_zero, y_zero_im, im)


def _trig_parts(name: str):
    """sin, cos, sinh, cosh of x + iy: sin z = -i sinh(iz), cos z = cosh(iz)."""
    def lower(fl, pt, x, y):
        b = fl.builder
        if name in ("sinh", "cosh"):
            return _hyperbolic_parts(fl, pt, x, y, name == "cosh")
        a, c = _hyperbolic_parts(fl, pt, b.fneg(y), x, name == "cos")
        return (a, c) if name == "cos" else (c, b.fneg(a))
    return lower


def _log_base_parts(base: float):
    """log10 and NumPy's log2 of a complex number: log(z) / log(base)."""
    def lower(fl, pt, x, y):
        re, im = _log_parts(fl, pt, x, y)
        scale = _fc(re, 1.0 / math.log(base))
        return fl.builder.fmul(re, scale), fl.builder.fmul(im, scale)
    return lower


_log10_parts = _log_base_parts(10.0)


# name -> (x, y) -> (re, im): the cmath functions of one complex number with a complex result
# (tan, tanh and the inverse functions are complexinv's, which builds on these)
CMATH_COMPLEX = {
    "exp": _exp_parts, "log": _log_parts, "log10": _log10_parts, "sqrt": _sqrt_parts,
    "log2": _log_base_parts(2.0),  # NumPy's (cmath has no log2)
    "sin": _trig_parts("sin"), "cos": _trig_parts("cos"),
    "sinh": _trig_parts("sinh"), "cosh": _trig_parts("cosh"),
}


def magnitude(fl, t: T.ScalarType, v):
    """abs(z): hypot of the parts (no overflow for large parts)."""
    math_call = _REAL["math_call"]
    return math_call(fl, "hypot", t.component, list(parts(fl, v)))


def phase(fl, t: T.ScalarType, v):
    math_call = _REAL["math_call"]
    re, im = parts(fl, v)
    return math_call(fl, "atan2", t.component, [im, re])


__all__ = ["binop", "compare", "conj", "convert", "magnitude", "make", "neg",
           "parts", "phase"]
