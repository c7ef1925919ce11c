"""``cuda.bf16`` (issue 28): numba-cuda's bfloat16 library. Conversions in each rounding mode
against an exact reference (fractions), arithmetic against float64 rounded once, the NaN
rules of ``hmax``/``hmax_nan`` and the saturating forms; on the host and in PTX."""

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.cuda import bf16

rng = np.random.default_rng()
MODES = ("rn", "rz", "rd", "ru")


def bf16_value(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def bf16_round(x, mode: str) -> int:
    """The bits of ``x`` (an int or float, exactly) rounded to bfloat16 in ``mode``."""
    exact = Fraction(x)
    near = struct.unpack("<I", struct.pack("<f", float(np.float32(float(x)))))[0] >> 16
    cands = set()
    for b in range(near - 3, near + 4):
        for bits in (b & 0xFFFF, (b ^ 0x8000) & 0xFFFF):
            v = bf16_value(bits)
            if math.isfinite(v):
                cands.add((Fraction(v), bits if v != 0 else (0x8000 if x < 0 else 0)))
    below = max(c for c in cands if c[0] <= exact)
    above = min(c for c in cands if c[0] >= exact)
    if mode == "rd" or mode == "rz" and exact >= 0:
        return below[1]
    if mode == "ru" or mode == "rz":
        return above[1]
    d_lo, d_hi = exact - below[0], above[0] - exact
    if d_lo != d_hi:
        return below[1] if d_lo < d_hi else above[1]
    return below[1] if below[1] % 2 == 0 else above[1]


@cuda.jit
def from_ints(i32, i64, u64, f32, f64, out):
    i = cuda.grid(1)
    if i < i32.size:
        out[i, 0] = bf16.bfloat16_as_int16(bf16.int32_to_bfloat16_rn(i32[i]))
        out[i, 1] = bf16.bfloat16_as_int16(bf16.int32_to_bfloat16_rz(i32[i]))
        out[i, 2] = bf16.bfloat16_as_int16(bf16.int32_to_bfloat16_rd(i32[i]))
        out[i, 3] = bf16.bfloat16_as_int16(bf16.int32_to_bfloat16_ru(i32[i]))
        out[i, 4] = bf16.bfloat16_as_int16(bf16.int64_to_bfloat16_rn(i64[i]))
        out[i, 5] = bf16.bfloat16_as_int16(bf16.int64_to_bfloat16_rz(i64[i]))
        out[i, 6] = bf16.bfloat16_as_int16(bf16.int64_to_bfloat16_rd(i64[i]))
        out[i, 7] = bf16.bfloat16_as_int16(bf16.int64_to_bfloat16_ru(i64[i]))
        out[i, 8] = bf16.bfloat16_as_int16(bf16.uint64_to_bfloat16_rn(u64[i]))
        out[i, 9] = bf16.bfloat16_as_int16(bf16.uint64_to_bfloat16_ru(u64[i]))
        out[i, 10] = bf16.bfloat16_as_int16(bf16.float32_to_bfloat16_rn(f32[i]))
        out[i, 11] = bf16.bfloat16_as_int16(bf16.float32_to_bfloat16_rz(f32[i]))
        out[i, 12] = bf16.bfloat16_as_int16(bf16.float32_to_bfloat16_rd(f32[i]))
        out[i, 13] = bf16.bfloat16_as_int16(bf16.float32_to_bfloat16_ru(f32[i]))
        out[i, 14] = bf16.bfloat16_as_int16(bf16.float64_to_bfloat16(f64[i]))
        out[i, 15] = bf16.bfloat16_as_int16(bf16.float64_to_bfloat16_rd(f64[i]))
        out[i, 16] = bf16.bfloat16_as_int16(bf16.float64_to_bfloat16_ru(f64[i]))


def test_conversions_to_bfloat16(kj_backend):
    n = 48
    i32 = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    i64 = (rng.integers(-(2**62), 2**62, n) >> rng.integers(0, 60, n)).astype(np.int64)
    i64[:3] = [-(2**63), 2**63 - 1, (1 << 60) + 1]  # the extremes, and one just past a tie
    u64 = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    f32 = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    f64 = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    f64[0] = float(np.float32(1.5)) + 2.0**-8 + 2.0**-40  # a float32 tie, a float64 above it
    out = cuda.to_device(np.full((n, 17), 0x5A5A, np.int16))
    args = [cuda.to_device(a) for a in (i32, i64, u64, f32, f64)]
    from_ints[1, 64](*args, out)
    got = out.copy_to_host().view(np.uint16)
    for i in range(n):
        want = [*(bf16_round(int(i32[i]), m) for m in MODES),
                *(bf16_round(int(i64[i]), m) for m in MODES),
                bf16_round(int(u64[i]), "rn"), bf16_round(int(u64[i]), "ru"),
                *(bf16_round(float(f32[i]), m) for m in MODES),
                bf16_round(float(f64[i]), "rn"), bf16_round(float(f64[i]), "rd"),
                bf16_round(float(f64[i]), "ru")]
        assert list(got[i]) == want, (i, i32[i], i64[i], u64[i], f32[i], f64[i])


def sat(x, lo, hi):
    return min(max(x, lo), hi)


@cuda.jit
def to_ints(bits, out):
    i = cuda.grid(1)
    if i < bits.size:
        a = bf16.int16_as_bfloat16(bits[i])
        out[i, 0] = bf16.bfloat16_to_int32_rn(a)
        out[i, 1] = bf16.bfloat16_to_int32_rz(a)
        out[i, 2] = bf16.bfloat16_to_int32_rd(a)
        out[i, 3] = bf16.bfloat16_to_int32_ru(a)
        out[i, 4] = bf16.bfloat16_to_int8_rz(a)
        out[i, 5] = bf16.bfloat16_to_uint16_ru(a)


def test_conversions_from_bfloat16(kj_backend):
    vals = rng.uniform(-300, 300, 40).astype(np.float32)
    vals[:4] = [2.5, -2.5, np.nan, 1e20]
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.int16)
    out = cuda.to_device(np.full((40, 6), -777, np.int64))
    to_ints[1, 64](cuda.to_device(bits), out)
    got = out.copy_to_host()
    for i, b in enumerate(bits.view(np.uint16)):
        v = bf16_value(int(b))
        if math.isnan(v):
            assert list(got[i]) == [0] * 6
            continue
        want = [sat(round(v), -(2**31), 2**31 - 1), sat(math.trunc(v), -(2**31), 2**31 - 1),
                sat(math.floor(v), -(2**31), 2**31 - 1), sat(math.ceil(v), -(2**31), 2**31 - 1),
                sat(math.trunc(v), -128, 127), sat(math.ceil(v), 0, 65535)]
        assert list(got[i]) == want, (v, list(got[i]))


