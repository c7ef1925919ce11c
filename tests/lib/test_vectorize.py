"""kj.vectorize: elementwise kernels from scalar functions, against NumPy."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kaiojit as kj
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()


@kj.vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def add(a, b):
    return a + b


@kj.vectorize(["float32(float32, float32, float32)", "float64(float64, float64, float64)"],
              target="cuda")
def discriminant(a, b, c):
    return math.sqrt(b ** 2 - 4 * a * c)


@kj.vectorize(["int32(int32, int32)", "int64(int64, int64)"])
def scaled_difference(a, b):
    return 3 * a - b


def normal(shape, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def poisoned(shape, dtype=np.float32):
    return kj.to_device(np.full(shape, np.nan, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_in_numpy_out(backend, dtype):
    n = int(rng.integers(1000, 5000))
    x, y = normal(n, dtype), normal(n, dtype)
    got = add(x, y)
    assert isinstance(got, np.ndarray) and got.dtype == dtype
    np.testing.assert_array_equal(got, x + y)
    compile_for_gpu(*add.kernels)


@pytest.mark.parametrize("n", [1, 3, 4, 5, "large"])  # ids fixed: pytest-xdist's workers
def test_every_size_of_the_flat_kernel(backend, n):      # must collect the same tests
    if n == "large":
        n = 4 * int(rng.integers(100, 1000)) + 1
    """Four elements a thread, and the last thread's one to three, as 128-bit accesses where
    the arrays are 16-byte aligned (the PTX of the float32 kernel)."""
    x, y = normal(n), normal(n)
    out = poisoned(n)
    add(kj.to_device(x), kj.to_device(y), out=out)
    np.testing.assert_array_equal(out.copy_to_host(), x + y)
    compile_for_gpu(*add.kernels)
    aligned = [(k, sig) for k in add.kernels for sig in k.signatures
               if str(sig).startswith("void(float32[::1, align=16], float32[::1, align=16], "
                                      "float32[::1, align=16]")]
    assert aligned, [k.signatures for k in add.kernels]
    kernel, sig = aligned[0]
    ptx = kernel.compile(sig).ptx
    assert ptx.count("ld.global.nc.v4.b32") == 2 and ptx.count("st.global.v4.b32") == 1, ptx


def test_device_arrays_give_a_device_array(backend):
    x, y = normal((37, 41)), normal((37, 41))
    got = add(kj.to_device(x), y)  # one device operand is enough
    assert isinstance(got, kj.DeviceArray) and got.shape == (37, 41)
    np.testing.assert_array_equal(got.copy_to_host(), x + y)


def test_three_operands_and_math(backend):
    n = int(rng.integers(500, 3000))
    a, c = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32) + 10
    np.testing.assert_allclose(discriminant(a, b, c), np.sqrt(b ** 2 - 4 * a * c), rtol=1e-6)
    compile_for_gpu(*discriminant.kernels)


@pytest.mark.parametrize("shapes", [((3, 1), (4,)), ((2, 5, 4), (4,)), ((6, 1, 3), (1, 7, 1)),
                                    ((1,), (9,)), ((5, 3), (5, 3))])
def test_broadcasting(backend, shapes):
    x, y = normal(shapes[0], np.float64), normal(shapes[1], np.float64)
    got = add(kj.to_device(x), kj.to_device(y))
    expected = x + y
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.copy_to_host(), expected)
    compile_for_gpu(*add.kernels)


def test_strided_and_fortran_operands(backend):
    base = normal((40, 30))
    t = base.T  # Fortran order
    np.testing.assert_array_equal(add(t, t), t + t)
    np.testing.assert_array_equal(add(t, np.ascontiguousarray(t)), t + t)
    strided = kj.to_device(base)[::3, 1::2]
    got = add(strided, np.float32(1.5))
    np.testing.assert_array_equal(got.copy_to_host(), base[::3, 1::2] + np.float32(1.5))


def test_scalars(backend):
    x = normal(777)
    got = add(x, 2.5)  # a Python float is weak: the float32 signature takes it
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x + np.float32(2.5))
    got = add(np.float64(2.5), x)  # a NumPy float64 is not: float64
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, 2.5 + x.astype(np.float64))
    value = add(np.float32(1.25), np.float32(0.5))
    assert value == np.float32(1.75) and value.dtype == np.float32
    assert add(np.array(3.0), np.array(4.5)) == 7.5


def test_out_device_and_host(backend):
    x, y = normal((64, 9)), normal((64, 9))
    out = poisoned((64, 9))
    assert add(x, kj.to_device(y), out=out) is out
    np.testing.assert_array_equal(out.copy_to_host(), x + y)
    host_out = np.full((64, 9), np.nan, np.float64)  # float32 results cast into float64
    assert add(x, y, out=host_out) is host_out
    np.testing.assert_array_equal(host_out, (x + y).astype(np.float64))
    wide = poisoned((64, 9), np.float64)
    add(kj.to_device(x), y, out=wide)
    np.testing.assert_array_equal(wide.copy_to_host(), (x + y).astype(np.float64))


def test_in_place(backend):
    x, y = normal((33, 17)), normal(17)
    d = kj.to_device(x)
    assert add(d, y, out=d) is d
    np.testing.assert_array_equal(d.copy_to_host(), x + y)


def test_strided_out(backend):
    x, y = normal((10, 12)), normal((10, 12))
    big = poisoned((20, 12))
    add(x, y, out=big[::2])
    got = big.copy_to_host()
    np.testing.assert_array_equal(got[::2], x + y)
    assert np.isnan(got[1::2]).all()


def test_stream(backend):
    stream = kj.Stream()
    x, y = normal(10000), normal(10000)
    d = add(kj.to_device(x), kj.to_device(y), stream=stream)
    host = d.copy_to_host(stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(host, x + y)
    np.testing.assert_array_equal(add(x, y, stream=stream), x + y)


class Foreign:
    """Someone else's array, seen only through __cuda_array_interface__ (device memory) or,
    on the cpu backend, whose memory is the host's, through DLPack."""

    def __init__(self, array):
        self.array = array
        if array.is_host_memory:
            self.__dlpack__, self.__dlpack_device__ = array.__dlpack__, array.__dlpack_device__
        else:
            self.__cuda_array_interface__ = array.__cuda_array_interface__


