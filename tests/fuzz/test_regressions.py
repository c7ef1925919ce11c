"""Regression tests from the differential fuzzer (``python -m tests.fuzz``): each is a shrunk
program that once disagreed with the reference (or crashed), with the seed that found it."""

from __future__ import annotations

import math

import numpy as np

import kaiojit as kj

rng = np.random.default_rng()


# seed 18: float64 -> float16 on the host called __truncdfhf2, which MCJIT could not resolve
# (a jump to address 0). Now it rounds to odd in float32, then to float16: one rounding.
@kj.jit(contract=False)
def f64_to_f16(o, a, s):
    tid = kj.grid(1)
    if math.isinf(kj.float16(s)):
        o[tid] = kj.float16(-1.0)
    else:
        o[tid] = kj.float16(a[tid])


def test_float64_to_float16_rounds_once(kj_backend):
    h = rng.integers(0, 0x7C00, 256).astype(np.uint16).view(np.float16)
    up = np.nextafter(h, np.float16(np.inf))
    mid = (h.astype(np.float64) + up.astype(np.float64)) / 2  # ties, and one float64 off them
    a = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), -mid,
                        [np.nan, np.inf, -1e300, 1e-300, 65520.0, 65519.99, 0.0, -0.0]])
    a = np.concatenate([a, np.zeros(-len(a) % 64)])
    o = np.full(len(a), 7, np.float16)
    f64_to_f16[len(a) // 64, 64](o, a, 1.0)
    np.testing.assert_array_equal(o, a.astype(np.float16))
    f64_to_f16[len(a) // 64, 64](o, a, math.inf)
    assert (o == -1).all()
