"""Grid-wide synchronization (kj.cg.this_grid().sync()): cooperative launches on both
backends, the co-residency limit as a LaunchError, the GPU barrier's PTX."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()


@kj.jit
def rotate_twice(x, tmp, out):
    """Each phase reads what other blocks wrote in the phase before: wrong without the grid
    barrier (a block would read the poison)."""
    i = kj.grid(1)
    n = x.size
    g = kj.cg.this_grid()
    if i < n:
        tmp[(i + 37) % n] = x[i] * 2.0
    g.sync()
    if i < n:
        out[(i + 101) % n] = tmp[i] + 1.0
    g.sync()
    if i < n:
        tmp[i] = out[n - 1 - i]


def test_grid_sync_orders_phases_across_blocks(backend):
    blocks, threads = 8, 64
    n = blocks * threads - int(rng.integers(0, threads))
    x = rng.standard_normal(n).astype(np.float32)
    for _ in range(2):  # a second launch starts from a fresh barrier
        tmp = kj.to_device(np.full(n, np.nan, np.float32))
        out = kj.to_device(np.full(n, np.nan, np.float32))
        rotate_twice[blocks, threads](kj.to_device(x), tmp, out)
        want_out = np.roll(np.roll(x * 2, 37) + 1, 101)
        np.testing.assert_array_equal(out.copy_to_host(), want_out)
        np.testing.assert_array_equal(tmp.copy_to_host(), want_out[::-1])
    assert rotate_twice.max_cooperative_grid_blocks(threads) >= blocks
    ptx = compile_for_gpu(rotate_twice)[0]
    assert ".visible .global .align 4 .u32 kaiojit_grid_barrier;" in ptx
    for text in ("fence.acq_rel.gpu;", "atom.global.add.u32", "ld.volatile.global.u32",
                 "bar.sync"):
        assert text in ptx, text


def test_too_many_blocks_is_a_launch_error(backend):
    threads = 32
    n = 64
    x = kj.to_device(rng.standard_normal(n).astype(np.float32))
    # poisoned, not kj.device_array: one block of 32 reads tmp elements no thread wrote
    tmp, out = (kj.to_device(np.full(n, np.nan, np.float32)) for _ in range(2))
    rotate_twice[1, threads](x, tmp, out)
    limit = rotate_twice.max_cooperative_grid_blocks(threads)
    assert limit > 0
    with pytest.raises(kj.LaunchError,
                       match=rf"kernel 'rotate_twice\w*' synchronizes its grid .* a grid of "
                             rf"{limit + 1} blocks of {threads} threads is more than the "
                             rf"{limit} that fit"):
        rotate_twice[limit + 1, threads](x, tmp, out)


def test_the_grid_sync_example_runs(backend):
    from tests.lib.test_examples import load

    result = load("grid_sync").main(n=int(rng.integers(50_000, 200_000)), blocks=None)
    np.testing.assert_array_equal(result["rows"], result["expected_rows"])
    assert result["blocks"] >= 1
    assert result["sum"] == pytest.approx(result["expected_sum"], rel=1e-5)


def sync_with_argument(x):
    kj.cg.this_grid().sync(1)


def unknown_method(x):
    kj.cg.this_grid().wait()


@pytest.mark.parametrize("fn, snippet, message", [
    (sync_with_argument, "kj.cg.this_grid().sync(1)", r"sync\(\) takes 0 arguments, got 1"),
    (unknown_method, "kj.cg.this_grid().wait", r"grid_group has no attribute 'wait'"),
])
def test_errors_name_the_line(fn, snippet, message):
    with pytest.raises(kj.TypingError, match=message) as info:
        kj.jit(fn).compile("void(float32[::1])")
    assert_located(info.value, fn, snippet)
