"""The launches that take an elementwise kernel's coarse entry (``kir/coarsen.py``): which
ones (mock backend), and on a GPU the results against the kernel's own entry and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import launch as launch_module
from tests.lower.test_coarsen import axpy_in_place, moved, saxpy, shaped, unguarded


def test_large_launches_take_the_coarse_entry_with_the_grid_extent(mock, monkeypatch):
    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", 4096)
    rng = np.random.default_rng()
    kernel = kj.jit(saxpy)
    n = int(rng.integers(5000, 9000))
    x, y = (kj.to_device(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
    out = kj.device_array(n, np.float32)
    a = np.float32(rng.uniform(1, 2))
    for block in (128, 256):
        grid = (n + block - 1) // block
        for _ in range(2):  # the general path, then the fast form
            kernel[grid, block](out, x, y, a, np.int64(n))
            launch = mock.launches[-1]
            assert launch.kernel.endswith("__coarse4") and launch.block == (block, 1, 1)
            assert launch.grid == ((grid + 3) // 4, 1, 1)
            assert launch.params[-1] == grid.to_bytes(8, "little")  # the user's grid.x
            assert launch.params[0] == out.ptr.to_bytes(8, "little")
    assert mock.fast_launches == 2
    small = 4096 // 64 - 1  # fewer threads than the threshold: the kernel's own entry
    kernel[small, 64](out, x, y, a, np.int64(n))
    assert not mock.launches[-1].kernel.endswith("__coarse4")
    assert mock.launches[-1].grid == (small, 1, 1)
    kernel[(n + 255) // 256, 256, 0, 16](out, x, y, a, np.int64(n))  # dynamic shared memory
    assert not mock.launches[-1].kernel.endswith("__coarse4")
    off = kj.jit(saxpy, coarsen=False)
    off[(n + 255) // 256, 256](out, x, y, a, np.int64(n))
    assert not mock.launches[-1].kernel.endswith("__coarse4")


# --- results (cpu backend: the kernel's own entry; the GPU: the coarse one) ------------------

@pytest.mark.gpu
@pytest.mark.parametrize("pyfunc", [saxpy, axpy_in_place, shaped, moved])
def test_coarse_entry_results_match_the_own_entry_and_numpy(cuda, monkeypatch, pyfunc):
    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", 0)
    rng = np.random.default_rng()
    coarse, own = kj.jit(pyfunc), kj.jit(pyfunc, coarsen=False)
    block = int(rng.choice([64, 128, 256]))
    for blocks in (1, 5, 6, 7, 8, int(rng.integers(30, 300))):  # every grid.x % 4
        n = blocks * block - int(rng.integers(0, block))  # a last block not quite full
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        a = np.float32(rng.uniform(-2, 2))
        got = []
        for kernel in (coarse, own):
            yd = kj.to_device(y)
            out = kj.to_device(np.full(n, np.nan, np.float32))
            if pyfunc in (saxpy, axpy_in_place):
                target = out if pyfunc is saxpy else yd
                kernel[blocks, block](target, kj.to_device(x), yd, a, np.int64(n))
                got.append(target.copy_to_host())
            else:
                kernel[blocks, block](out, kj.to_device(x), np.int64(n))
                got.append(out.copy_to_host())
        np.testing.assert_array_equal(got[0], got[1])
        want = {saxpy: a * x + y, axpy_in_place: a * x + y,
                shaped: np.where(x > 0, 1, -1) * np.sqrt(np.abs(x)),
                moved: x + np.float32(1.0)}[pyfunc]  # out[n-1-i] = x[n-1-i] + 1
        np.testing.assert_allclose(got[0], want, rtol=2e-6, atol=2e-6)
    loaded = next(iter(coarse._launch_cache.values()))
    dk = loaded.on_device(cuda.current_device())
    config = loaded.configure(8, block)
    assert loaded.entry(dk, config)[0] is dk.coarse_fn


@pytest.mark.gpu
def test_unguarded_kernel_on_a_grid_no_block_count_of_four_divides(cuda, monkeypatch):
    """Without the user's bounds test, only the grid extent keeps the coarse entry's last
    block from running virtual blocks the user did not launch: the array ends exactly there."""
    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", 0)
    rng = np.random.default_rng()
    blocks, block = 4 * int(rng.integers(10, 50)) + 3, 128
    n = blocks * block
    x = rng.standard_normal(n + block).astype(np.float32)
    big = kj.to_device(np.full(n + block, np.nan, np.float32))  # a block's worth past the end
    kj.jit(unguarded)[blocks, block](big[:n], kj.to_device(x), np.int64(7))
    got = big.copy_to_host()
    np.testing.assert_array_equal(got[:n], x[:n] * np.float32(2.0) + np.float32(7))
    assert np.isnan(got[n:]).all()  # the virtual blocks past the user's grid did not run
