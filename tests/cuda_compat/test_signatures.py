"""numba's signature forms on ``kaiojit.cuda.jit`` and numba's overload choice among eager
signatures (issue 28): a Python float runs the float64 one, a device function declared
``(int64, int64)`` converts float arguments."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.cuda import float32, float64, int32, int64, void

rng = np.random.default_rng()


@cuda.jit([void(float32[:], float32), void(float64[:], float64)])
def store_float32(out, x):
    out[0] = x


@cuda.jit([void(float64[:], float32), void(float64[:], float64)])
def store_either(out, x):
    out[0] = x


def test_signature_objects_and_tuples(kj_backend):
    assert str(void(float32[:], int32)) == "void(float32[:], int32)"
    assert str(int32(float32[:])) == "int32(float32[:])"
    assert float32.bitwidth == 32 and cuda.types.Array(float32, 2, "C").layout == "C"

    @cuda.jit((float32[:], float32))
    def add(a, x):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += x

    a = rng.standard_normal(37).astype(np.float32)
    d = cuda.to_device(a)
    x = float(rng.standard_normal())
    add[1, 64](d, x)
    np.testing.assert_array_equal(d.copy_to_host(), a + np.float32(x))
    assert add.signatures == [(float32[:], float32)]  # numba's shape: argument tuples
    assert list(add.inspect_asm()) == [(float32[:], float32)]
    assert ".entry" in add.inspect_asm((float32[:], float32))


def test_python_float_runs_the_float64_signature(kj_backend):
    x = 1.0 + float(rng.uniform(1e-12, 1e-10))  # not representable in float32
    out = cuda.to_device(np.full(1, np.nan))
    store_either[1, 1](out, x)
    assert out.copy_to_host()[0] == x  # through float32 it would round to 1.0


def test_exact_match_wins_over_the_first_declared(kj_backend):
    x = np.float64(rng.standard_normal())
    out = cuda.to_device(np.full(1, np.nan))
    store_float32[1, 1](out, x)
    assert out.copy_to_host()[0] == x


@cuda.jit(int64(int64, int64), device=True)
def floor_add(a, b):
    return a + b


@cuda.jit
def call_floor_add(out, x, y):
    out[0] = floor_add(x, y)


def test_device_function_declared_int64_converts_floats(kj_backend):
    x, y = rng.integers(1, 100, 2) + rng.uniform(0.6, 0.9, 2)  # fractions sum past 1
    out = cuda.to_device(np.full(1, -12345, np.int64))
    call_floor_add[1, 1](out, float(x), float(y))
    assert out.copy_to_host()[0] == int(x) + int(y)  # converted before the add, as numba


def test_jit_accepts_numba_options(kj_backend):
    @cuda.jit("void(int32[:])", lto=False, launch_bounds=(128,), inline="always",
              forceinline=True, cc=(9, 0), abi="numba", shared_memory_carveout=50)
    def fill(a):
        a[cuda.grid(1)] = 7

    d = cuda.to_device(np.full(4, -1, np.int32))
    fill[1, 4](d)
    np.testing.assert_array_equal(d.copy_to_host(), np.full(4, 7, np.int32))
    with pytest.raises(TypeError, match="unknown option"):
        cuda.jit(no_such_option=1)


def test_compile_ptx_returns_numba_shape():
    def axpy(out, a, x):
        out[0] = a * x[0]

    ptx, restype = cuda.compile_ptx(axpy, (float32[:], float32, float32[:]))
    assert ".entry" in ptx and restype == void


def test_numba_type_sets():
    """numba's ``types.signed_domain`` and friends: the sets test code iterates or tests."""
    t = cuda.types
    assert t.signed_domain == {t.int8, t.int16, t.int32, t.int64}
    assert t.unsigned_domain == {t.uint8, t.uint16, t.uint32, t.uint64}
    assert t.integer_domain == t.signed_domain | t.unsigned_domain
    assert t.real_domain == {t.float32, t.float64}
    assert t.complex_domain == {t.complex64, t.complex128}
    assert t.number_domain == t.integer_domain | t.real_domain | t.complex_domain
    assert t.longlong in t.signed_domain and t.Array(t.uint16, 1, "C").dtype in t.unsigned_domain
    assert t.float16 not in t.real_domain and t.bool_ not in t.integer_domain


def test_specialize_takes_types_and_refuses_twice():
    def store(x):
        x[0] = 1

    lazy = cuda.jit(store)
    f32 = lazy.specialize(float32[::1])
    assert lazy.specialize(float32[::1]) is f32 and len(lazy.specializations) == 1
    assert lazy.specialize(cuda.int32[::1]) is not f32 and len(lazy.specializations) == 2
    with pytest.raises(RuntimeError, match="Dispatcher already specialized"):
        f32.specialize(float32[::1])
    with pytest.raises(RuntimeError, match="Dispatcher already specialized"):
        cuda.jit("void(float32[::1])")(store).specialize(float32[::1])


def test_no_matching_definition_is_numbas_words():
    eager = cuda.jit(["void(float32[::1])", "void(float64[::1])"])(lambda x: None)
    with pytest.raises(TypeError, match=r"No matching definition for argument type\(s\) "
                                        r"\(complex128\[::1\]\)"):
        eager[1, 1](np.zeros(2, np.complex128))
