"""numba's checks in ``cuda.compile_ptx`` / ``cuda.compile``: an unknown ABI, the C ABI for a
kernel, a kernel that returns a value (numba's TypeError), an arch-specific ``cc=(9, 0, "a")``;
and ``if flag:`` of a global or closure variable that is None (issue 28: the first three
compiled or raised kaiojit's TypingError, the arch lost its ``a``, None was refused)."""

import numpy as np
import pytest

from kaiojit import cuda, float32, int32, uint32

rng = np.random.default_rng()
DEBUG = None


def add(x, y):
    return x + y


def returns_a_value(x, y):
    return x[0] + y[0]


def test_unknown_abi_and_c_abi_kernels_are_refused():
    with pytest.raises(NotImplementedError, match="Unsupported ABI: fastcall"):
        cuda.compile_ptx(add, (int32, int32), abi="fastcall")
    with pytest.raises(NotImplementedError, match="The C ABI is not supported for kernels"):
        cuda.compile_ptx(add, (int32, int32), abi="c")
    with pytest.raises(NotImplementedError, match="The C ABI is not supported for kernels"):
        cuda.compile_all(add, (int32, int32), abi="c", device=False, output="ptx")
    ptx, restype = cuda.compile_ptx(add, (int32, int32), abi="c", device=True)
    assert restype == int32 and ".func" in ptx


def test_kernel_returning_a_value_is_numbas_type_error():
    with pytest.raises(TypeError, match="Kernel function returns_a_value must have void return "
                                        "type but got uint32"):
        cuda.compile_ptx(returns_a_value, (uint32[::1], uint32[::1]))


def test_arch_specific_compute_capability():
    ptx, _ = cuda.compile_ptx(add, (float32, float32), device=True, cc=(9, 0, "a"))
    assert ".target sm_90a" in ptx
    ptx, _ = cuda.compile_ptx(add, (float32, float32), device=True, cc=(8, 6))
    assert ".target sm_86" in ptx


def test_if_of_a_none_global_is_false(kj_backend):
    @cuda.jit("void(float32[::1])")
    def f(b):
        if DEBUG:
            b[0] = -1.0
        else:
            b[0] = b[0] * 2

    x = rng.uniform(1, 2, 4).astype(np.float32)
    d = cuda.to_device(x)
    f[1, 1](d)
    got = d.copy_to_host()
    assert got[0] == x[0] * 2 and (got[1:] == x[1:]).all()


def test_c_abi_name_names_the_ptx_function():
    # abi_info={"abi_name": ...} was ignored: the function kept its Python name
    ptx, restype = cuda.compile_ptx(add, int32(int32, int32), device=True, abi="c",
                                    abi_info={"abi_name": "_Z4funcii"})
    assert restype == int32
    assert ".visible .func  (.param .b32 func_retval0) _Z4funcii(" in ptx
    code, _ = cuda.compile(lambda x: x, int32(int32), device=True, abi="c",
                           abi_info={"abi_name": "blah"}, output="ptx")
    assert ".visible .func  (.param .b32 func_retval0) blah(" in code
    with pytest.raises(ValueError, match="abi_name must be a C identifier"):
        cuda.compile_ptx(add, int32(int32, int32), device=True, abi="c",
                         abi_info={"abi_name": "not a name"})
