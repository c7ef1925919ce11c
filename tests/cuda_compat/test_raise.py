"""``raise`` in kernels, as numba compiles it: under debug=True the first raise of a launch
is raised on the host (the user's class, numba's message with the thread's position), the
raising thread stops; without debug it only stops. A raise kaiojit cannot compile is a
located error."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda
from kaiojit import target as H
from kaiojit.runtime.faults import fault_error
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located, compile_error

rng = np.random.default_rng()


class BadValue(Exception):
    pass


def raises_in_one_thread(out, who, code):
    i = kj.grid(1)
    if i < out.size:
        out[i] = i
        if i == who:
            if code == 1:
                raise BadValue
            raise BadValue("value out of range", 7)
        out[i] = -i  # not reached by the raising thread


@pytest.mark.parametrize("code", [1, 2])
def test_a_debug_kernel_raises_the_users_exception_with_the_thread(kj_backend, code):
    kernel = cuda.jit(debug=True, opt=False)(raises_in_one_thread)
    n = int(rng.integers(70, 200))
    who = int(rng.integers(64, n))
    out = kj.to_device(np.full(n, 999, np.int64))
    with pytest.raises(BadValue) as e:
        kernel[(n + 31) // 32, 32](out, who, code)
    line = raises_in_one_thread.__code__.co_firstlineno + (6 if code == 1 else 7)
    where = (f"In function 'raises_in_one_thread', file {__file__}, line {line}, "
             f"tid=[{who % 32}, 0, 0] ctaid=[{who // 32}, 0, 0]")
    if code == 1:
        assert e.value.args == (where,)
    else:
        assert e.value.args == (f"{where}: value out of range", 7)
    assert isinstance(e.value, kj.KernelError)  # caught as kaiojit's fault too
    # the raising thread stopped at the raise (the cpu backend may skip the blocks after a
    # fault; the GPU runs them)
    assert out.copy_to_host()[who] == who
    kernel[(n + 31) // 32, 32](out, -1, code)  # no thread raises: nothing is reported
    np.testing.assert_array_equal(out.copy_to_host(), -np.arange(n))
    assert "call void @llvm.nvvm.exit" not in compile_for_gpu(kernel)[0]


def test_a_gpu_raise_record_reads_as_the_cpu_backend_reports():
    """The GPU's fault record of a raise (kaiojit/lower/gpu_faults.py) becomes the same
    exception as the cpu backend's."""
    ck = cuda.jit(debug=True, opt=False)(raises_in_one_thread).compile(
        "void(int64[:], int64, int64)", kj.target.TargetSpec())
    assert re.search(rf"atom(\.\w+)*\.cas\.b64\s+%rd\d+, \[{H.FAULT_GLOBAL}\], 0, "
                     rf"{H.ERR_RAISE};", ck.ptx), ck.ptx
    sites = [i for i, s in enumerate(ck.fault_sites) if s["kind"] == "raise"]
    assert len(sites) == 2
    block, thread = int(rng.integers(0, 100)), int(rng.integers(0, 32))
    words = [0] * H.FAULT_WORDS
    words[H.FAULT_KIND], words[H.FAULT_SITE] = H.ERR_RAISE, sites[1]
    words[H.FAULT_BLOCK:H.FAULT_BLOCK + 3] = (block, 0, 0)
    words[H.FAULT_THREAD:H.FAULT_THREAD + 3] = (thread, 0, 0)
    err = fault_error(ck.py_name, ck.fault_sites, words)
    line = raises_in_one_thread.__code__.co_firstlineno + 7
    where = (f"In function 'raises_in_one_thread', file {__file__}, line {line}, "
             f"tid=[{thread}, 0, 0] ctaid=[{block}, 0, 0]")
    assert isinstance(err, BadValue) and err.args == (f"{where}: value out of range", 7)


def test_without_debug_the_raising_thread_only_stops(kj_backend):
    kernel = cuda.jit(raises_in_one_thread)
    n = int(rng.integers(40, 100))
    who = int(rng.integers(0, n))
    out = kj.to_device(np.full(n, 999, np.int64))
    kernel[(n + 31) // 32, 32](out, who, 2)
    want = -np.arange(n)
    want[who] = who
    np.testing.assert_array_equal(out.copy_to_host(), want)


@kj.jit(device=True)
def device_raises(x):
    if x > 0:
        raise ValueError("no")
    return x


def k_device_raise(out):
    out[0] = device_raises(out[0])


def k_not_a_class(out):
    raise out


def k_variable_message(out):
    raise ValueError(out[0])


def k_raise_from(out):
    raise ValueError("a") from None


CASES = [
    (k_device_raise, device_raises.py_func, 'raise ValueError("no")',
     "'raise' in a device function is not supported: raise in the kernel itself"),
    (k_not_a_class, k_not_a_class, "out", "a kernel raises an exception class"),
    (k_variable_message, k_variable_message, "out[0]",
     "an exception raised in a kernel takes constant arguments"),
    (k_raise_from, k_raise_from, "None", "'raise ... from' is not supported in kernels"),
]


@pytest.mark.parametrize("fn, where, snippet, words", CASES, ids=lambda v: getattr(v, "__name__",
                                                                                    None))
def test_raises_kaiojit_cannot_compile_are_located(fn, where, snippet, words):
    err = compile_error(fn, "void(float32[:])", kj.UnsupportedError)
    assert words in err.message
    assert_located(err, where, snippet)
