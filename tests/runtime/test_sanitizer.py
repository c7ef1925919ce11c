"""The cpu backend's checked mode (docs/sanitizer.md): a gallery of buggy kernels, one per kind
of bug, each with its exact report, and the same kernels fixed, which pass clean."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import CpuBackend, set_backend
from kaiojit.runtime.sanitizer import sanitize_from_env


def line_of(fn, text: str) -> int:
    """The file line of the first source line of ``fn`` that contains ``text``."""
    lines, start = inspect.getsourcelines(fn.py_func)
    for k, line in enumerate(lines):
        if text in line:
            return start + k
    raise AssertionError(text)


@pytest.fixture
def checked():
    """A checked cpu backend, active for the test."""
    previous = set_backend(CpuBackend(sanitize=True))
    try:
        yield
    finally:
        set_backend(previous)


def fresh(n: int, dtype=np.float32) -> np.ndarray:
    return (np.random.default_rng().random(n) + 0.5).astype(dtype)


def poisoned(n: int, dtype=np.float32):
    return kj.to_device(np.full(n, np.nan if np.dtype(dtype).kind == "f" else -7, dtype))


def expect(kernel, text: str, launch, more: str | None = None) -> str:
    """Run ``launch`` and return its KernelError's message, which must start with ``text``
    (``{line:...}`` fields name lines of the kernel) and, given ``more`` ("3 memcheck"), end
    with that count of the launch's other findings."""
    with pytest.raises(kj.KernelError) as info:
        launch()
    message = str(info.value)
    want = re.sub(r"\{line:([^}]*)\}", lambda m: str(line_of(kernel, m.group(1))), text)
    assert message.startswith(want.format(file=inspect.getsourcefile(kernel.py_func))), message
    if more is not None:
        n = int(more.split()[0])
        tail = f"(and {n} more finding{'s' * (n != 1)} in this launch: {more})"
        assert message.endswith(tail), message
    return message


# --- memcheck -----------------------------------------------------------------------------------

@kj.jit
def copy_past_end(x, out):
    i = kj.grid(1)
    out[i] = x[i + 1]  # off by one at the upper edge


@kj.jit
def copy_before_start(x, out, k):
    i = kj.grid(1)
    out[i] = x[i - k]  # i - k < -len(x) for the first threads


@kj.jit
def copy_fixed(x, out, n):
    i = kj.grid(1)
    if i < n - 1:
        out[i] = x[i + 1]


def test_off_by_one_at_the_upper_edge(checked):
    x, out = kj.to_device(fresh(64)), poisoned(64)
    msg = expect(copy_past_end,
                 "kernel 'copy_past_end': memcheck: index 64 is out of bounds for dimension 0 "
                 "of array 'x' (size 64): index (64,) of a global array of shape (64,) at "
                 "{file}:{line:x[i + 1]}, block (1, 0, 0), thread (31, 0, 0)\n"
                 "    out[i] = x[i + 1]  # off by one at the upper edge",
                 lambda: copy_past_end[2, 32](x, out))
    assert "more finding" not in msg  # only the last thread reads past the end


def test_negative_index_at_the_lower_edge(checked):
    x, out = kj.to_device(fresh(16)), poisoned(16)
    msg = expect(copy_before_start,
                 "kernel 'copy_before_start': memcheck: index -1 is out of bounds for "
                 "dimension 0 of array 'x' (size 16): index (-1,) of a global array of shape "
                 "(16,) at {file}:{line:x[i - k]}, block (0, 0, 0), thread (0, 0, 0)\n",
                 lambda: copy_before_start[1, 16](x, out, 17))
    assert "more finding" not in msg  # -17 + 16: only thread 0's index stays negative


