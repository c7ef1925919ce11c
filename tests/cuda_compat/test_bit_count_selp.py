"""``int.bit_count()`` and ``cuda.selp`` in kernels, as numba has them (issue 28)."""

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()


@cuda.jit
def bit_counts(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i].bit_count()


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_bit_count(kj_backend, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 40, dtype=dtype, endpoint=True)
    x[:3] = [info.min, info.max, 0]
    out = cuda.to_device(np.full(40, -1, np.int32))
    bit_counts[1, 64](cuda.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), [int(v).bit_count() for v in x])


@cuda.jit
def selects(p, a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = cuda.selp(p[i] > 0, a[i], 13)


def test_selp(kj_backend):
    p = rng.integers(-5, 5, 40).astype(np.int32)
    a = rng.integers(-1000, 1000, 40).astype(np.int64)
    out = cuda.to_device(np.full(40, -99999, np.int64))
    selects[1, 64](cuda.to_device(p), cuda.to_device(a), out)
    np.testing.assert_array_equal(out.copy_to_host(), np.where(p > 0, a, 13))


@cuda.jit
def float_bit_count(x, out):
    out[0] = x[0].bit_count()


def test_bit_count_of_float_is_located():
    with pytest.raises(Exception) as info:
        float_bit_count[1, 1](np.ones(1), np.zeros(1, np.int32))
    line = float_bit_count.py_func.__code__.co_firstlineno + 2
    assert "float64 has no attribute 'bit_count'" in str(info.value)
    assert f"test_bit_count_selp.py:{line}:" in str(info.value)


@cuda.jit
def votes_eq(x, out):
    i = cuda.grid(1)
    out[i] = cuda.eq_sync(0xFFFFFFFF, x[i])


def test_eq_sync(kj_backend):
    x = rng.integers(0, 2, 128).astype(np.int32)
    x[32:64] = 0  # a warp where every lane agrees (false)
    x[64:96] = rng.integers(1, 100, 32)  # every lane true
    out = cuda.to_device(np.full(128, -1, np.int32))
    votes_eq[2, 64](cuda.to_device(x), out)
    want = [int(len(set(w != 0)) == 1) for w in x.reshape(4, 32) for _ in range(32)]
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_eq_sync_ptx():
    ptx, _ = cuda.compile_ptx(votes_eq.py_func, "void(int32[:], int32[:])")
    assert "vote.sync.uni.pred" in ptx


@cuda.jit
def lane_masks(out):
    out[cuda.grid(1)] = cuda.lanemask_lt()


def test_lanemask_lt(kj_backend):
    out = cuda.to_device(np.full(96, 12345, np.uint32))
    lane_masks[3, 32](out)
    want = np.tile([(1 << lane) - 1 for lane in range(32)], 3).astype(np.uint32)
    np.testing.assert_array_equal(out.copy_to_host(), want)