def test_foreign_operands(backend):
    x, y = normal(500), normal(500)
    got = add(Foreign(kj.to_device(x)), Foreign(kj.to_device(y)))
    assert isinstance(got, kj.DeviceArray)
    np.testing.assert_array_equal(got.copy_to_host(), x + y)
    out = poisoned(500)
    foreign_out = Foreign(out)
    assert add(x, y, out=foreign_out) is foreign_out
    np.testing.assert_array_equal(out.copy_to_host(), x + y)


def test_signature_choice(backend):
    # exact matches first (numba's rule), whatever their order
    f64 = normal(50, np.float64)
    assert add(f64, f64).dtype == np.float64
    # then the first signature every operand casts to safely
    i16 = rng.integers(-1000, 1000, 50).astype(np.int16)
    assert add(i16, i16).dtype == np.float32  # int16 -> float32 is safe
    i32 = rng.integers(-1000, 1000, 50).astype(np.int32)
    got = add(i32, i32)
    assert got.dtype == np.float64  # int32 -> float32 is not
    np.testing.assert_array_equal(got, (i32 + i32).astype(np.float64))


def test_integers_and_weak_integer_scalars(backend):
    a = rng.integers(-10 ** 6, 10 ** 6, 300).astype(np.int32)
    b = rng.integers(-10 ** 6, 10 ** 6, 300).astype(np.int32)
    got = scaled_difference(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, 3 * a - b)
    assert scaled_difference(a, 7).dtype == np.int32
    assert scaled_difference(a, 2 ** 40).dtype == np.int64  # too big for int32
    compile_for_gpu(*scaled_difference.kernels)


def test_empty(backend):
    got = add(np.zeros((0, 3), np.float32), np.ones(3, np.float32))
    assert got.shape == (0, 3) and got.dtype == np.float32


def test_reduce_method(backend):
    x = normal(int(rng.integers(1000, 9000)), np.float64)
    np.testing.assert_allclose(add.reduce(x), x.sum(), rtol=1e-9)
    with pytest.raises(ValueError, match="zero-size array to reduction operation add"):
        add.reduce(np.zeros(0))
    with pytest.raises(TypeError, match="discriminant.reduce needs a binary ufunc"):
        discriminant.reduce(x)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: add(x), TypeError, r"add\(\) takes 2 arguments \(a, b\), got 1"),
    (lambda x: add(x, x.astype(np.complex64)), TypeError,
     r"add\(\): no signature takes \(float32, complex64\) without an unsafe cast"),
    (lambda x: add(x, "one"), TypeError, r"argument 2 \(b\): expected an array or a number"),
    (lambda x: add(x, np.ones(3, np.float32)), ValueError,
     r"operands could not be broadcast together with shapes \(8,\) \(3,\)"),
    (lambda x: add(x, 1j), TypeError,
     r"add\(\): no signature takes \(float32, complex128\) without an unsafe cast"),
    (lambda x: scaled_difference(x, 2), TypeError,
     r"no signature takes \(float32, int\) without an unsafe cast; the signatures are "
     r"int32\(int32, int32\); int64\(int64, int64\)"),
    (lambda x: add(x, x, out=kj.device_array(9, np.float32)), ValueError,
     r"out has shape \(9,\), the operands broadcast to \(8,\)"),
    (lambda x: add(x, x, out=kj.device_array(8, np.int32)), TypeError,
     r"out has dtype int32; the result, float32, does not cast to it"),
])
def test_bad_calls_are_named(backend, call, error, message):
    with pytest.raises(error, match=message):
        call(normal(8))


def test_bad_decorations():
    with pytest.raises(ValueError, match="target must be 'cuda', got 'cpu'"):
        kj.vectorize(["float32(float32)"], target="cpu")
    with pytest.raises(TypeError, match="needs signatures"):
        kj.vectorize(lambda a: a)
    with pytest.raises(TypeError, match=re.escape("signature 'float32(float32)' has 1 "
                                                  "arguments, the function takes 2")):
        kj.vectorize(["float32(float32)"])(add.py_func)
    with pytest.raises(TypeError, match=r"must take and return scalars"):
        kj.vectorize(["float32(float32[:], float32)"])(add.py_func)
    with pytest.raises(TypeError, match="bad signature 'float33"):
        kj.vectorize(["float33(float32, float32)"])(add.py_func)


def uses_a_list(a, b):
    return a + [b]


def test_a_function_that_cannot_compile_fails_at_decoration_on_its_line():
    with pytest.raises(kj.CompileError) as info:
        kj.vectorize(["float32(float32, float32)"])(uses_a_list)
    assert_located(info.value, uses_a_list, "[b]")