def test_every_finding_is_counted(checked):
    x, out = kj.to_device(fresh(16)), poisoned(16)
    msg = expect(copy_before_start, "kernel 'copy_before_start': memcheck: index -4 ",
                 lambda: copy_before_start[1, 16](x, out, 20))
    # threads 0-3 index -20..-17 (out of bounds); the others count from the end
    assert msg.endswith("(and 3 more findings in this launch: 3 memcheck)"), msg


def test_shared_array_off_by_one_2d(checked):
    out = poisoned(16, np.int32)
    msg = expect(tile_off_by_one,
                 "kernel 'tile_off_by_one': memcheck: index 4 is out of bounds for dimension "
                 "1 of array 'tile' (size 4): index (0, 4) of a shared array of shape (4, 4) "
                 "at {file}:{line:tile[ty, tx + 1]}, block (0, 0, 0), thread (3, 0, 0)\n",
                 lambda: tile_off_by_one[1, (4, 4)](out))
    assert msg.endswith("(and 3 more findings in this launch: 3 memcheck)"), msg


@kj.jit
def tile_off_by_one(out):
    tile = kj.shared.array((4, 4), kj.int32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    tile[ty, tx] = ty * 4 + tx
    kj.syncthreads()
    out[ty * 4 + tx] = tile[ty, tx + 1]


def test_fixed_copy_is_clean(checked):
    x, out = fresh(64), poisoned(64)
    copy_fixed[2, 32](kj.to_device(x), out, 64)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:63], x[1:])
    assert np.isnan(got[63])


# --- racecheck ----------------------------------------------------------------------------------

@kj.jit
def block_sum_missing_barrier(x, out):
    sh = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    sh[t] = x[t]
    kj.syncthreads()
    s = 32
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        s //= 2  # a kj.syncthreads() is missing before the next step
    if t == 0:
        out[0] = sh[0]


@kj.jit
def block_sum(x, out):
    sh = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    sh[t] = x[t]
    kj.syncthreads()
    s = 32
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        kj.syncthreads()
        s //= 2
    if t == 0:
        out[0] = sh[0]


def test_missing_barrier_before_a_reduction_step(checked):
    x, out = kj.to_device(fresh(64)), poisoned(1)
    expect(block_sum_missing_barrier,
           "kernel 'block_sum_missing_barrier': racecheck: write-after-read hazard on shared "
           "array 'sh' at index (1,) (shape (64,)) in block (0, 0, 0): thread (1, 0, 0) "
           "wrote it at {file}:{line:sh[t] += sh[t + s]}, and thread (0, 0, 0) read it at "
           "{file}:{line:sh[t] += sh[t + s]}, with no barrier between them\n",
           lambda: block_sum_missing_barrier[1, 64](x, out))


def test_fixed_reduction_is_clean(checked):
    x, out = fresh(64), poisoned(1)
    block_sum[1, 64](kj.to_device(x), out)
    np.testing.assert_allclose(out.copy_to_host()[0], x.sum(dtype=np.float64), rtol=1e-5)


@kj.jit
def count_plain(flags, counter):
    i = kj.grid(1)
    if flags[i] > 0:
        counter[0] += 1


@kj.jit
def count_atomic(flags, counter):
    i = kj.grid(1)
    if flags[i] > 0:
        kj.atomic.add(counter, 0, 1)


def test_plain_increment_of_a_global_counter(checked):
    flags = kj.to_device(np.ones(64, np.int32))
    counter = kj.to_device(np.zeros(1, np.int32))
    msg = expect(count_plain,
                 "kernel 'count_plain': racecheck: read-after-write hazard on global array "
                 "'counter' at index (0,) (shape (1,)) in block (0, 0, 0): thread (1, 0, 0) "
                 "read it at {file}:{line:counter[0] += 1}, and thread (0, 0, 0) wrote it at "
                 "{file}:{line:counter[0] += 1}, with no barrier between them\n",
                 lambda: count_plain[2, 32](flags, counter))
    # blocks on one worker: block 1's writes race with block 0's too
    assert "racecheck)" in msg


