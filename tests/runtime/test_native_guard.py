"""The native launch helpers' guard (``kaiojit/runtime/native/guard.py``) and the Python path it
falls back to: with the helpers off (``KAIOJIT_NATIVE=0``, or an interpreter they were not
written for), fast launches read arrays through their attributes and call the ctypes
trampoline, and write the same parameters as the native form. Also: the IR record types the
helpers use are laid out as their ``ctypes`` sources say."""

from __future__ import annotations

import sys
import sysconfig

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import env
from kaiojit.runtime import native
from kaiojit.runtime.dlpack import DLTensor
from kaiojit.runtime.native import dlpack_exchange, getset_reader, guard, irstruct, launchrecord
from kaiojit.runtime.native.fastlaunch import source_of
from tests.runtime.fake_arrays import CArray, CMemory, ExchangeTensor

RNG = np.random.default_rng()


@pytest.fixture
def native_off(monkeypatch):
    """The helpers turned off through the knob, read again for this test and after it."""
    monkeypatch.setenv("KAIOJIT_NATIVE", "0")
    env.forget("KAIOJIT_NATIVE")
    yield
    monkeypatch.delenv("KAIOJIT_NATIVE")
    env.forget("KAIOJIT_NATIVE")


def test_this_interpreter_is_one_the_helpers_were_written_for():
    assert guard.interpreter_problem() is None  # the suite runs on CPython 3.11 and 3.12
    assert native.available() and native.unavailable_reason() is None


def test_the_guard_refuses_other_interpreters(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 14, 0, "final", 0))
    assert guard.interpreter_problem() == "CPython 3.14 is outside the tested 3.10 to 3.13"
    monkeypatch.undo()
    real = sysconfig.get_config_var
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))  # free-threaded from 3.13
    monkeypatch.setattr(sysconfig, "get_config_var",
                        lambda name: 1 if name == "Py_GIL_DISABLED" else real(name))
    assert guard.interpreter_problem() == "this CPython is a free-threaded build"
    monkeypatch.undo()
    monkeypatch.setattr(sys.implementation, "name", "pypy")
    assert guard.interpreter_problem() == "the interpreter is pypy, not CPython"
    monkeypatch.undo()
    monkeypatch.setattr(guard, "_PROBLEM", "the interpreter is pypy, not CPython")
    assert not native.available()
    assert native.unavailable_reason() == "the interpreter is pypy, not CPython"
    # asked before any layout is read: nothing native is found
    assert dlpack_exchange.export_function(ExchangeTensor) is None
    assert getset_reader.c_getter(CArray, "dtype") is None
    assert not getset_reader.readable(CArray, CMemory)
    assert not launchrecord.uses_builtin("native")


def test_the_knob_turns_the_helpers_off(native_off):
    assert not native.available() and native.unavailable_reason() == "KAIOJIT_NATIVE=0"
    assert dlpack_exchange.export_function(ExchangeTensor) is None
    assert not getset_reader.readable(CArray, CMemory)
    assert not launchrecord.uses_builtin("native") and not launchrecord.uses_builtin("ex")


def test_a_bad_knob_value_is_named(monkeypatch):
    monkeypatch.setenv("KAIOJIT_NATIVE", "sometimes")
    env.forget("KAIOJIT_NATIVE")
    try:
        with pytest.raises(ValueError, match=r"KAIOJIT_NATIVE='sometimes': takes 1 "):
            native.available()
    finally:
        monkeypatch.delenv("KAIOJIT_NATIVE")
        env.forget("KAIOJIT_NATIVE")


def _fresh_kernel():
    """A new dispatcher each call, so each launch below builds its own fast form."""

    @kj.jit
    def blend(out, x, y, d, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i] * d[i]

    return blend


def _launch(mock, arrays, a, n):
    """Launch twice (the second time through the fast form); the fast form's text and the
    recorded launch."""
    launcher = _fresh_kernel()[(n + 63) // 64, 64]
    before = mock.fast_launches
    launcher(*arrays, a, np.int32(n))
    launcher(*arrays, a, np.int32(n))
    assert mock.fast_launches == before + 1
    return source_of(launcher.fast), mock.launches[-1]


@pytest.mark.parametrize("first_native", [True, False])
def test_fast_launches_agree_with_and_without_the_helpers(mock2, monkeypatch, first_native):
    n = int(RNG.integers(100, 900))

    def device(size=n):
        return kj.to_device(RNG.standard_normal(size).astype(np.float32))

    arrays = (ExchangeTensor(device()), ExchangeTensor(device()), CArray(device()), device())
    a = np.float32(RNG.uniform(-3, 3))
    texts, records = {}, {}
    for on in (first_native, not first_native):
        if on:
            monkeypatch.delenv("KAIOJIT_NATIVE", raising=False)
        else:
            monkeypatch.setenv("KAIOJIT_NATIVE", "0")
        env.forget("KAIOJIT_NATIVE")
        try:
            texts[on], records[on] = _launch(mock2, arrays, a, n)
        finally:
            monkeypatch.delenv("KAIOJIT_NATIVE", raising=False)
            env.forget("KAIOJIT_NATIVE")
    native_text, python_text = texts[True], texts[False]
    assert "READ(a0, a1)" in native_text and "READ_GETSET(a2)" in native_text
    assert "rc = LAUNCH()" in native_text  # the builtin trampoline: the record is its own
    assert "READ" not in python_text and "rc = LAUNCH(REC)" in python_text
    assert "a0.data_ptr()" in python_text and "a2._c_contiguous" in python_text
    on, off = records[True], records[False]
    assert on.params == off.params and (on.grid, on.block) == (off.grid, off.block)
    ptrs = [arrays[0].array.ptr, arrays[1].array.ptr, arrays[2].array.ptr, arrays[3].ptr]
    assert [on.params[2 * k] for k in range(4)] == [p.to_bytes(8, "little") for p in ptrs]
    assert all(on.params[2 * k + 1] == n.to_bytes(8, "little") for k in range(4))


@pytest.mark.parametrize("struct", [dlpack_exchange.Entry, dlpack_exchange.Spec, DLTensor,
                                    getset_reader.Entry, getset_reader.Spec,
                                    launchrecord.LaunchRecord],
                         ids=lambda s: f"{s.__module__.rpartition('.')[2]}.{s.__name__}")
def test_ir_records_are_laid_out_as_their_ctypes_sources(struct):
    assert irstruct.check_layout(struct) == []


def test_ir_record_types_and_placeholders():
    text = irstruct.expand("$(types)\n; $(DLTensor.dtype) $(DLDevice.device_id) $(MASK)",
                           (DLTensor,), MASK=15)
    assert text.splitlines() == [
        "%DLDevice = type { i32, i32 }",
        "%DLDataType = type { i8, i8, i16 }",
        "%DLTensor = type { ptr, %DLDevice, i32, %DLDataType, ptr, ptr, i64 }",
        "; 3 1 15",
    ]
    with pytest.raises(KeyError, match="DLTensor has no field 'lanes'"):
        irstruct.field_index(DLTensor, "lanes")
