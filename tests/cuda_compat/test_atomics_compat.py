"""``cuda.atomic`` has numba's names: kaiojit's atomics and ``compare_and_swap``."""

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()


@cuda.jit
def swap_first(res, old, ary, fill):
    gid = cuda.grid(1)
    if gid < ary.size:
        old[gid] = cuda.atomic.compare_and_swap(res[gid:], fill, ary[gid])


def test_compare_and_swap(kj_backend):
    n = int(rng.integers(8, 64))
    fill = int(rng.integers(1, 100))
    res = rng.integers(200, 300, n).astype(np.int32)
    matches = rng.random(n) < 0.5
    res[matches] = fill
    ary = rng.integers(1000, 2000, n).astype(np.int32)
    d_res, d_old = cuda.to_device(res), cuda.to_device(np.full(n, -1, np.int32))
    swap_first[1, 64](d_res, d_old, cuda.to_device(ary), fill)
    np.testing.assert_array_equal(d_old.copy_to_host(), res)
    np.testing.assert_array_equal(d_res.copy_to_host(), np.where(matches, ary, res))
    assert cuda.atomic.add is __import__("kaiojit").atomic.add


@cuda.jit
def fold_all(res, vals):
    i = cuda.grid(1)
    if i < vals.size:
        cuda.atomic.max(res, 0, vals[i])
        cuda.atomic.min(res, 1, vals[i])
        cuda.atomic.nanmax(res, 2, vals[i])
        cuda.atomic.nanmin(res, 3, vals[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nan_in_memory", [False, True])
def test_float_max_min_are_pythons_and_nanmax_ignores_nans(kj_backend, dtype, nan_in_memory):
    """max/min: Python's max(old, v) (a NaN in memory stays, a NaN value changes nothing);
    nanmax/nanmin: NaNs ignored, as numba's atomics."""
    n = int(rng.integers(20, 60))
    vals = rng.standard_normal(n).astype(dtype)
    vals[rng.choice(n, 3, replace=False)] = np.nan
    start = np.float64(np.nan) if nan_in_memory else rng.standard_normal()
    res = np.full(4, start, dtype)
    d_res = cuda.to_device(res)
    fold_all[1, 64](d_res, cuda.to_device(vals))
    got = d_res.copy_to_host()
    finite = vals[~np.isnan(vals)]
    if nan_in_memory:
        assert np.isnan(got[0]) and np.isnan(got[1])
        assert got[2] == finite.max() and got[3] == finite.min()
    else:
        assert got[0] == max(res[0], finite.max()) and got[1] == min(res[1], finite.min())
        assert got[2] == got[0] and got[3] == got[1]


def test_integer_nanmax_is_max(kj_backend):
    vals = rng.integers(-1000, 1000, int(rng.integers(20, 60))).astype(np.int64)
    res = np.array([0, 0, -5000, 5000], np.int64)
    res[:2] = rng.integers(-10, 10, 2)
    d_res = cuda.to_device(res)
    fold_all[1, 64](d_res, cuda.to_device(vals))
    got = d_res.copy_to_host()
    np.testing.assert_array_equal(got, [max(res[0], vals.max()), min(res[1], vals.min()),
                                        vals.max(), vals.min()])
