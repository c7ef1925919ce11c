"""Every kaiojit error and warning survives pickling (multiprocessing, pytest-xdist, logging
to another process) with the same message and fields."""

from __future__ import annotations

import inspect
import pickle
import random

import pytest

from kaiojit import errors

RNG = random.Random()


def _location() -> errors.SourceLocation:
    line, col = RNG.randint(1, 500), RNG.randint(0, 30)
    return errors.SourceLocation(f"kernel_{line}.py", line, col,
                                 " " * col + "x = a[i] + b\n", col + RNG.randint(1, 6))


def _samples() -> dict[type, BaseException]:
    n = RNG.randint(0, 10**6)
    return {
        errors.KaiojitError: errors.KaiojitError(f"something {n}"),
        errors.CompileError: errors.CompileError(f"cannot compile {n}", _location()),
        errors.TypingError: errors.TypingError(f"int32 + tuple {n}", _location()),
        errors.UnsupportedError: errors.UnsupportedError(f"no generators {n}", None),
        errors.LaunchError: errors.LaunchError(f"block ({n}, 1, 1) has too many threads"),
        errors.ArgumentError: errors.ArgumentError(f"k(): parameter 'x': no {n}"),
        errors.CudaError: errors.CudaError("CUDA_ERROR_ILLEGAL_ADDRESS", f"illegal {n}",
                                           f"kernel 'k{n}', grid=(1, 1, 1)", 700),
        errors.KernelError: errors.KernelError(f"index {n} is out of bounds"),
        errors.DeviceFunctionError: errors.DeviceFunctionError(f"Cannot compile f{n}"),
        errors.LibdeviceNotFound: errors.LibdeviceNotFound(f"no libdevice {n}"),
        errors.PerformanceWarning: errors.PerformanceWarning(f"copied {n} bytes"),
    }


def _fields(e: BaseException) -> dict:
    return {k: v for k, v in vars(e).items() if not k.startswith("__")}


def test_every_error_class_has_a_sample():
    classes = {c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, BaseException) and c.__module__ == errors.__name__}
    assert classes == set(_samples())


@pytest.mark.parametrize("cls", list(_samples()), ids=lambda c: c.__name__)
def test_error_pickles_with_its_message_and_fields(cls):
    error = _samples()[cls]
    error.add_note(f"note {RNG.random()}")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls
    assert str(again) == str(error)
    assert again.args == error.args
    assert _fields(again) == _fields(error)
    assert again.__notes__ == error.__notes__


def test_located_errors_keep_their_location():
    error = errors.TypingError("float64 where int32 is declared", _location())
    again = pickle.loads(pickle.dumps(error))
    assert again.loc == error.loc and again.message == error.message
    assert str(again).startswith(f"{error.loc}: float64 where int32 is declared\n")


def test_cuda_error_keeps_its_driver_fields():
    error = errors.CudaError("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure",
                             "kernel 'saxpy', grid=(4, 1, 1)", 719)
    again = pickle.loads(pickle.dumps(error))
    assert (again.name, again.text, again.context, again.code) == (
        "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure",
        "kernel 'saxpy', grid=(4, 1, 1)", 719)
    assert str(again) == ("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure "
                          "(kernel 'saxpy', grid=(4, 1, 1))")
