"""assert in kernels: checked under debug=True, a KernelError naming the kernel, the line, the
block, the thread and the message on both backends (on the GPU through the fault record, read
at the next wait: the failing thread exits and the context stays usable); removed, condition
included, without debug=True, as numba removes them."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import target as H
from kaiojit.runtime.faults import fault_error
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()
SIG = "void(float32[::1], float32)"
SOURCE = 'assert x[i] < limit, "x is at the limit"'


def bounded(x, limit):
    i = kj.grid(1)
    if i < x.size:
        assert x[i] < limit, "x is at the limit"
        x[i] += 1.0


def unchecked(x, limit):
    i = kj.grid(1)
    if i < x.size:
        x[i] += 1.0


def line_of(fn, snippet: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, t in enumerate(lines) if snippet in t)


def expected_message(kernel: str, block: tuple, thread: tuple) -> str:
    where = f"{inspect.getsourcefile(bounded)}:{line_of(bounded, 'assert x[i]')}"
    return (f"kernel {kernel!r}: assertion failed at {where}, block {block}, thread {thread}: "
            f"x is at the limit\n    {SOURCE}")


def one_bad_element(lo: int = 40, hi: int = 300) -> tuple[np.ndarray, int]:
    n = int(rng.integers(lo, hi))
    x = rng.random(n).astype(np.float32)  # in [0, 1): passes the assert (limit 5)
    bad = int(rng.integers(0, n))
    x[bad] = np.float32(rng.uniform(5.5, 9.0))
    return x, bad


def test_failed_assert_is_a_kernel_error_with_the_line(backend):
    """The same words on both backends: the cpu raises at the launch, the GPU at the wait."""
    kernel = kj.jit(debug=True)(bounded)
    x, bad = one_bad_element()
    d = kj.to_device(x)
    with pytest.raises(kj.KernelError) as info:
        kernel[(x.size + 31) // 32, 32](d, np.float32(5.0))
        kj.synchronize()
    assert str(info.value) == expected_message("bounded", (bad // 32, 0, 0), (bad % 32, 0, 0))
    if backend == "cuda":
        # the failing thread exited before its update; every other thread ran on
        want = x + np.float32(1)
        want[bad] = x[bad]
        np.testing.assert_array_equal(d.copy_to_host(), want)
    # reported once; the context is usable: another kernel launches and runs correctly
    y = rng.random(int(rng.integers(10, 200))).astype(np.float32)
    dy = kj.to_device(y)
    kj.jit(unchecked)[(y.size + 63) // 64, 64](dy, np.float32(5.0))
    kj.synchronize()
    np.testing.assert_array_equal(dy.copy_to_host(), y + np.float32(1))


def test_of_many_failures_one_is_reported_once(backend):
    """The first to claim the record wins (on the GPU a race, on the cpu thread order)."""
    n = int(rng.integers(200, 2000))
    x = rng.random(n).astype(np.float32)
    bad = rng.choice(n, size=int(rng.integers(2, 50)), replace=False)
    x[bad] = np.float32(7.0)
    with pytest.raises(kj.KernelError) as info:
        kj.jit(debug=True)(bounded)[(n + 127) // 128, 128](kj.to_device(x), np.float32(5.0))
        kj.synchronize()
    m = re.match(r"kernel 'bounded': assertion failed at .*, block \((\d+), 0, 0\), thread "
                 r"\((\d+), 0, 0\): x is at the limit\n", str(info.value))
    assert m, str(info.value)
    assert int(m.group(1)) * 128 + int(m.group(2)) in set(bad.tolist())
    if backend == "cpu":
        assert int(m.group(1)) * 128 + int(m.group(2)) == bad.min()
    kj.synchronize()  # reported once


def barrier_after_assert(out, x):
    tile = kj.shared.array(64, kj.float32)
    t = kj.threadIdx.x
    assert x[t] >= 0.0, "negative input"
    tile[t] = x[t] * 2.0
    kj.syncthreads()
    out[t] = tile[63 - t]


@pytest.mark.gpu
def test_a_thread_that_failed_an_assert_does_not_hold_up_a_barrier():
    """PTX exit releases a block barrier that waits only on exited threads."""
    if not kj.is_cuda_available():
        pytest.skip("needs a CUDA device")
    previous = kj.set_backend("cuda")
    try:
        kernel = kj.jit(debug=True)(barrier_after_assert)
        x = rng.random(64).astype(np.float32) + np.float32(0.5)
        bad = int(rng.integers(0, 64))
        x[bad] = -x[bad]
        out = kj.to_device(np.full(64, np.nan, np.float32))
        stream = kj.Stream()  # reported from a stream other than the default one too
        kernel[1, 64, stream](out, kj.to_device(x))
        with pytest.raises(kj.KernelError) as info:
            stream.synchronize()
        where = f"{__file__}:{line_of(barrier_after_assert, 'assert x[t]')}"
        assert str(info.value) == (
            f"kernel 'barrier_after_assert': assertion failed at {where}, block (0, 0, 0), "
            f"thread ({bad}, 0, 0): negative input\n    assert x[t] >= 0.0, \"negative input\"")
        got = out.copy_to_host()
        for t in range(64):
            if t == bad:
                assert np.isnan(got[t])  # exited before its store
            elif 63 - t != bad:  # (tile[bad] was never written)
                assert got[t] == x[63 - t] * 2, t
    finally:
        kj.set_backend(previous)


def test_debug_assert_ptx_records_the_fault_and_exits():
    """Under debug=True the GPU claims kaiojit_fault with ERR_ASSERT and exits: no trap, no
    printf; the assert's site names its line and message (ptxas assembles the PTX)."""
    ck = kj.jit(debug=True)(bounded).compile(SIG, kj.target.TargetSpec())
    ptx = ck.ptx
    assert re.search(rf"atom(\.\w+)*\.cas\.b64\s+%rd\d+, \[{H.FAULT_GLOBAL}\], 0, "
                     rf"{H.ERR_ASSERT};", ptx), ptx
    assert re.search(rf"st(\.\w+)*\.b64\s+\[{H.FAULT_GLOBAL}\+{8 * H.FAULT_THREAD}\]", ptx)
    assert re.search(r"^\s*exit;", ptx, re.MULTILINE)
    assert "trap" not in ptx and "vprintf" not in ptx
    (site,) = [s for s in ck.fault_sites if s["kind"] == "assert"]
    assert (site["filename"], site["line"], site["message"]) == (
        inspect.getsourcefile(bounded), line_of(bounded, "assert x[i]"), "x is at the limit")


