"""A device function used as a kernel: numba's RuntimeError (kaiojit's TypeError too), with
numba's words, and no kaiojit frame."""

from __future__ import annotations

import pytest

from kaiojit import cuda
from kaiojit.errors import DeviceFunctionError
from tests.located import assert_no_internals


@cuda.jit(device=True)
def plus(a, b):
    return a + b


@pytest.mark.parametrize("cls", [RuntimeError, TypeError, DeviceFunctionError])
def test_launching_or_inspecting_the_sass_of_a_device_function(kj_backend, cls):
    with pytest.raises(cls, match=r"^Cannot compile a device function as a kernel: plus is a "
                                  r"device function \(device=True\); call it from a kernel$") as e:
        plus[1, 1](1, 2)
    assert_no_internals(e.value)
    with pytest.raises(cls, match=r"^Cannot inspect SASS of a device function: plus is compiled "
                                  r"into the kernels that call it \(inspect theirs\)$") as e:
        plus.inspect_sass((cuda.int32, cuda.int32))
    assert_no_internals(e.value)
