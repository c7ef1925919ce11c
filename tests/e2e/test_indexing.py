"""Negative indices count from the end (Python's rule) wherever an index can be negative; an
index built only from thread/block indices, shapes and non-negative constants is taken as
non-negative and indexes directly."""

from __future__ import annotations

import numpy as np

import kaiojit as kj


@kj.jit
def shifted(out, x, shift):
    i = kj.grid(1)
    j = kj.threadIdx.x - shift  # may be negative: counts from the end
    k = i * 2 + 1               # never negative
    if i < x.size:
        out[i, 0] = x[j]
        out[i, 1] = x[k % x.size]
        out[i, 2] = x[-1 - (i % 3)]


def test_negative_and_nonnegative_indices(kj_backend):
    rng = np.random.default_rng()
    n = 64
    x = rng.standard_normal(n).astype(np.float32)
    shift = int(rng.integers(1, 20))
    out = kj.to_device(np.full((n, 3), np.nan, np.float32))
    shifted[2, 32](out, kj.to_device(x), np.int32(shift))
    i = np.arange(n)
    j = (i % 32) - shift
    expected = np.stack([x[j], x[(i * 2 + 1) % n], x[-1 - (i % 3)]], axis=1)
    np.testing.assert_array_equal(out.copy_to_host(), expected)


def test_direct_indexing_has_no_wraparound_code():
    @kj.jit
    def copy(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = x[i + 1]

    @kj.jit
    def copy_back(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = x[i - 1]

    sig = "void(float32[::1], float32[::1])"
    direct = kj.compile_ptx(copy, sig)
    wrapped = kj.compile_ptx(copy_back, sig)
    # the wraparound of a possibly negative index is a sign test on the index
    assert "shr.s64" not in direct and "setp.lt.s64" not in direct
    assert "shr.s64" in wrapped or "setp.lt.s64" in wrapped or "selp" in wrapped