def test_a_gpu_assert_record_reads_as_the_cpu_backend_reports():
    previous = kj.set_backend("cpu")
    try:
        x, bad = one_bad_element()
        with pytest.raises(kj.KernelError) as cpu_error:
            kj.jit(debug=True)(bounded)[(x.size + 31) // 32, 32](kj.to_device(x),
                                                                 np.float32(5.0))
    finally:
        kj.set_backend(previous)
    ck = kj.jit(debug=True)(bounded).compile(SIG, kj.target.TargetSpec())
    site = next(i for i, s in enumerate(ck.fault_sites) if s["kind"] == "assert")
    words = [0] * H.FAULT_WORDS
    words[H.FAULT_KIND], words[H.FAULT_SITE] = H.ERR_ASSERT, site
    words[H.FAULT_BLOCK:H.FAULT_BLOCK + 3] = (bad // 32, 0, 0)
    words[H.FAULT_THREAD:H.FAULT_THREAD + 3] = (bad % 32, 0, 0)
    gpu_error = fault_error(ck.py_name, ck.fault_sites, words)
    assert str(gpu_error) == str(cpu_error.value)
    assert str(gpu_error) == expected_message("bounded", (bad // 32, 0, 0), (bad % 32, 0, 0))


def test_without_debug_an_assert_is_removed_condition_and_all():
    """No check, no trap, no fault record: the PTX is that of the kernel without the assert."""
    def ptx_of(fn):
        text = kj.jit(fn).compile(SIG, kj.target.TargetSpec()).ptx
        return re.sub(rf"\b{fn.__name__}_[0-9a-f]+", "KERNEL", text)

    plain = ptx_of(bounded)
    assert plain == ptx_of(unchecked)
    assert H.FAULT_GLOBAL not in plain and "trap" not in plain


def counted(x, count):
    i = kj.grid(1)
    if i < x.size:
        assert kj.atomic.add(count, 0, 1) >= 0
        x[i] += 1.0


def test_without_debug_the_condition_is_not_evaluated(backend):
    """As ``python -O``: a side effect in the condition happens only under debug=True."""
    n = int(rng.integers(40, 300))
    for debug in (False, True):
        x = rng.random(n).astype(np.float32)
        d, count = kj.to_device(x), kj.to_device(np.zeros(1, np.int32))
        kj.jit(debug=debug)(counted)[(n + 63) // 64, 64](d, count)
        assert count.copy_to_host()[0] == (n if debug else 0)
        np.testing.assert_array_equal(d.copy_to_host(), x + np.float32(1))


def test_passing_asserts_change_nothing(backend):
    x = rng.random(int(rng.integers(40, 300))).astype(np.float32)
    kernel = kj.jit(debug=True)(bounded)
    d = kj.to_device(x)
    kernel[(x.size + 31) // 32, 32](d, np.float32(5.0))
    kj.synchronize()
    np.testing.assert_array_equal(d.copy_to_host(), x + np.float32(1))
    compile_for_gpu(kernel)


def message_not_literal(x):
    assert x[0] > 0, x[0]


def condition_is_array(x):
    assert x


@pytest.mark.parametrize("fn, snippet, message", [
    (message_not_literal, "x[0]", r"the message of an assert in a kernel must be a string"),
    (condition_is_array, "x", r"cannot be used as a condition"),
])
def test_assert_errors_name_the_line(fn, snippet, message):
    with pytest.raises(kj.TypingError, match=message) as info:
        kj.jit(fn).compile("void(float32[::1])")
    assert_located(info.value, fn, snippet, occurrence=1 if fn is message_not_literal else 0)
