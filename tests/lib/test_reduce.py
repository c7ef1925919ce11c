"""kj.reduce: device reductions of a binary function, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.lib.ufunc.reduce import BLOCK, MAX_BLOCKS
from tests.lib.conftest import compile_for_gpu

rng = np.random.default_rng()


@kj.reduce
def total(a, b):
    return a + b


@kj.reduce
def largest(a, b):
    return max(a, b)


@kj.reduce(fastmath=False)
def bits_or(a, b):
    return a | b


def integers(n: int, dtype=np.int64) -> np.ndarray:
    return rng.integers(-1000, 1000, n).astype(dtype)


# around the block size, the one-pass/two-pass boundary and the cap on first-pass blocks
LENGTHS = [1, 2, 3, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 7, BLOCK * MAX_BLOCKS - 1,
           BLOCK * MAX_BLOCKS + 1]


@pytest.mark.parametrize("n", LENGTHS)
def test_integer_sums_are_exact(backend, n):
    x = integers(n)
    got = total(x)
    assert got == x.sum() and got.dtype == np.int64
    compile_for_gpu(*total.kernels)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_dtypes(backend, dtype):
    n = int(rng.integers(1000, 100000))
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(n).astype(dtype)
        got = total(kj.to_device(x))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, x.sum(dtype=np.float64), rtol=1e-4, atol=1e-3)
    else:
        x = rng.integers(0, 100, n).astype(dtype)
        assert total(x) == x.sum(dtype=dtype)  # wraps as the dtype does
    assert largest(x) == x.max()
    compile_for_gpu(*total.kernels, *largest.kernels)


def test_init_is_folded_in_and_empty_gives_init(backend):
    x = integers(int(rng.integers(10, 5000)))
    init = int(rng.integers(1, 100))
    assert total(x, init=init) == x.sum() + init
    assert largest(x, init=10 ** 6) == 10 ** 6
    empty = total(np.zeros(0, np.int64), init=init)
    assert empty == init and empty.dtype == np.int64
    assert total(np.zeros(0, np.float32)) == 0


def test_res_device_and_host(backend):
    x = integers(int(rng.integers(1000, 9000)))
    res = kj.to_device(np.full(3, -1, np.int64))  # poisoned: only res[0] is written
    assert total(kj.to_device(x), res=res, init=5) is None
    np.testing.assert_array_equal(res.copy_to_host(), [x.sum() + 5, -1, -1])
    host = np.full(2, -1, np.int64)
    assert total(x, res=host) is None
    np.testing.assert_array_equal(host, [x.sum(), -1])
    total(np.zeros(0, np.int64), res=res, init=9)
    assert res.copy_to_host()[0] == 9


def test_size_strides_and_stream(backend):
    x = integers(int(rng.integers(3000, 9000)))
    size = int(rng.integers(1, 2000))
    assert total(x, size=size) == x[:size].sum()
    assert total(kj.to_device(x)[1::3]) == x[1::3].sum()
    stream = kj.Stream()
    res = kj.to_device(np.full(1, -1, np.int64))
    total(kj.to_device(x), res=res, stream=stream)
    host = res.copy_to_host(stream=stream)
    stream.synchronize()
    assert host[0] == x.sum()
    assert total(x, stream=stream) == x.sum()


def test_bitwise_or(backend):
    x = rng.integers(0, 2 ** 62, int(rng.integers(500, 5000)), dtype=np.int64).astype(np.uint64)
    assert bits_or(x) == np.bitwise_or.reduce(x)


def test_bad_calls_are_named(backend):
    with pytest.raises(TypeError, match=r"total\(\): arr must be 1-D, got shape \(3, 4\)"):
        total(np.ones((3, 4)))
    with pytest.raises(TypeError, match=r"total\(\): arr must be a 1-D array .* got list"):
        total([1, 2, 3])
    with pytest.raises(ValueError, match=r"size 11 is outside 0..10"):
        total(np.ones(10), size=11)
    with pytest.raises(ValueError, match="res must hold at least one element"):
        total(np.ones(10), res=kj.device_array(0, np.float64))


def test_bad_functions():
    with pytest.raises(TypeError, match="kj.reduce needs a binary function; .* takes 3"):
        kj.reduce(lambda a, b, c: a)
    with pytest.raises(TypeError, match="kj.reduce takes a Python function, got int"):
        kj.reduce(3)
