"""``math.frexp``, ``math.ldexp`` and ``math.modf`` in kernels, as numba-cuda has them
(issue 28): against Python's ``math`` on random values and the special ones; in PTX."""

import math

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan]


@cuda.jit
def float_parts(x, n, mant, expo, frac, whole, scaled):
    i = cuda.grid(1)
    if i < x.size:
        mant[i], expo[i] = math.frexp(x[i])
        frac[i], whole[i] = math.modf(x[i])
        scaled[i] = math.ldexp(x[i], n[i])


def _values(dtype):
    tiny = np.finfo(dtype).tiny
    normal = rng.uniform(-1e3, 1e3, 40) * 10.0 ** rng.integers(-20, 20, 40)
    subnormal = rng.uniform(-1, 1, 8) * tiny * 2.0 ** -rng.integers(1, 10, 8)
    return np.concatenate([normal, subnormal, SPECIAL]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_parts(kj_backend, dtype):
    x = _values(dtype)
    n = rng.integers(-1200, 1200, x.size).astype(np.int32)
    outs = [np.full(x.size, np.nan, dtype), np.full(x.size, -12345, np.int32),
            np.full(x.size, np.nan, dtype), np.full(x.size, np.nan, dtype),
            np.full(x.size, np.nan, dtype)]
    dev = [cuda.to_device(o) for o in outs]
    float_parts[1, 64](cuda.to_device(x), cuda.to_device(n), *dev)
    mant, expo, frac, whole, scaled = (d.copy_to_host() for d in dev)
    for i, v in enumerate(x.astype(float)):
        m, e = math.frexp(v) if math.isfinite(v) else (v, 0)  # numba: (x, 0) for inf, NaN
        assert (mant[i] == dtype(m) or math.isnan(m) and math.isnan(mant[i])), (v, mant[i])
        assert expo[i] == e, (v, expo[i])
        f, w = math.modf(v)
        assert np.array_equal([frac[i], whole[i]], np.array([f, w], dtype), equal_nan=True)
        assert np.signbit(frac[i]) == np.signbit(dtype(f)), (v, frac[i])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(scaled, np.ldexp(x, n))


@cuda.jit
def ldexp_wide(x, n, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.ldexp(x[i], n[i])


def test_ldexp_int64_exponent_clamps(kj_backend):
    """An exponent beyond int32 saturates as the exact ``x * 2**n`` would."""
    x = rng.uniform(0.5, 2, 4)
    n = np.array([2**40, -(2**40), 3, -3], dtype=np.int64)
    out = cuda.to_device(np.full(4, np.nan))
    ldexp_wide[1, 32](cuda.to_device(x), cuda.to_device(n), out)
    np.testing.assert_array_equal(out.copy_to_host(), [math.inf, 0.0, x[2] * 8, x[3] / 8])


@pytest.mark.parametrize("t", ["float32", "float64"])
def test_float_parts_ptx(t):
    ptx, _ = cuda.compile_ptx(float_parts.py_func,
                              f"void({t}[:], int32[:], {t}[:], int32[:], {t}[:], {t}[:], {t}[:])")
    assert ".entry" in ptx and "call" not in ptx  # libdevice's ldexp linked in; ptxas checks it


@cuda.jit
def frexp_complex(x, out):
    out[0], out[1] = math.frexp(x[0])


def test_frexp_of_complex_is_located():
    with pytest.raises(Exception) as info:
        frexp_complex[1, 1](np.ones(1, np.complex64), np.zeros(2))
    assert "math.frexp() needs a real number" in str(info.value)
    assert f"test_float_parts.py:{frexp_complex.py_func.__code__.co_firstlineno + 2}:" in str(
        info.value)


@cuda.jit
def angles(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = math.degrees(x[i])
        out[i, 1] = math.radians(x[i])
        out[i, 2] = np.rad2deg(x[i])
        out[i, 3] = np.deg2rad(x[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_degrees_radians(kj_backend, dtype):
    x = rng.uniform(-400, 400, 50).astype(dtype)
    out = cuda.to_device(np.full((50, 4), np.nan, dtype))
    angles[1, 64](cuda.to_device(x), out)
    got = out.copy_to_host()
    want = np.stack([np.degrees(x), np.radians(x), np.degrees(x), np.radians(x)], axis=1)
    np.testing.assert_allclose(got, want, rtol=2e-7 if dtype == np.float32 else 1e-15)


@cuda.jit
def round_to(x, n, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = round(x[i], n[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_ndigits(kj_backend, dtype):
    """numba's round(x, n): Python's result for ordinary values (half to even on the scaled
    value), x itself where x * 10**n overflows, a signed zero where 10**-n does."""
    x = (rng.uniform(-1, 1, 60) * 10.0 ** rng.integers(-3, 6, 60)).astype(dtype)
    n = rng.integers(-5, 6, 60).astype(np.int32)
    x[:6] = [np.finfo(dtype).max, 0.5425, -2.5, math.inf, math.nan, -3.75]
    n[:6] = [300 if dtype == np.float32 else 12, 3, 0, 2, 1, -400]
    out = cuda.to_device(np.full(60, np.nan, dtype))
    round_to[1, 64](cuda.to_device(x), cuda.to_device(n), out)
    got = out.copy_to_host()
    assert got[0] == x[0] and got[1] == dtype(round(float(x[1]), 3)) and got[2] == -2.0
    assert got[3] == math.inf and math.isnan(got[4])
    assert got[5] == 0.0 and np.signbit(got[5])
    for i in range(6, 60):
        assert got[i] == dtype(round(float(x[i]), int(n[i]))), (x[i], n[i], got[i])


@cuda.jit
def round_int_ndigits(x, out):
    out[0] = round(x[0], 2)


def test_round_of_int_with_ndigits_is_located():
    with pytest.raises(Exception) as info:
        round_int_ndigits[1, 1](np.ones(1, np.int64), np.zeros(1, np.int64))
    line = round_int_ndigits.py_func.__code__.co_firstlineno + 2
    assert "round() of an integer with ndigits is not supported" in str(info.value)
    assert f"test_float_parts.py:{line}:" in str(info.value)


def test_round_ndigits_ptx():
    ptx, _ = cuda.compile_ptx(round_to.py_func, "void(float32[:], int32[:], float32[:])")
    assert ".entry" in ptx and ".extern" not in ptx  # libdevice linked in; ptxas checks it
