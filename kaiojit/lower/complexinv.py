"""The inverse trigonometric and hyperbolic functions of a complex number (``cmath.acos``,
``asin``, ``atan``, ``acosh``, ``asinh``, ``atanh``, and NumPy's ``arccos`` ... of complex
arrays), and ``tanh`` / ``tan`` by Kahan's formula.

Each is computed from real functions of the parts, as CPython's ``cmath`` computes them
(Kahan's "Branch cuts for complex elementary functions"): square roots of ``1 - z`` and
``1 + z`` for moderate arguments, a logarithm of ``|z|`` for huge ones (where ``1 - z`` would
lose ``z``'s size), and C99 Annex G's values where a part is infinite, NaN or zero, so that a
kernel gives what ``cmath`` gives on the host. Branch-free: both forms are computed and one is
selected, as a GPU prefers.
"""

from __future__ import annotations

import math

from llvmlite import ir

from .. import types as T
from . import complexops as C


class _Reals:
    """Real arithmetic on floats of one type, spelled shortly (IEEE, never fast-math: the
    special values are the point)."""

    def __init__(self, fl, pt: T.ScalarType):
        self.fl, self.pt, self.b = fl, pt, fl.builder
        self.lt = ir.FloatType() if pt == T.float32 else ir.DoubleType()
        finfo_max = 3.4028234663852886e38 if pt == T.float32 else 1.7976931348623157e308
        finfo_tiny = 1.1754943508222875e-38 if pt == T.float32 else 2.2250738585072014e-308
        self.large = finfo_max / 4  # beyond it, 1 +- z and |z|**2 lose or overflow
        self.sqrt_large = math.sqrt(self.large)
        self.sqrt_tiny = math.sqrt(finfo_tiny)
        self.log_large = math.log(self.large)

    def k(self, x: float):
        return ir.Constant(self.lt, x)

    def f(self, name: str, *args):
        return C._REAL["math_call"](self.fl, name, self.pt, list(args))

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def cmp(self, op: str, a, b):
        return self.b.fcmp_ordered(op, a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def isinf(self, a):
        return self.cmp("==", self.f("fabs", a), self.k(math.inf))

    def finite(self, a):
        return self.cmp("<", self.f("fabs", a), self.k(math.inf))

    def both(self, a, b):
        return self.b.and_(a, b)

    def either(self, a, b):
        return self.b.or_(a, b)

    def pick(self, cond, a, b):
        return self.b.select(cond, a, b)

    def sqrt(self, x, y):
        return C._sqrt_parts(self.fl, self.pt, x, y)

    def log_half_hypot(self, x, y):
        """log(2|z|), the size term of the huge-argument forms, computed as
        log(hypot(x/2, y/2)) + log 4 so that |z| never overflows."""
        half = self.k(0.5)
        return self.add(self.f("log", self.f("hypot", self.mul(x, half), self.mul(y, half))),
                        self.k(math.log(4.0)))

    def huge(self, x, y):
        big = self.k(self.large)
        return self.either(self.cmp(">", self.f("fabs", x), big),
                           self.cmp(">", self.f("fabs", y), big))

    def positive_if_nan(self, sign, v):
        """``sign`` for copysign, +1 where it is NaN (Annex G's choice of the sign there)."""
        return self.pick(self.isnan(v), self.k(1.0), sign)


def _acos(fl, pt, x, y):
    r = _Reals(fl, pt)
    y_nan = r.isnan(y)
    big_re = r.f("atan2", r.f("fabs", y), x)
    big_im = r.f("copysign", r.log_half_hypot(x, y), r.positive_if_nan(r.neg(y), y))
    s1r, s1i = r.sqrt(r.sub(r.k(1.0), x), r.neg(y))
    s2r, s2i = r.sqrt(r.add(r.k(1.0), x), y)
    re = r.mul(r.k(2.0), r.f("atan2", s1r, s2r))
    re = r.pick(r.both(r.cmp("==", x, r.k(0.0)), y_nan), r.k(math.pi / 2), re)
    im = r.f("asinh", r.sub(r.mul(s2r, s1i), r.mul(s2i, s1r)))
    big = r.huge(x, y)
    return r.pick(big, big_re, re), r.pick(big, big_im, im)


def _asinh(fl, pt, x, y):
    r = _Reals(fl, pt)
    big_re = r.f("copysign", r.log_half_hypot(x, y), r.positive_if_nan(x, x))
    big_im = r.f("atan2", y, r.f("fabs", x))
    s1r, s1i = r.sqrt(r.add(r.k(1.0), y), r.neg(x))
    s2r, s2i = r.sqrt(r.sub(r.k(1.0), y), x)
    re = r.f("asinh", r.sub(r.mul(s1r, s2i), r.mul(s2r, s1i)))
    im = r.f("atan2", y, r.sub(r.mul(s1r, s2r), r.mul(s1i, s2i)))
    im = r.pick(r.both(r.cmp("==", y, r.k(0.0)), r.isnan(x)), y, im)  # asinh(nan +- 0i)
    big = r.huge(x, y)
    return r.pick(big, big_re, re), r.pick(big, big_im, im)


def _acosh(fl, pt, x, y):
    r = _Reals(fl, pt)
    big_re, big_im = r.log_half_hypot(x, y), r.f("atan2", y, x)
    s1r, s1i = r.sqrt(r.sub(x, r.k(1.0)), y)
    s2r, s2i = r.sqrt(r.add(x, r.k(1.0)), y)
    re = r.f("asinh", r.add(r.mul(s1r, s2r), r.mul(s1i, s2i)))
    im = r.mul(r.k(2.0), r.f("atan2", s1i, s2r))
    big = r.huge(x, y)
    return r.pick(big, big_re, re), r.pick(big, big_im, im)


def _atanh(fl, pt, x0, y0):
    """atanh(z) = -atanh(-z) reduces to a non-negative real part; then three regions: huge
    (or NaN) z, z next to the singularity at 1, and the log1p form everywhere else."""
    r = _Reals(fl, pt)
    flip = r.cmp("<", x0, r.k(0.0))
    x, y = r.pick(flip, r.neg(x0), x0), r.pick(flip, r.neg(y0), y0)
    ay = r.f("fabs", y)
    x_nan, y_nan, ay_inf = r.isnan(x), r.isnan(y), r.isinf(ay)
    # huge or NaN real part: atanh tends to 0 + i pi/2 (signed as y)
    half = r.k(0.5)
    h = r.f("hypot", r.mul(x, half), r.mul(y, half))
    big_re = r.div(r.div(r.div(x, r.k(4.0)), h), h)
    big_re = r.pick(ay_inf, r.f("copysign", r.k(0.0), x),
                    r.pick(r.isinf(x), r.k(0.0), big_re))
    big_im = r.f("copysign", r.k(math.pi / 2), y)
    big = r.either(x_nan, r.either(r.cmp(">", x, r.k(r.sqrt_large)),
                                   r.cmp(">", ay, r.k(r.sqrt_large))))
    # z next to 1 (|y| tiny): a pole at exactly 1
    one_re = r.neg(r.f("log", r.div(r.f("sqrt", ay), r.f("sqrt", r.f("hypot", ay, r.k(2.0))))))
    one_im = r.f("copysign", r.mul(r.f("atan2", r.k(2.0), r.neg(ay)), half), y)
    y_zero = r.cmp("==", ay, r.k(0.0))
    one_re, one_im = r.pick(y_zero, r.k(math.inf), one_re), r.pick(y_zero, y, one_im)
    near_one = r.both(r.cmp("==", x, r.k(1.0)), r.cmp("<", ay, r.k(r.sqrt_tiny)))
    # everywhere else
    zr1 = r.sub(r.k(1.0), x)
    sqay = r.mul(ay, ay)
    re = r.mul(r.f("log1p", r.div(r.mul(r.k(4.0), x), r.add(r.mul(zr1, zr1), sqay))),
               r.k(0.25))
    im = r.mul(r.neg(r.f("atan2", r.mul(r.k(-2.0), y),
                         r.sub(r.mul(zr1, r.add(r.k(1.0), x)), sqay))), half)
    re = r.pick(big, big_re, r.pick(near_one, one_re, re))
    im = r.pick(big, big_im, r.pick(near_one, one_im, im))
    # Annex G: a NaN imaginary part, or a NaN real part with a finite one, gives a NaN
    # imaginary part; atanh(+-0 + i nan) keeps the zero
    im = r.pick(r.either(y_nan, r.both(x_nan, r.b.not_(ay_inf))), r.k(math.nan), im)
    re = r.pick(r.both(r.cmp("==", x, r.k(0.0)), y_nan), x, re)
    return r.pick(flip, r.neg(re), re), r.pick(flip, r.neg(im), im)


def _rotated(inner):
    """f(z) = -i g(iz) (asin from asinh, atan from atanh, tan from tanh)."""
    def lower(fl, pt, x, y):
        a, b = inner(fl, pt, fl.builder.fneg(y), x)
        return b, fl.builder.fneg(a)
    return lower


def _tanh(fl, pt, x, y):
    """Kahan's tanh: with t = tanh x, u = tan y, s = 1/cosh x and d = 1 + t²u²,
    tanh(x + iy) = t(1 + u²)/d + i u s²/d; for |x| past log(max/4), sign(x) + i 4 sin y
    cos y e^(-2|x|) (cosh would overflow). Annex G's values where a part is not finite."""
    r = _Reals(fl, pt)
    ax = r.f("fabs", x)
    t, u = r.f("tanh", x), r.f("tan", y)
    s = r.div(r.k(1.0), r.f("cosh", x))
    tu = r.mul(t, u)
    d = r.add(r.k(1.0), r.mul(tu, tu))
    re = r.div(r.mul(t, r.add(r.k(1.0), r.mul(u, u))), d)
    im = r.mul(r.mul(r.div(u, d), s), s)
    big = r.cmp(">", ax, r.k(r.log_large))
    big_re = r.f("copysign", r.k(1.0), x)
    big_im = r.mul(r.mul(r.mul(r.k(4.0), r.f("sin", y)), r.f("cos", y)),
                   r.f("exp", r.mul(r.k(-2.0), ax)))
    y_finite = r.finite(y)
    x_inf = r.cmp("==", ax, r.k(math.inf))
    big_im = r.pick(r.both(x_inf, r.b.not_(y_finite)), r.f("copysign", r.k(0.0), y), big_im)
    re, im = r.pick(big, big_re, re), r.pick(big, big_im, im)
    im = r.pick(r.cmp("==", y, r.k(0.0)), y, im)  # tanh of a real number is real
    finite_x_bad_y = r.both(r.finite(x), r.b.not_(y_finite))
    nan = r.k(math.nan)
    return r.pick(finite_x_bad_y, nan, re), r.pick(finite_x_bad_y, nan, im)


def rect_parts(fl, pt, radius, phi):
    """cmath.rect(r, phi) = r cos phi + i r sin phi, with CPython's values where r or phi is
    not finite or phi is zero (r + i r*phi, which keeps an infinite r's sign)."""
    rr = _Reals(fl, pt)
    re = rr.mul(radius, rr.f("cos", phi))
    im = rr.mul(radius, rr.f("sin", phi))
    zero = rr.k(0.0)
    phi_zero = rr.cmp("==", phi, zero)
    re = rr.pick(phi_zero, radius, re)
    im = rr.pick(phi_zero, rr.pick(rr.finite(radius), rr.mul(radius, phi), zero), im)
    phi_bad = rr.b.not_(rr.finite(phi))
    zero_bad = rr.both(rr.cmp("==", radius, zero), phi_bad)  # 0 at any angle is 0
    re, im = rr.pick(zero_bad, zero, re), rr.pick(zero_bad, zero, im)
    inf_nan = rr.both(rr.isinf(radius), rr.isnan(phi))
    return rr.pick(inf_nan, rr.k(math.inf), re), rr.pick(inf_nan, rr.k(math.nan), im)


INVERSE = {
    "acos": _acos, "asin": _rotated(_asinh), "atan": _rotated(_atanh),
    "acosh": _acosh, "asinh": _asinh, "atanh": _atanh,
    "tanh": _tanh, "tan": _rotated(_tanh),
}

# every cmath function of one complex number with a complex result, by name
CMATH = {**C.CMATH_COMPLEX, **INVERSE}


def cmath_call(fl, name: str, t: T.ScalarType, v):
    """``cmath.<name>`` of the complex value ``v`` of type ``t``."""
    return C.make(fl, t, *CMATH[name](fl, t.component, *C.parts(fl, v)))
