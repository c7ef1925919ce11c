"""Cooperative launches as large as a GPU accepts: numba's cooperative-groups documentation
example, the modeled H200's co-residency limit reached (not a host-thread cap), and a fault in
one block ending a launch whose other blocks sleep at the grid barrier."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.tools.occupancy_calc import H200
from tests.lib.test_examples import load

rng = np.random.default_rng()


def test_numbas_cooperative_groups_example(backend):
    """32 blocks of 32 threads and 1023 grid syncs: refused by the cpu backend before. The
    kernel is examples/grid_sync.py's, numba's documented one; here from a random first row."""
    sequential_rows = load("grid_sync").sequential_rows
    A = np.full((1024, 1024), -(2**30), np.int32)  # poison: a missed row stays hugely negative
    A[0] = rng.integers(-1000, 1000, 1024)
    d = kj.to_device(A)
    blockdim = 32
    griddim = A.shape[1] // blockdim
    sequential_rows[griddim, blockdim](d)
    want = A.copy()
    for row in range(1, want.shape[0]):
        want[row] = want[row - 1, ::-1] + 1
    np.testing.assert_array_equal(d.copy_to_host(), want)


@kj.jit
def shift_twice(x, y, z):
    i = kj.grid(1)
    n = x.size
    g = kj.cg.this_grid()
    y[(i + 7919) % n] = x[i] * 3
    g.sync()
    z[i] = y[(i + 104729) % n] - 1
    g.sync()
    y[i] = z[n - 1 - i]


def _per_sm(threads: int, shared: int) -> int:
    """What the H200 calculator allows an SM: warps, blocks and shared memory (registers do not
    count for host code)."""
    warps = -(-threads // H200.warp_size)
    per_block = -(-(shared + H200.reserved_shared_per_block) // H200.shared_alloc_unit) \
        * H200.shared_alloc_unit
    return min(H200.max_warps_per_sm // warps, H200.max_blocks_per_sm,
               H200.shared_per_sm // per_block)


@pytest.mark.parametrize("threads", [32, 256])
def test_the_largest_grid_an_h200_accepts_runs(threads):
    previous = kj.set_backend("cpu")
    try:
        limit = shift_twice.max_cooperative_grid_blocks(threads, signature=(
            kj.int64[:], kj.int64[:], kj.int64[:]))
        assert limit == H200.sm_count * _per_sm(threads, 0)
        n = limit * threads
        x = rng.integers(-2**40, 2**40, n)
        y = kj.to_device(np.full(n, -1, np.int64))
        z = kj.to_device(np.full(n, -1, np.int64))
        shift_twice[limit, threads](kj.to_device(x), y, z)
        want_y = np.roll(x * 3, 7919)
        want_z = np.roll(want_y, -(104729 % n)) - 1
        np.testing.assert_array_equal(z.copy_to_host(), want_z)
        np.testing.assert_array_equal(y.copy_to_host(), want_z[::-1])
        with pytest.raises(kj.LaunchError, match=rf"a grid of {limit + 1} blocks of {threads} "
                                                 rf"threads is more than the {limit} that fit"):
            shift_twice[limit + 1, threads](kj.to_device(x), y, z)
    finally:
        kj.set_backend(previous)


@kj.jit
def shared_and_sync(x, out):
    sm = kj.shared.array(0, kj.float32)  # dynamic
    t = kj.threadIdx.x
    sm[t] = x[kj.grid(1)]
    kj.cg.this_grid().sync()
    out[kj.grid(1)] = sm[kj.blockDim.x - 1 - t]


def test_shared_memory_lowers_the_limit():
    previous = kj.set_backend("cpu")
    try:
        threads, dynamic = 64, 100 * 1024
        sig = (kj.float32[:], kj.float32[:])
        limit = shared_and_sync.max_cooperative_grid_blocks(threads, dynamic, signature=sig)
        assert limit == H200.sm_count * _per_sm(threads, dynamic) < H200.sm_count * 32
        x = rng.standard_normal(limit * threads).astype(np.float32)
        out = kj.to_device(np.full_like(x, np.nan))
        shared_and_sync[limit, threads, 0, dynamic](kj.to_device(x), out)
        np.testing.assert_array_equal(out.copy_to_host(),
                                      x.reshape(limit, threads)[:, ::-1].ravel())
        with pytest.raises(kj.LaunchError, match=rf"more than the {limit} that fit"):
            shared_and_sync[limit + 1, threads, 0, dynamic](kj.to_device(x), out)
    finally:
        kj.set_backend(previous)


@kj.jit(debug=True)
def faults_in_one_block(x, bad):
    i = kj.grid(1)
    g = kj.cg.this_grid()
    for _ in range(3):
        if kj.blockIdx.x == bad:
            x[i + x.size] = 1.0
        g.sync()
        x[i] += 1.0


def test_a_fault_wakes_the_blocks_asleep_at_the_barrier():
    """Block ``bad`` faults before the barrier: every other block sleeps there until the fault
    wakes it; the launch raises instead of hanging, and the next launch starts clean."""
    previous = kj.set_backend("cpu")
    try:
        blocks, threads = 200, 32
        bad = int(rng.integers(0, blocks))
        x = kj.to_device(rng.standard_normal(blocks * threads))
        with pytest.raises(kj.KernelError, match=rf"index {blocks * threads + bad * threads}"
                                                 r"\b.*out of bounds"):
            faults_in_one_block[blocks, threads](x, bad)
        start = rng.standard_normal(blocks * threads)
        x = kj.to_device(start)
        faults_in_one_block[blocks, threads](x, -1)
        np.testing.assert_array_equal(x.copy_to_host(), start + 1.0 + 1.0 + 1.0)
    finally:
        kj.set_backend(previous)


def test_a_thread_the_system_refuses_is_a_launch_error(monkeypatch):
    """The blocks already started end (they see the refusal at the barrier), the launch is a
    LaunchError, and the next launch runs."""
    from kaiojit.runtime import cooperative

    previous = kj.set_backend("cpu")
    try:
        blocks, threads = int(rng.integers(8, 40)), 32
        x = kj.to_device(rng.standard_normal(blocks * threads))
        monkeypatch.setattr(cooperative, "cpu_stack_bytes", lambda t: 1 << 45)  # 32 TiB each
        with pytest.raises(kj.LaunchError, match=rf"could not start a thread for each of the "
                                                 rf"{blocks} blocks of a cooperative launch "
                                                 r"\(it started \d+, each with \d+ MiB"):
            faults_in_one_block[blocks, threads](x, -1)
        monkeypatch.undo()
        start = rng.standard_normal(blocks * threads)
        x = kj.to_device(start)
        faults_in_one_block[blocks, threads](x, -1)
        np.testing.assert_array_equal(x.copy_to_host(), start + 1.0 + 1.0 + 1.0)
    finally:
        kj.set_backend(previous)