@cuda.jit
def arithmetic(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = bf16.bfloat16(x[i])
        b = bf16.bfloat16(y[i])
        out[i, 0] = bf16.bfloat16_as_int16(bf16.hadd(a, b))
        out[i, 1] = bf16.bfloat16_as_int16(bf16.hmul(a, b))
        out[i, 2] = bf16.bfloat16_as_int16(bf16.hdiv(a, b))
        out[i, 3] = bf16.bfloat16_as_int16(bf16.hfma(a, b, a))
        out[i, 4] = bf16.bfloat16_as_int16(bf16.hsqrt(bf16.habs(a)))
        out[i, 5] = bf16.bfloat16_as_int16(bf16.hadd_sat(a, b))
        out[i, 6] = bf16.bfloat16_as_int16(bf16.hmax(a, bf16.bfloat16(float("nan"))))
        out[i, 7] = bf16.bfloat16_as_int16(bf16.hmin_nan(a, bf16.bfloat16(float("nan"))))
        out[i, 8] = bf16.hisinf(bf16.hdiv(a, bf16.bfloat16(0.0)))


def test_arithmetic_rounds_once(kj_backend):
    x = rng.uniform(-4, 4, 50).astype(np.float32)
    y = rng.uniform(0.25, 4, 50).astype(np.float32)
    out = cuda.to_device(np.full((50, 9), 0x5A5A, np.int16))
    arithmetic[1, 64](cuda.to_device(x), cuda.to_device(y), out)
    got = out.copy_to_host().view(np.uint16)
    for i in range(50):
        a = bf16_value(bf16_round(float(x[i]), "rn"))
        b = bf16_value(bf16_round(float(y[i]), "rn"))
        fa, fb = Fraction(a), Fraction(b)
        want = [bf16_round(fa + fb, "rn"), bf16_round(fa * fb, "rn"), bf16_round(fa / fb, "rn"),
                bf16_round(fa * fb + fa, "rn"), bf16_round(math.sqrt(abs(a)), "rn"),
                bf16_round(min(max(fa + fb, 0), 1), "rn"), bf16_round(a, "rn")]
        assert list(got[i, :7]) == want, (a, b)
        assert math.isnan(bf16_value(int(got[i, 7])))
        assert got[i, 8].astype(np.int16) == (1 if a > 0 else -1)


def test_bf16_ptx():
    ptx, _ = cuda.compile_ptx(from_ints.py_func, "void(int32[:], int64[:], uint64[:], "
                              "float32[:], float64[:], int16[:, :])")
    assert ".entry" in ptx  # ptxas checks it (tests/ptxas.py)


@cuda.jit
def bad_conversion(out):
    out[0] = bf16.bfloat16_as_int16(1j)


def test_conversion_of_complex_is_located():
    with pytest.raises(Exception) as info:
        bad_conversion[1, 1](np.zeros(1, np.int16))
    line = bad_conversion.py_func.__code__.co_firstlineno + 2  # under the decorator
    assert "bfloat16_as_int16() takes a bfloat16, got complex" in str(info.value)
    assert f"test_bf16_library.py:{line}:37:" in str(info.value)
