"""End to end: atomics (histograms and every operation), math functions against NumPy."""

import math

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()


@kj.jit
def histogram(bins, x, lo, hi):
    i = kj.grid(1)
    if i < x.size:
        k = int((x[i] - lo) / (hi - lo) * bins.size)
        if 0 <= k < bins.size:
            kj.atomic.add(bins, k, 1)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_histogram(kj_backend, dtype):
    n, nbins = 20000, 37
    x = rng.standard_normal(n)
    bins = kj.to_device(np.zeros(nbins, dtype))
    histogram[(n + 255) // 256, 256](bins, kj.to_device(x), -2.0, 2.0)
    k = np.trunc((x + 2.0) / 4.0 * nbins).astype(np.int64)   # int() truncates
    expect = np.bincount(k[(k >= 0) & (k < nbins)], minlength=nbins).astype(dtype)
    np.testing.assert_array_equal(bins.copy_to_host(), expect)


@kj.jit
def shared_histogram(bins, x):
    local_bins = kj.shared.array(16, kj.int32)
    t = kj.threadIdx.x
    if t < 16:
        local_bins[t] = 0
    kj.syncthreads()
    i = kj.grid(1)
    if i < x.size:
        kj.atomic.add(local_bins, x[i] % 16, 1)
    kj.syncthreads()
    if t < 16:
        kj.atomic.add(bins, t, local_bins[t])


def test_shared_memory_histogram(kj_backend):
    x = rng.integers(0, 1000, 7000).astype(np.int32)
    bins = kj.to_device(np.zeros(16, np.int32))
    shared_histogram[(7000 + 127) // 128, 128](bins, kj.to_device(x))
    np.testing.assert_array_equal(bins.copy_to_host(), np.bincount(x % 16, minlength=16))


@kj.jit
def int_atomics(acc, old, v):
    i = kj.grid(1)
    if i < v.size:
        old[i, 0] = kj.atomic.add(acc, 0, v[i])
        old[i, 1] = kj.atomic.sub(acc, 1, v[i])
        old[i, 2] = kj.atomic.max(acc, 2, v[i])
        old[i, 3] = kj.atomic.min(acc, 3, v[i])
        old[i, 4] = kj.atomic.and_(acc, 4, v[i])
        old[i, 5] = kj.atomic.or_(acc, 5, v[i])
        old[i, 6] = kj.atomic.xor(acc, 6, v[i])
        old[i, 7] = kj.atomic.exch(acc, 7, v[i])
        old[i, 8] = kj.atomic.cas(acc, 8, acc[8], v[i])


def test_integer_atomic_operations(kj_backend):
    n = 500
    v = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int64)
    init = np.array([5, 7, -(1 << 40), 1 << 40, -1, 0, 123, 9, 0], np.int64)
    acc = kj.to_device(init)
    old = kj.to_device(np.zeros((n, 9), np.int64))
    int_atomics[2, 256](acc, old, kj.to_device(v))
    got = acc.copy_to_host()
    assert got[0] == init[0] + v.sum()
    assert got[1] == init[1] - v.sum()
    assert got[2] == v.max() and got[3] == v.min()
    assert got[4] == np.bitwise_and.reduce(v) & init[4]
    assert got[5] == np.bitwise_or.reduce(v)
    assert got[6] == np.bitwise_xor.reduce(v) ^ init[6]
    assert got[7] in v
    # the old values of the adds chain: each thread's old + its value is the state the next
    # thread saw, or the final one (as multisets: {old + v} = {old} - {init} + {final})
    olds = old.copy_to_host()[:, 0]
    after = np.sort(olds + v)
    expected = np.sort(np.append(np.delete(olds, np.flatnonzero(olds == init[0])[0]), got[0]))
    np.testing.assert_array_equal(after, expected)


@kj.jit
def inc_dec(acc, n):
    i = kj.grid(1)
    if i < n:
        kj.atomic.inc(acc, 0, kj.uint32(9))
        kj.atomic.dec(acc, 1, kj.uint32(9))


def test_atomic_inc_dec_wrap(kj_backend):
    acc = kj.to_device(np.array([0, 0], np.uint32))
    inc_dec[1, 23](acc, 23)
    # inc wraps to 0 past 9; dec wraps to 9 below 0 (or from above 9)
    np.testing.assert_array_equal(acc.copy_to_host(), [23 % 10, (-23) % 10])


@kj.jit
def float_max_min(acc, x):
    i = kj.grid(1)
    if i < x.size:
        kj.atomic.max(acc, 0, x[i])
        kj.atomic.min(acc, 1, x[i])
        kj.atomic.add(acc, 2, x[i])


def test_float_atomics(kj_backend):
    x = rng.standard_normal(3000)
    acc = kj.to_device(np.array([-np.inf, np.inf, 0.0]))
    float_max_min[12, 256](acc, kj.to_device(x))
    got = acc.copy_to_host()
    assert got[0] == x.max() and got[1] == x.min()
    np.testing.assert_allclose(got[2], x.sum())


UNARY = ["sqrt", "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
         "gamma", "lgamma", "floor", "ceil", "trunc", "fabs"]
DOMAIN = {"sqrt": (0, 10), "log": (0.01, 10), "log2": (0.01, 10), "log10": (0.01, 10),
          "log1p": (-0.9, 10), "asin": (-1, 1), "acos": (-1, 1), "acosh": (1, 10),
          "atanh": (-0.99, 0.99), "gamma": (0.1, 6), "lgamma": (0.1, 10), "exp": (-5, 5),
          "expm1": (-5, 5), "sinh": (-5, 5), "cosh": (-5, 5)}


def _unary_kernel(name):
    fn = getattr(math, name)

    def kernel(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = fn(x[i])
    kernel.__name__ = f"math_{name}"
    return kj.jit(kernel)


def _reference(name, x):
    if name == "gamma":
        return np.array([math.gamma(v) for v in x.astype(np.float64)])
    if name == "lgamma":
        return np.array([math.lgamma(v) for v in x.astype(np.float64)])
    if name == "erf" or name == "erfc":
        return np.array([getattr(math, name)(v) for v in x.astype(np.float64)])
    return getattr(np, {"fabs": "abs", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
                        "asinh": "arcsinh", "acosh": "arccosh",
                        "atanh": "arctanh"}.get(name, name))(x.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY)
def test_math_unary(kj_backend, name, dtype):
    lo, hi = DOMAIN.get(name, (-3, 3))
    x = rng.uniform(lo, hi, 500).astype(dtype)
    out = kj.to_device(np.full(500, np.nan, dtype))
    _unary_kernel(name)[2, 256](out, kj.to_device(x))
    rtol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out.copy_to_host(), _reference(name, x), rtol=rtol,
                               atol=rtol)


@kj.jit
def binary_math(out, x, y):
    i = kj.grid(1)
    if i < x.size:
        out[i, 0] = math.atan2(x[i], y[i])
        out[i, 1] = math.pow(abs(x[i]), y[i])
        out[i, 2] = math.hypot(x[i], y[i])
        out[i, 3] = math.copysign(x[i], y[i])
        out[i, 4] = math.fmod(x[i], y[i])
        out[i, 5] = x[i] ** 2 + min(x[i], y[i]) - max(x[i], y[i])
        out[i, 6] = kj.fma(x[i], y[i], 1.0)
        out[i, 7] = x[i] // y[i] + x[i] % y[i]
        out[i, 8] = math.isnan(x[i] / 0.0 * 0.0) + math.isinf(x[i] / 0.0) + \
            math.isfinite(x[i])


def test_math_binary_and_operators(kj_backend):
    n = 400
    x, y = rng.uniform(-3, 3, n), rng.uniform(0.2, 3, n) * rng.choice([-1, 1], n)
    out = kj.to_device(np.full((n, 9), np.nan))
    binary_math[2, 256](out, kj.to_device(x), kj.to_device(y))
    expect = np.stack([np.arctan2(x, y), np.abs(x) ** y, np.hypot(x, y), np.copysign(x, y),
                       np.fmod(x, y), x ** 2 + np.minimum(x, y) - np.maximum(x, y),
                       x * y + 1.0, x // y + x % y, np.full(n, 3.0)], 1)
    np.testing.assert_allclose(out.copy_to_host(), expect, rtol=1e-12, atol=1e-12)


@kj.jit
def bit_ops(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i, 0] = kj.popc(x[i])
        out[i, 1] = kj.clz(x[i])
        out[i, 2] = kj.ffs(x[i])
        out[i, 3] = kj.brev(x[i])


def test_bit_operations(kj_backend):
    x = rng.integers(0, 1 << 32, 300, dtype=np.uint64).astype(np.uint32)
    x[0] = 0
    out = kj.to_device(np.zeros((300, 4), np.uint32))
    bit_ops[2, 256](out, kj.to_device(x))
    bits = [format(int(v), "032b") for v in x]
    expect = np.array([[b.count("1"), len(b) - len(b.lstrip("0")),
                        (32 - b.rfind("1")) if "1" in b else 0, int(b[::-1], 2)]
                       for b in bits], np.uint32)
    np.testing.assert_array_equal(out.copy_to_host(), expect)
