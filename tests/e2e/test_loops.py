"""Loops over tuples (``for s in (16, 8, 4)``), with break and continue, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj

OFFSETS = (16, 8, 4, 2, 1)


@kj.jit
def tuple_loops(out, x):
    i = kj.grid(1)
    if i < x.size:
        acc = 0.0
        for s in OFFSETS:
            if s == 4:
                continue
            acc += x[i] * s
            if s == 2:
                break
        for w in (1.5, 2, x[0]):
            acc += w
        out[i] = acc


def test_loops_over_tuples(kj_backend):
    rng = np.random.default_rng()
    n = int(rng.integers(40, 200))
    x = rng.standard_normal(n).astype(np.float32)
    out = kj.to_device(np.full(n, np.nan, np.float32))
    tuple_loops[(n + 63) // 64, 64](out, kj.to_device(x))
    expected = x * (16 + 8 + 2) + 1.5 + 2 + x[0]
    np.testing.assert_allclose(out.copy_to_host(), expected, rtol=1e-5, atol=1e-5)


def test_loop_over_a_non_tuple_is_located():
    def bad(out, x):
        for v in x:
            out[0] = v

    with pytest.raises(kj.UnsupportedError, match="loop over range\\(...\\) or a tuple"):
        kj.compile_ptx(bad, "void(float32[::1], float32[::1])")
