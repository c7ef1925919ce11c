"""A one-element-a-thread kernel's streams are prefetched into L2 ahead of later blocks: which
arrays count as streams (``kir.analysis.streamed_arrays``), the PTX that asks for them, where
none is asked for, and the results with and without (every PTX here is also assembled by the
ptxas check)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.kir.analysis import streamed_arrays
from kaiojit.lower.nvptx import PREFETCH_AHEAD_BYTES

PREFETCH = re.compile(r"prefetch\.global\.L2 \t\[(%rd\d+)(?:\+(\d+))?\];")
F32x3 = "void(float32[::1], float32[::1], float32[::1], float32, int32)"


def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def by_hand(out, x, y, a, n):
    i = kj.blockIdx.x * kj.blockDim.x + kj.threadIdx.x
    if i < n:
        out[i] = a * x[i] + y[i]


def gather(out, x, idx, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[idx[i]]


def strided(out, x, n):
    for i in range(kj.grid(1), n, kj.gridsize(1)):
        out[i] = x[i] * 2.0


def rows(out, x):
    i = kj.grid(1)
    if i < x.shape[0]:
        out[i, 0] = x[i, 0] + x[i, 1]


def moved(out, x, n):
    i = kj.grid(1)
    if i < n:
        i = n - 1 - i  # no longer the thread's own index alone
        out[i] = x[i]


def twice(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i] * x[i] + 1.0


def kfunc(pyfunc, sig):
    return kj.jit(pyfunc).compile(sig).kfunc


@pytest.mark.parametrize("pyfunc, sig, streams", [
    (saxpy, F32x3, ("x", "y")),
    (by_hand, F32x3, ("x", "y")),
    (gather, "void(float32[::1], float32[::1], int64[::1], int32)", ("idx",)),
    (strided, "void(float32[::1], float32[::1], int64)", ()),
    (rows, "void(float32[:, ::1], float32[:, ::1])", ()),
    (moved, "void(float32[::1], float32[::1], int64)", ()),
    (twice, "void(float64[::1], float64[::1], int64)", ("x",)),
    (saxpy, "void(float32[:], float32[:], float32[:], float32, int32)", ()),
])
def test_the_streams_of_a_kernel(pyfunc, sig, streams):
    assert streamed_arrays(kfunc(pyfunc, sig)) == streams


def ahead_offsets(pyfunc, sig, **options) -> list[int]:
    """How far past a loaded element's address each prefetch is (an offset in the address
    or the constant an ``add`` puts on a loaded address)."""
    ptx = kj.compile_ptx(pyfunc, sig, **options)
    loaded = set(re.findall(r"ld\.global\.nc\.b(?:32|64) \t%[rf]d?\d+, \[(%rd\d+)\];", ptx))
    offsets = []
    for reg, offset in PREFETCH.findall(ptx):
        if offset:
            offsets.append(int(offset))
            continue
        base, k = re.search(rf"add\.s64 \t{reg}, (%rd\d+), (\d+);", ptx).groups()
        assert base in loaded
        offsets.append(int(k))
    return offsets


def test_each_stream_is_prefetched_once_its_share_of_the_distance_ahead():
    # two streams of float32: each half the distance, in bytes from the element just loaded
    assert ahead_offsets(saxpy, F32x3) == [PREFETCH_AHEAD_BYTES // 2] * 2
    assert ahead_offsets(by_hand, F32x3) == [PREFETCH_AHEAD_BYTES // 2] * 2
    # one stream of float64 loaded twice in the source: one prefetch, the whole distance
    assert ahead_offsets(twice, "void(float64[::1], float64[::1], int64)") == \
        [PREFETCH_AHEAD_BYTES]


def test_the_prefetch_stays_within_the_array():
    ptx = kj.compile_ptx(saxpy, F32x3)
    elements = PREFETCH_AHEAD_BYTES // 2 // 4
    # the index plus the distance in elements, compared with each array's own length
    assert len(re.findall(rf"add\.s64 \t%rd\d+, %rd\d+, {elements};", ptx)) == 1
    lengths = set(re.findall(r"ld\.param\.b64 \t%rd\d+, \[\w+_param_([35])\];", ptx))
    assert lengths == {"3", "5"}  # x.shape[0] and y.shape[0]


@pytest.mark.parametrize("pyfunc, sig, options", [
    (saxpy, F32x3, {"prefetch": False}),
    (saxpy, F32x3, {"arch": "sm_80"}),
    (strided, "void(float32[::1], float32[::1], int64)", {}),
    (moved, "void(float32[::1], float32[::1], int64)", {}),
])
def test_no_prefetch_where_it_is_switched_off_or_not_a_stream(pyfunc, sig, options):
    ptx = kj.compile_ptx(pyfunc, sig, **options)
    assert "prefetch" not in ptx
    assert "ld.global.nc" in ptx


def test_the_option_is_part_of_the_compile_and_rejects_nothing_else():
    on = kj.jit(saxpy).compile(F32x3)
    off = kj.jit(saxpy, prefetch=False).compile(F32x3)
    assert "llvm.nvvm.prefetch.global.L2" in on.llvm
    assert "prefetch" not in off.llvm
    with pytest.raises(TypeError, match="unknown option.*prefetchh"):
        kj.jit(saxpy, prefetchh=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saxpy_past_the_prefetch_distance_gives_the_same_result(kj_backend, dtype):
    # long enough that the first threads' prefetches fall inside the arrays, and a length
    # that no block size divides, so the last block's threads stop at n
    rng = np.random.default_rng()
    ahead = PREFETCH_AHEAD_BYTES // 2 // np.dtype(dtype).itemsize
    n = ahead + int(rng.integers(1000, 5000)) * 7 + 3
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    a = dtype(rng.uniform(0.5, 2.0))
    got = []
    for prefetch in (True, False):
        kernel = kj.jit(saxpy, prefetch=prefetch)
        out = kj.to_device(np.full(n, np.nan, dtype))
        kernel[(n + 255) // 256, 256](out, kj.to_device(x), kj.to_device(y), a, np.int64(n))
        got.append(out.copy_to_host())
    # a * x + y is one fma: within an ulp of NumPy's two roundings, and the same bits either way
    np.testing.assert_allclose(got[0], a * x + y, rtol=4 * np.finfo(dtype).eps,
                               atol=4 * np.finfo(dtype).eps)
    np.testing.assert_array_equal(got[0], got[1])
