"""``cuda.fp16``: numba's half-precision functions, as kaiojit device functions.

Each takes and returns float16 values (comparisons return bool); the transcendental ones
compute in float32 and round the result to float16, as CUDA's ``hexp`` and friends do.
"""

from __future__ import annotations

import math

import numpy as np

from .. import fma as _fma
from .. import jit as _jit
from ..types import float16, float32

_device = _jit(device=True)


@_device
def hadd(a, b):
    return float16(a + b)


@_device
def hsub(a, b):
    return float16(a - b)


@_device
def hmul(a, b):
    return float16(a * b)


@_device
def hdiv(a, b):
    return float16(float32(a) / float32(b))


@_device
def hneg(a):
    return float16(-a)


@_device
def habs(a):
    return float16(abs(a))


@_device
def hfma(a, b, c):
    # one rounding to float16 (kj.fma of float16s: fma.rn.f16 on the GPU); an fma in float32
    # then a conversion rounded twice and missed by an ulp (1.359 * 1.031 - 6e-08)
    return _fma(float16(a), float16(b), float16(c))


@_device
def heq(a, b):
    return a == b


@_device
def hne(a, b):
    return a != b


@_device
def hge(a, b):
    return a >= b


@_device
def hgt(a, b):
    return a > b


@_device
def hle(a, b):
    return a <= b


@_device
def hlt(a, b):
    return a < b


@_device
def hmax(a, b):
    return float16(max(a, b))


@_device
def hmin(a, b):
    return float16(min(a, b))


@_device
def hsqrt(a):
    return float16(math.sqrt(float32(a)))


@_device
def hrsqrt(a):
    return float16(float32(1.0) / math.sqrt(float32(a)))


@_device
def hrcp(a):
    return float16(float32(1.0) / float32(a))


@_device
def hceil(a):
    return float16(np.ceil(float32(a)))


@_device
def hfloor(a):
    return float16(np.floor(float32(a)))


@_device
def htrunc(a):
    return float16(np.trunc(float32(a)))


@_device
def hrint(a):
    return float16(np.rint(float32(a)))


@_device
def hexp(a):
    return float16(math.exp(float32(a)))


@_device
def hexp2(a):
    return float16(math.pow(float32(2.0), float32(a)))


@_device
def hexp10(a):
    return float16(math.pow(float32(10.0), float32(a)))


@_device
def hlog(a):
    return float16(math.log(float32(a)))


@_device
def hlog2(a):
    return float16(math.log2(float32(a)))


@_device
def hlog10(a):
    return float16(math.log10(float32(a)))


@_device
def hcos(a):
    return float16(math.cos(float32(a)))


@_device
def hsin(a):
    return float16(math.sin(float32(a)))


__all__ = [
    "habs", "hadd", "hceil", "hcos", "hdiv", "heq", "hexp", "hexp2", "hexp10", "hfloor", "hfma",
    "hge", "hgt", "hle", "hlog", "hlog2", "hlog10", "hlt", "hmax", "hmin", "hmul", "hne", "hneg",
    "hrcp", "hrint", "hrsqrt", "hsin", "hsqrt", "hsub", "htrunc",
]