def test_plain_writes_from_two_blocks(checked):
    flags = kj.to_device(np.ones(2, np.int32))
    counter = kj.to_device(np.zeros(1, np.int32))
    expect(count_plain,
           "kernel 'count_plain': racecheck: write-after-write hazard between blocks on global "
           "array 'counter' at index (0,) (shape (1,)): thread (0, 0, 0) of block (1, 0, 0) "
           "wrote it at {file}:{line:counter[0] += 1}, and thread (0, 0, 0) of block (0, 0, 0) "
           "wrote it at {file}:{line:counter[0] += 1} in the same launch\n",
           lambda: count_plain[2, 1](flags, counter))


def test_atomic_counter_is_clean(checked):
    flags = (np.random.default_rng().random(64) > 0.5).astype(np.int32)
    counter = kj.to_device(np.zeros(1, np.int32))
    count_atomic[2, 32](kj.to_device(flags), counter)
    assert counter.copy_to_host()[0] == flags.sum()


# --- initcheck ----------------------------------------------------------------------------------

@kj.jit
def shift_left(x, out, n):
    sh = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    if t < n:
        sh[t] = x[t]  # the tail sh[n:] is never written
    kj.syncthreads()
    out[t] = sh[(t + 1) % 64]


@kj.jit
def shift_left_fixed(x, out, n):
    sh = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    sh[t] = x[t] if t < n else 0.0
    kj.syncthreads()
    out[t] = sh[(t + 1) % 64]


def test_uninitialized_shared_tail(checked):
    x, out = kj.to_device(fresh(64)), poisoned(64)
    msg = expect(shift_left,
                 "kernel 'shift_left': initcheck: read of uninitialized shared memory: array "
                 "'sh' at index (60,) (shape (64,)) at {file}:{line:out[t] = sh}, block "
                 "(0, 0, 0), thread (59, 0, 0): no thread of the block wrote it before\n",
                 lambda: shift_left[1, 64](x, out, 60))
    assert msg.endswith("(and 3 more findings in this launch: 3 initcheck)"), msg


def test_fixed_shared_tail_is_clean(checked):
    x, out = fresh(64), poisoned(64)
    shift_left_fixed[1, 64](kj.to_device(x), out, 60)
    want = np.where(np.arange(64) < 60, x, 0).astype(np.float32)
    np.testing.assert_array_equal(out.copy_to_host(), np.roll(want, -1))


# --- synccheck ----------------------------------------------------------------------------------

@kj.jit
def barrier_in_branch(x, out):
    t = kj.threadIdx.x
    if t < 16:
        kj.syncthreads()
    out[t] = x[t]


@kj.jit
def warp_sum_partial_mask(x, out):
    t = kj.threadIdx.x
    v = x[t]
    if t < 16:
        v += kj.shfl_down_sync(0xFFFFFFFF, v, 8)
    out[t] = v


@kj.jit
def warp_sum_half_mask(x, out):
    t = kj.threadIdx.x
    v = x[t]
    if t < 16:
        v += kj.shfl_down_sync(0x0000FFFF, v, 8)
    out[t] = v


def test_barrier_inside_a_divergent_branch(checked):
    x, out = kj.to_device(fresh(32)), poisoned(32)
    expect(barrier_in_branch,
           "kernel 'barrier_in_branch': divergent syncthreads() in block (0, 0, 0): some threads "
           "of the block reached the barrier at {file}:{line:kj.syncthreads()} and thread "
           "(16, 0, 0) did not",
           lambda: barrier_in_branch[1, 32](x, out))


def test_shuffle_with_a_mask_naming_absent_lanes(checked):
    x, out = kj.to_device(fresh(32)), poisoned(32)
    msg = expect(warp_sum_partial_mask,
                 "kernel 'warp_sum_partial_mask': synccheck: kj.shfl_down_sync() with mask "
                 "0xffffffff at {file}:{line:kj.shfl_down_sync}, block (0, 0, 0), thread "
                 "(0, 0, 0): lanes 16-31 of warp 0, named by the mask, did not call it\n",
                 lambda: warp_sum_partial_mask[1, 32](x, out))
    assert msg.endswith("(and 15 more findings in this launch: 15 synccheck)"), msg


