"""The checked mode's finer points (docs/sanitizer.md): syncwarp as a warp barrier, writes of
the value already there, initcheck of kj.device_array memory, and the shortcuts that keep
the checks cheap (quiet shared reads, unchecked blocks) finding what they found before."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import get_backend

from .test_sanitizer import checked, expect, fresh, poisoned  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("checked")  # every test on a checked cpu backend


# --- syncwarp orders the threads of one warp, not the block -------------------------------------

@kj.jit
def swap_in_warp(x, out):
    sh = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    sh[t] = x[t]
    kj.syncwarp()
    out[t] = sh[t ^ 1]  # a lane of the same warp


@kj.jit
def swap_across_warps(x, out):
    sh = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    sh[t] = x[t]
    kj.syncwarp()  # orders warp 0's lanes, not warp 1's
    out[t] = sh[(t + 32) % 64]


def test_syncwarp_orders_a_warp():
    x, out = fresh(64), poisoned(64)
    swap_in_warp[1, 64](kj.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), x[np.arange(64) ^ 1])


def test_syncwarp_does_not_order_two_warps():
    x, out = kj.to_device(fresh(64)), poisoned(64)
    expect(swap_across_warps,
           "kernel 'swap_across_warps': racecheck: read-after-write hazard on shared "
           "array 'sh' at index (32,) (shape (64,)) in block (0, 0, 0): thread (0, 0, 0) "
           "read it at {file}:{line:out[t] = sh}, and thread (32, 0, 0) wrote it at "
           "{file}:{line:sh[t] = x[t]}, with no barrier between them\n",
           lambda: swap_across_warps[1, 64](x, out),
           more="63 racecheck")


# --- a write of the value already there is no hazard ------------------------------------------

@kj.jit
def set_flag(flag):
    flag[0] = 1  # every thread writes the same value


@kj.jit
def set_flag_to_thread(flag):
    flag[0] = kj.threadIdx.x


@kj.jit
def shared_flag(out):
    sh = kj.shared.array(1, kj.int32)
    t = kj.threadIdx.x
    if t == 0:
        sh[0] = 5
    kj.syncthreads()
    sh[0] = 5  # the value every thread writes is there already
    kj.syncthreads()
    out[t] = sh[0]


@pytest.mark.parametrize("grid", [1, 3])
def test_equal_writes_to_global_memory_are_clean(grid):
    flag = poisoned(1, np.int32)
    set_flag[grid, 32](flag)
    assert flag.copy_to_host()[0] == 1


def test_different_writes_to_global_memory_race():
    flag = poisoned(1, np.int32)
    expect(set_flag_to_thread,
           "kernel 'set_flag_to_thread': racecheck: write-after-write hazard on global "
           "array 'flag' at index (0,) (shape (1,)) in block (0, 0, 0): thread (1, 0, 0) "
           "wrote it at {file}:{line:flag[0] = kj}, and thread (0, 0, 0) wrote it at "
           "{file}:{line:flag[0] = kj}, with no barrier between them\n",
           lambda: set_flag_to_thread[1, 4](flag),
           more="2 racecheck")


def test_equal_writes_to_shared_memory_are_clean():
    out = poisoned(32, np.int32)
    shared_flag[1, 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(32, 5))


# --- initcheck of kj.device_array memory ------------------------------------------------------

@kj.jit
def fill_front(out, n):
    i = kj.grid(1)
    if i < n:
        out[i] = 2 * i


@kj.jit
def copy(x, out):
    i = kj.grid(1)
    out[i] = x[i]


def test_read_of_unwritten_device_array():
    a = kj.device_array(64, np.float32)
    fill_front[2, 32](a, 40)
    out = poisoned(64)
    expect(copy,
           "kernel 'copy': initcheck: read of uninitialized global memory: array 'x' at "
           "index (40,) (shape (64,)) at {file}:{line:out[i] = x[i]}, block (1, 0, 0), "
           "thread (8, 0, 0): no kernel or copy wrote this element of its "
           "kj.device_array before\n",
           lambda: copy[2, 32](a, out),
           more="23 initcheck")


def test_device_array_written_by_a_kernel_and_a_copy_is_clean():
    a = kj.device_array(64, np.float32)
    fill_front[2, 32](a, 40)
    tail = fresh(24)
    a[40:] = tail
    out = poisoned(64)
    copy[2, 32](a, out)
    want = np.concatenate([2 * np.arange(40, dtype=np.float32), tail])
    np.testing.assert_array_equal(out.copy_to_host(), want)
    assert not get_backend().unwritten  # all of it written: no longer watched


def test_device_array_written_by_a_memset_is_clean():
    a = kj.device_array(32, np.int32)
    get_backend().memset(a.ptr, 0, a.nbytes)
    out = poisoned(32, np.int32)
    copy[1, 32](a, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.zeros(32))


# --- the shortcuts find what the full checks found --------------------------------------------

@kj.jit
def tiled_sum_missing_barrier(x, out):
    tile = kj.shared.array(32, kj.float32)
    t = kj.threadIdx.x
    acc = kj.float32(0.0)
    for k0 in range(0, 128, 32):
        tile[t] = x[k0 + t]
        kj.syncthreads()
        for k in range(32):
            acc += tile[k]
        # a kj.syncthreads() is missing: the next tile overwrites what others still read
    out[t] = acc


@kj.jit
def tiled_sum(x, out):
    tile = kj.shared.array(32, kj.float32)
    t = kj.threadIdx.x
    acc = kj.float32(0.0)
    for k0 in range(0, 128, 32):
        tile[t] = x[k0 + t]
        kj.syncthreads()
        for k in range(32):
            acc += tile[k]
        kj.syncthreads()
    out[t] = acc


def test_read_racing_with_the_next_iterations_write():
    x, out = kj.to_device(fresh(128)), poisoned(32)
    expect(tiled_sum_missing_barrier,
           "kernel 'tiled_sum_missing_barrier': racecheck: write-after-read hazard on shared "
           "array 'tile' at index (0,) (shape (32,)) in block (0, 0, 0): thread (0, 0, 0) "
           "wrote it at {file}:{line:tile[t] = x}, and thread (31, 0, 0) read it at "
           "{file}:{line:acc += tile[k]}, with no barrier between them\n",
           lambda: tiled_sum_missing_barrier[1, 32](x, out))


def test_tiled_sum_with_both_barriers_is_clean():
    x, out = fresh(128), poisoned(32)
    tiled_sum[1, 32](kj.to_device(x), out)
    np.testing.assert_allclose(out.copy_to_host(), np.full(32, x.sum(dtype=np.float64)),
                         rtol=1e-5)


@kj.jit
def shift_down(x, out, n):
    i = kj.grid(1)
    if i < n - 1:
        out[i] = x[i + 1]


def test_overlapping_arguments_are_checked_in_every_block():
    a = kj.to_device(fresh(256))
    # every block, the middle ones too: 63 + 63 + 63 + 62 (the last thread reads nothing)
    expect(shift_down,
           "kernel 'shift_down': racecheck: write-after-read hazard on global array "
           "'out' at index (1,) (shape (256,)) in block (0, 0, 0): thread (1, 0, 0) "
           "wrote it at {file}:{line:out[i] = x}, and thread (0, 0, 0) read it at "
           "{file}:{line:out[i] = x}, with no barrier between them\n",
           lambda: shift_down[4, 64](a, a, 256),
           more="250 racecheck")


def test_unchecked_blocks_give_the_same_results():
    x, out = fresh(1000), poisoned(1024)
    shift_down[4, 256](kj.to_device(x), out, 1000)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:999], x[1:])
    assert np.isnan(got[999:]).all()
