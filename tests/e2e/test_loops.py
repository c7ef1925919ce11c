"""Loops over tuples (``for s in (16, 8, 4)``), with break and continue, on every backend."""

from __future__ import annotations

import re

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


def test_loop_over_a_scalar_is_located():
    def bad(out, x):
        for v in x:
            out[0] = v

    with pytest.raises(kj.UnsupportedError, match="loop over range\\(...\\) or a tuple"):
        kj.compile_ptx(bad, "void(float32[::1], float32)")


PROGRESSION = tuple(range(5, 5 + 3 * 40, 3))


@kj.jit
def tuple_progressions(out, x):
    i = kj.grid(1)
    total = 0
    for v in PROGRESSION:          # an arithmetic progression: picked as 5 + 3 * index
        total += v * x[i]
    for v in (30, 20, 10, 0, -10):  # a decreasing one, with break and continue
        if v == 20:
            continue
        if v < 0:
            break
        total += v
    for v in (1, 2, 4, 8):         # not a progression: the select chain
        total += v
    out[i] = total


def test_tuple_loops_over_progressions(kj_backend):
    x = np.random.default_rng().integers(-100, 100, 64)
    out = kj.to_device(np.full(64, -1, np.int64))
    tuple_progressions[1, 64](out, kj.to_device(x))
    np.testing.assert_array_equal(out.copy_to_host(), sum(PROGRESSION) * x + 40 + 15)
    # each loop over a tuple asks LLVM to unroll it fully
    ck = tuple_progressions.compile(tuple_progressions.signatures[0])
    loop_ids = re.findall(r"!llvm.loop (!\d+)", ck.llvm_unoptimized)
    assert len(set(loop_ids)) == 3  # one of its own for each loop
    for loop_id in loop_ids:
        text = ck.llvm_unoptimized
        node = re.search(rf"^{loop_id} = !{{ {loop_id}, (!\d+) }}", text, re.MULTILINE)
        assert re.search(rf'^{node.group(1)} = !{{ !"llvm.loop.unroll.full" }}', text,
                         re.MULTILINE)
