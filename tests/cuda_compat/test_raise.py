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


def divides(out, x, y, which):
    i = kj.grid(1)
    if i < x.size:
        if which == 0:
            out[i] = x[i] / y[i]
        elif which == 1:
            out[i] = x[i] // y[i]
        else:
            out[i] = x[i] % y[i]


@pytest.mark.parametrize("which, words", [(0, "division by zero"), (1, "division by zero"),
                                          (2, "modulo by zero")])
def test_debug_division_by_zero_raises_zero_division_error(kj_backend, which, words):
    n = int(rng.integers(40, 120))
    x = rng.uniform(1.0, 9.0, n)
    y = rng.uniform(1.0, 9.0, n)
    out = kj.to_device(np.full(n, np.nan))
    plain, checked = cuda.jit(divides), cuda.jit(debug=True)(divides)
    checked[(n + 31) // 32, 32](out, kj.to_device(x), kj.to_device(y), which)  # no zero: runs
    want = (x / y, x // y, x % y)[which]
    np.testing.assert_allclose(out.copy_to_host(), want)
    bad = int(rng.integers(0, n))
    y[bad] = 0.0
    with pytest.raises(ZeroDivisionError) as e:
        checked[(n + 31) // 32, 32](out, kj.to_device(x), kj.to_device(y), which)
    line = divides.__code__.co_firstlineno + 2 * which + 4
    assert str(e.value) == (f"In function 'divides', file {__file__}, line {line}, "
                            f"tid=[{bad % 32}, 0, 0] ctaid=[{bad // 32}, 0, 0]: {words}")
    assert f"{H.FAULT_GLOBAL}" in compile_for_gpu(checked)[0]  # the GPU records it too
    plain[(n + 31) // 32, 32](out, kj.to_device(x), kj.to_device(y), which)  # no check
    got = out.copy_to_host()[bad]
    assert got == np.inf if which == 0 else (got == np.inf if which == 1 else np.isnan(got))


def picks(out, t0, t1, t2, k):
    shape = (t0, t1, t2)
    out[0] = shape[k]
    out[1] = out.shape[k - 3]  # a 1-tuple: only -1 and 0 are in range


def test_debug_tuple_index_out_of_range_raises_index_error(kj_backend):
    checked = cuda.jit(debug=True)(picks)
    vals = [float(v) for v in rng.uniform(1, 100, 3)]
    out = kj.to_device(np.full(2, np.nan))
    checked[1, 1](out, *vals, 2)
    np.testing.assert_array_equal(out.copy_to_host(), [vals[2], 2.0])
    for k, snippet in ((3, "shape[k]"), (1, "out.shape[k - 3]")):
        with pytest.raises(IndexError, match=r"tid=\[0, 0, 0\] ctaid=\[0, 0, 0\]: tuple index "
                                             r"out of range$") as e:
            checked[1, 1](out, *vals, k)
        line = picks.__code__.co_firstlineno + (2 if k == 3 else 3)
        assert f"line {line}," in str(e.value), snippet
    assert f"{H.FAULT_GLOBAL}" in compile_for_gpu(checked)[0]
