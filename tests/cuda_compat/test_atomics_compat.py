"""``cuda.atomic`` has numba's names: kaiojit's atomics and ``compare_and_swap``."""

import numpy as np

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
