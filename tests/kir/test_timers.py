"""kj.nanosleep and kj.globaltimer, the intrinsics declared in kaiojit/intrinsics/timers.py:
located typing errors, the PTX they become (assembled by ptxas), the arch nanosleep needs, and
on the cpu backend a clock that advances across a sleep."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.errors import TypingError, UnsupportedError
from kaiojit.kir import intrinsics
from kaiojit.lower.nvptx import NVPTXTarget
from tests.kir.lowering import assert_at, llvm_ir
from tests.located import assert_located, compile_error

POISON = np.iinfo(np.uint64).max
STEPS = 4


def timed(out, pause):
    i = kj.grid(1)
    if i < out.shape[0]:
        for k in range(STEPS):
            out[i, k] = kj.globaltimer()
            kj.nanosleep(pause)


def timed_in_block(out):
    t = kj.threadIdx.x
    out[t, 0] = kj.globaltimer()
    kj.nanosleep(1000)
    kj.syncthreads()
    out[t, 1] = kj.globaltimer()


def sleep_float(out):
    kj.nanosleep(1.5)


def sleep_negative(out):
    kj.nanosleep(-1)


def sleep_nothing(out):
    kj.nanosleep()


def timer_with_argument(out):
    out[0] = kj.globaltimer(3)


def sleep_const(out):
    kj.nanosleep(100)


def timer_with_result(out):
    out[0] = kj.globaltimer()


@pytest.mark.parametrize("kernel, snippet, words", [
    (sleep_float, "1.5", "kj.nanosleep() takes whole nanoseconds (an integer), got float64"),
    (sleep_negative, "-1", "kj.nanosleep() takes 0 to 4294967295 nanoseconds, got -1"),
    (sleep_nothing, "kj.nanosleep()", "kj.nanosleep() takes 1 arguments, got 0"),
    (timer_with_argument, "kj.globaltimer(3)", "kj.globaltimer() takes 0 arguments, got 1"),
])
def test_typing_errors_are_located(kernel, snippet, words):
    err = compile_error(kernel, "void(uint64[::1])", TypingError)
    assert_located(err, kernel, snippet)
    assert words in str(err)


def test_ptx_reads_the_global_timer_and_sleeps():
    ptx = kj.compile_ptx(timed, "void(uint64[:, ::1], uint32)")
    # the loop is unrolled: every reading stays, none merged with another
    assert ptx.count("%globaltimer;") == STEPS
    assert ptx.count("nanosleep.u32") == STEPS
    assert "nanosleep.u32 \t100;" in kj.compile_ptx(sleep_const, "void(uint64[::1])")


def test_nanosleep_below_sm_70_is_a_located_error():
    with pytest.raises(UnsupportedError) as info:
        llvm_ir(sleep_const, "void(uint64[::1])", NVPTXTarget("sm_60"))
    assert_at(info.value, sleep_const, "kj.nanosleep(100)")
    assert "kj.nanosleep() needs sm_70 or newer; this kernel is compiled for sm_60" \
        in str(info.value)
    assert "llvm.nvvm.nanosleep" in llvm_ir(sleep_const, "void(uint64[::1])",
                                            NVPTXTarget("sm_70"))
    # the global timer is there on every arch
    assert "globaltimer" in llvm_ir(timer_with_result, "void(uint64[::1])", NVPTXTarget("sm_60"))


def test_declarations():
    sleep, clock = intrinsics.lookup("timer.nanosleep"), intrinsics.lookup("timer.globaltimer")
    assert sleep.min_arch == "sm_70" and clock.min_arch is None
    assert not (sleep.pure or clock.pure)  # time passes; two readings differ
    assert sleep.host_symbols == ("nanosleep",) and clock.host_symbols == ("clock_gettime",)
    assert kj.nanosleep is intrinsics.public_object("nanosleep")


def test_the_clock_advances_across_sleeps(kj_backend):
    n = int(np.random.default_rng().integers(20, 70))
    out = kj.to_device(np.full((n, STEPS), POISON, np.uint64))
    kj.jit(timed)[2, 64](out, np.uint32(2000))
    got = out.copy_to_host()
    assert (got != POISON).all()
    assert (np.diff(got.astype(np.int64), axis=1) >= 0).all()
    if kj_backend == "cpu":  # a real sleep between two readings of a monotonic clock
        assert (np.diff(got.astype(np.int64), axis=1) > 0).all()


def test_the_clock_advances_across_a_barrier(kj_backend):
    out = kj.to_device(np.full((64, 2), POISON, np.uint64))
    kj.jit(timed_in_block)[1, 64](out)
    got = out.copy_to_host().astype(np.int64)
    assert (got[:, 0] != -1).all() and (got[:, 1] != -1).all()
    # every thread's second reading is after every first reading: all slept before the barrier
    assert got[:, 1].min() >= got[:, 0].max()