def test_shuffle_with_the_calling_lanes_is_clean(checked):
    x, out = fresh(32), poisoned(32)
    warp_sum_half_mask[1, 32](kj.to_device(x), out)
    want = x.copy()
    want[:8] += x[8:16]
    want[8:16] += x[8:16]  # lanes 8-15 read past the mask's width: their own value
    np.testing.assert_array_equal(out.copy_to_host(), want)


# --- the switch ---------------------------------------------------------------------------------

def test_the_plain_backend_does_not_check():
    previous = set_backend(CpuBackend(sanitize=False))
    try:
        x, out = kj.to_device(fresh(32)), poisoned(32)
        shift_left_fixed[1, 32](x, out, 32)  # clean either way
        assert not np.isnan(out.copy_to_host()).any()
        assert kj.runtime.get_backend().target_spec().sanitize is False
    finally:
        set_backend(previous)


@pytest.mark.parametrize("value, on", [("1", True), ("on", True), ("0", False), ("", False),
                                       ("off", False), ("TRUE", True)])
def test_environment_switch(value, on):
    assert sanitize_from_env({"KAIOJIT_SANITIZE": value}) is on


def test_environment_switch_rejects_other_values():
    with pytest.raises(ValueError, match=r"KAIOJIT_SANITIZE='maybe': expected 1 or 0"):
        sanitize_from_env({"KAIOJIT_SANITIZE": "maybe"})


def test_the_plugin_turns_it_on_by_default():
    import os

    assert os.environ.get("KAIOJIT_SANITIZE") in ("1", "0")
    assert CpuBackend().sanitize is (os.environ["KAIOJIT_SANITIZE"] == "1")


def test_a_freed_arrays_finalizer_inside_the_unwritten_lock_does_not_deadlock():
    """The garbage collector runs a freed array's finalizer (``forget``) wherever Python
    allocates, also inside UnwrittenMemory's locked methods on the same thread: a full suite
    once hung there (``written`` building its list of overlapping allocations)."""
    import threading

    from kaiojit.runtime.sanitizer import UnwrittenMemory

    memory = UnwrittenMemory()
    size = int(np.random.default_rng().integers(16, 256))
    freed, kept = 1 << 20, 1 << 24
    memory.allocated(freed, size)
    memory.allocated(kept, size)
    overlapping = memory._overlapping

    def collecting(lo, hi):  # as a collection inside the list comprehension would
        memory._overlapping = overlapping
        memory.forget(freed)
        return overlapping(lo, hi)

    memory._overlapping = collecting
    worker = threading.Thread(target=memory.written, args=(kept, 1), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "forget inside written() deadlocked"
    memory.written(kept + 1, 1)  # the next holder of the lock drops the freed allocation
    assert memory._overlapping(freed, freed + 1) == []
    assert memory._overlapping(kept, kept + 1) == [kept]


def test_a_free_inside_the_cpu_backends_lock_does_not_deadlock():
    """The same for the cpu backend's table of buffers: a finalizer's free() on a thread that
    holds its lock (pointer_device builds tuples there) waits for the lock's next holder."""
    import threading

    backend = CpuBackend()
    n = int(np.random.default_rng().integers(1, 100))
    ptr = backend.alloc(n)
    live = backend.live_allocations

    def freeing_inside():
        with backend._lock:  # as the collector running the finalizer inside pointer_device
            backend.free(ptr, 0)

    worker = threading.Thread(target=freeing_inside, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "free inside the backend's lock deadlocked"
    assert backend.live_allocations == live - 1  # dropped by the lock's next holder
    assert backend.pointer_device(ptr) == -1
