"""``cuda.bf16``: numba-cuda's bfloat16 functions, as kaiojit device functions and intrinsics.

Arithmetic computes in float32 and rounds once to bfloat16: a float32 holds more than twice a
bfloat16's 8 bits (plus two), so ``+ - * /`` and ``sqrt`` are correctly rounded, as the GPU's
``__hadd`` and friends are. ``hfma`` computes in float64 (its product is exact there). The
``_sat`` forms clamp to [0, 1] (NaN gives 0), ``hfma_relu`` clamps below at 0 (NaN stays NaN);
``hmax``/``hmin`` return the number when one operand is NaN, ``hmax_nan``/``hmin_nan`` NaN.
The conversions with a rounding mode are intrinsics (``kaiojit/intrinsics/bf16conv.py``).
"""

from __future__ import annotations

import math

import numpy as np

from .. import fma as _fma
from .. import jit as _jit
from ..intrinsics.bf16conv import FUNCTIONS as _CONVERSIONS
from ..types import bfloat16, float32, float64, int32

nv_bfloat16 = bfloat16
globals().update(_CONVERSIONS)
_f64_to_bf16 = _CONVERSIONS["float64_to_bfloat16"]

_device = _jit(device=True)


@_device
def hadd(a, b):
    return bfloat16(float32(a) + float32(b))


@_device
def hsub(a, b):
    return bfloat16(float32(a) - float32(b))


@_device
def hmul(a, b):
    return bfloat16(float32(a) * float32(b))


hadd_rn, hsub_rn, hmul_rn = hadd, hsub, hmul  # never contracted into an fma here


@_device
def hdiv(a, b):
    return bfloat16(float32(a) / float32(b))


@_device
def hneg(a):
    return bfloat16(-float32(a))


@_device
def habs(a):
    return bfloat16(abs(float32(a)))


@_device
def hfma(a, b, c):
    return _f64_to_bf16(_fma(float64(a), float64(b), float64(c)))


@_device
def _unit(x):
    """``x`` clamped to [0, 1]; NaN gives 0."""
    if not x > float32(0.0):
        return float32(0.0)
    if x > float32(1.0):
        return float32(1.0)
    return x


@_device
def hadd_sat(a, b):
    return bfloat16(_unit(float32(a) + float32(b)))


@_device
def hsub_sat(a, b):
    return bfloat16(_unit(float32(a) - float32(b)))


@_device
def hmul_sat(a, b):
    return bfloat16(_unit(float32(a) * float32(b)))


@_device
def hfma_sat(a, b, c):
    r = float32(_f64_to_bf16(_fma(float64(a), float64(b), float64(c))))
    return bfloat16(_unit(r))


@_device
def hfma_relu(a, b, c):
    r = hfma(a, b, c)
    if float32(r) < float32(0.0):
        return bfloat16(0.0)
    return r


@_device
def heq(a, b):
    return float32(a) == float32(b)


@_device
def hne(a, b):
    return float32(a) != float32(b)


@_device
def hge(a, b):
    return float32(a) >= float32(b)


@_device
def hgt(a, b):
    return float32(a) > float32(b)


@_device
def hle(a, b):
    return float32(a) <= float32(b)


@_device
def hlt(a, b):
    return float32(a) < float32(b)


@_device
def hisnan(a):
    return math.isnan(float32(a))


@_device
def hisinf(a):
    """1 for +inf, -1 for -inf, else 0 (CUDA's ``__hisinf``)."""
    x = float32(a)
    if math.isinf(x):
        return int32(1) if x > float32(0.0) else int32(-1)
    return int32(0)


@_device
def hmax(a, b):
    x, y = float32(a), float32(b)
    if math.isnan(x):
        return b
    if math.isnan(y) or x >= y:
        return a
    return b


@_device
def hmin(a, b):
    x, y = float32(a), float32(b)
    if math.isnan(x):
        return b
    if math.isnan(y) or x <= y:
        return a
    return b


@_device
def hmax_nan(a, b):
    x, y = float32(a), float32(b)
    if math.isnan(x) or math.isnan(y):
        return bfloat16(x + y)
    return a if x >= y else b


@_device
def hmin_nan(a, b):
    x, y = float32(a), float32(b)
    if math.isnan(x) or math.isnan(y):
        return bfloat16(x + y)
    return a if x <= y else b


@_device
def htrunc(a):
    return bfloat16(np.trunc(float32(a)))


@_device
def hceil(a):
    return bfloat16(np.ceil(float32(a)))


@_device
def hfloor(a):
    return bfloat16(np.floor(float32(a)))


@_device
def hrint(a):
    return bfloat16(np.rint(float32(a)))


@_device
def hsqrt(a):
    return bfloat16(math.sqrt(float32(a)))


@_device
def hrsqrt(a):
    return bfloat16(float32(1.0) / math.sqrt(float32(a)))


@_device
def hrcp(a):
    return bfloat16(float32(1.0) / float32(a))


@_device
def hlog(a):
    return bfloat16(math.log(float32(a)))


@_device
def hlog2(a):
    return bfloat16(math.log2(float32(a)))


@_device
def hlog10(a):
    return bfloat16(math.log10(float32(a)))


@_device
def hcos(a):
    return bfloat16(math.cos(float32(a)))


@_device
def hsin(a):
    return bfloat16(math.sin(float32(a)))


@_device
def htanh(a):
    return bfloat16(math.tanh(float32(a)))


htanh_approx = htanh


@_device
def hexp(a):
    return bfloat16(math.exp(float32(a)))


@_device
def hexp2(a):
    return bfloat16(math.exp2(float32(a)))


@_device
def hexp10(a):
    return bfloat16(math.pow(float32(10.0), float32(a)))


__all__ = [  # noqa: PLE0604
    "bfloat16", "habs", "hadd", "hadd_rn", "hadd_sat", "hceil", "hcos", "hdiv", "heq", "hexp",
    "hexp2", "hexp10", "hfloor", "hfma", "hfma_relu", "hfma_sat", "hge", "hgt", "hisinf",
    "hisnan", "hle", "hlog", "hlog2", "hlog10", "hlt", "hmax", "hmax_nan", "hmin", "hmin_nan",
    "hmul", "hmul_rn", "hmul_sat", "hne", "hneg", "hrcp", "hrint", "hrsqrt", "hsin", "hsqrt",
    "hsub", "hsub_rn", "hsub_sat", "htanh", "htanh_approx", "htrunc", "nv_bfloat16",
    *_CONVERSIONS,
]
