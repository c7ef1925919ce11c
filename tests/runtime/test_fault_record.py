"""The GPU's debug fault record on the mock backend: a debug kernel's launch watches its module's
``kaiojit_fault``; the test writes the record as a failing thread on the GPU would, and the next
wait (``kj.synchronize()``, a stream's ``synchronize()``, a synchronous copy to the host) raises
the KernelError once. A kernel without ``debug=True`` is never watched, so waits read nothing."""

from __future__ import annotations

import ctypes
import inspect

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import target as H

RNG = np.random.default_rng()


def checked(x, limit):
    i = kj.grid(1)
    if i < x.size:
        assert x[i] < limit, "over the limit"
        x[i] += 1.0


def assert_line() -> int:
    lines, first = inspect.getsourcelines(checked)
    return first + next(k for k, t in enumerate(lines) if "assert" in t)


def write_record(mock, kind: int, site: int, block: tuple, thread: tuple) -> None:
    """What the failing thread's compare-and-swap and stores leave in the record."""
    ((address, _, _),) = mock.faults.records.values()
    words = (ctypes.c_int64 * H.FAULT_WORDS).from_address(address)
    assert list(words) == [0] * H.FAULT_WORDS  # zero at load, and after a report
    words[H.FAULT_KIND], words[H.FAULT_SITE] = kind, site
    words[H.FAULT_BLOCK:H.FAULT_BLOCK + 3] = block
    words[H.FAULT_THREAD:H.FAULT_THREAD + 3] = thread


def launch_checked(mock, stream=None):
    kernel = kj.jit(debug=True)(checked)
    x = kj.to_device(RNG.random(int(RNG.integers(50, 500))).astype(np.float32))
    if stream is None:
        kernel[(x.size + 127) // 128, 128](x, np.float32(2.0))
    else:
        kernel[(x.size + 127) // 128, 128, stream](x, np.float32(2.0))
    ((_, name, sites),) = mock.faults.records.values()  # watched since its first launch
    assert name == "checked"
    return x, next(i for i, s in enumerate(sites) if s["kind"] == "assert")


def expected(block: tuple, thread: tuple) -> str:
    return (f"kernel 'checked': assertion failed at {__file__}:{assert_line()}, block {block}, "
            f"thread {thread}: over the limit\n    assert x[i] < limit, \"over the limit\"")


@pytest.mark.parametrize("wait", ["synchronize", "stream", "copy"])
def test_a_recorded_assert_is_raised_at_the_next_wait(mock, wait):
    stream = kj.Stream() if wait == "stream" else None
    x, site = launch_checked(mock, stream)
    block = (int(RNG.integers(0, 4)), 0, 0)
    thread = (int(RNG.integers(0, 128)), 0, 0)
    write_record(mock, H.ERR_ASSERT, site, block, thread)
    with pytest.raises(kj.KernelError) as info:
        if wait == "synchronize":
            kj.synchronize()
        elif wait == "stream":
            stream.synchronize()
        else:
            x.copy_to_host()
    assert str(info.value) == expected(block, thread)
    kj.synchronize()  # cleared once reported
    write_record(mock, H.ERR_ASSERT, site, block, thread)  # and still watched
    with pytest.raises(kj.KernelError):
        kj.synchronize()


def test_a_kernel_without_debug_is_not_watched(mock):
    x = kj.to_device(RNG.random(100).astype(np.float32))
    kj.jit(checked)[1, 128](x, np.float32(2.0))
    assert not mock.faults  # a wait reads no record
    kj.synchronize()


def test_a_dropped_debug_kernel_is_no_longer_watched(mock):
    """A debug kernel's module is unloaded when the kernel is dropped: its record's memory is
    gone, so the next wait must not read it (the driver answers CUDA_ERROR_INVALID_VALUE, which
    surfaced in every later synchronous copy), and a module loaded later is watched afresh."""
    import gc

    x, _ = launch_checked(mock)
    ((address, _, _),) = mock.faults.records.values()
    gc.collect()  # the kernel made inside launch_checked is gone: its module unloaded
    assert not mock.faults
    y = RNG.random(int(RNG.integers(10, 100))).astype(np.float32)
    d = kj.to_device(y)
    np.testing.assert_array_equal(d.copy_to_host(), y)  # a synchronous copy reads no record
    kj.synchronize()
    launch_checked(mock)  # a new debug kernel is watched again, at its own record
    ((fresh, _, _),) = mock.faults.records.values()
    assert fresh != address


def test_a_fault_of_a_kernel_dropped_before_the_wait_is_still_raised(mock):
    import gc

    x, site = launch_checked(mock)
    block, thread = (int(RNG.integers(0, 4)), 0, 0), (int(RNG.integers(0, 128)), 0, 0)
    write_record(mock, H.ERR_ASSERT, site, block, thread)
    gc.collect()  # the kernel goes (its module unloaded) before anything waited
    with pytest.raises(kj.KernelError) as info:
        x.copy_to_host()
    assert str(info.value) == expected(block, thread)
    kj.synchronize()  # raised once
    assert not mock.faults


class OutOfRange(Exception):
    pass


def raising(x, limit):
    i = kj.grid(1)
    if i < x.size:
        if x[i] > limit:
            raise OutOfRange("over the limit")
        x[i] += 1.0


def test_a_debug_kernel_with_raise_raises_at_its_launch(mock):
    """numba's exceptions (``raise`` under debug=True) are raised by the launch itself, as
    numba's debug launches read their error code back at once: the launch waits for the kernel
    and reads the record (on the GPU the fault is otherwise only seen at a later wait, in
    another test or another line of the user's program). Every launch does, the fast path
    included."""
    kernel = kj.jit(debug=True)(raising)
    x = kj.to_device(RNG.random(int(RNG.integers(50, 500))).astype(np.float32))
    grid = (x.size + 127) // 128
    kernel[grid, 128](x, np.float32(2.0))  # nothing recorded: the launch returns
    ((_, _, sites),) = mock.faults.records.values()
    site = next(i for i, s in enumerate(sites) if s["kind"] == "raise")
    waits = []
    synchronize = mock.stream_synchronize

    def the_kernel_runs_then_the_wait(stream):
        waits.append(stream)  # the failing thread of the launch waited for:
        write_record(mock, H.ERR_RAISE, site, (1, 0, 0), (5, 0, 0))
        synchronize(stream)

    mock.stream_synchronize = the_kernel_runs_then_the_wait
    for _ in range(2):
        with pytest.raises(OutOfRange) as info:
            kernel[grid, 128](x, np.float32(2.0))
        assert "tid=[5, 0, 0] ctaid=[1, 0, 0]: over the limit" in str(info.value)
        # raised at the user's launch line, through kaiojit's entry point only
        assert [str(e.path) for e in info.traceback[-2:]] == [__file__, kj.errors.__file__]
    assert waits == [0, 0]
    assert mock.fast_launches == 0
    kj.synchronize()  # each was raised once
