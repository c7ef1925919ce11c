"""Cache-hinted loads and stores (``cuda.ldcg(a, i)``, ``cuda.stcs(a, (i, j), v)``: CUDA's
``__ldcg`` ...; issue 28): the values of a plain load or store on every backend, the PTX
cache operator on a GPU, numba's errors for bad indices and dtypes."""

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda, types

rng = np.random.default_rng()
LOADS = ("ca", "cg", "cs", "lu", "cv")
STORES = ("cg", "cs", "wb", "wt")
DTYPES = (np.int8, np.uint16, np.int32, np.uint64, np.float16, np.float32, np.float64)


def _values(shape, dtype):
    return (rng.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("hint", LOADS)
def test_hinted_loads_read_the_elements(kj_backend, hint):
    load = getattr(cuda, f"ld{hint}")

    @cuda.jit
    def copy(out, x):
        i, j = cuda.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            out[i, j] = load(x, (i, j))

    for dtype in DTYPES:
        x = _values((int(rng.integers(1, 9)), int(rng.integers(1, 9))), dtype)
        out = cuda.to_device(np.full(x.shape, 99, dtype))
        copy[(1, 1), (8, 8)](out, cuda.to_device(x))
        np.testing.assert_array_equal(out.copy_to_host(), x)
        t = kj.runtime.typeof(x)
        ptx = copy.inspect_asm(signature=(t, t))
        assert f"ld.global.{hint}.b{t.dtype.bitwidth}" in ptx


@pytest.mark.parametrize("hint", STORES)
def test_hinted_stores_write_the_elements(kj_backend, hint):
    store = getattr(cuda, f"st{hint}")

    @cuda.jit
    def copy(out, x):
        i = cuda.grid(1)
        if i < x.size:
            store(out, i, x[i])

    for dtype in DTYPES:
        x = _values(int(rng.integers(1, 40)), dtype)
        out = cuda.to_device(np.full(x.shape, 99, dtype))
        copy[1, 64](out, cuda.to_device(x))
        np.testing.assert_array_equal(out.copy_to_host(), x)
        t = kj.runtime.typeof(x)
        assert f"st.global.{hint}.b{t.dtype.bitwidth}" in copy.inspect_asm(signature=(t, t))


def test_hints_through_a_pointer_compile_to_ptx():
    def move(src, dst, n):
        for i in range(n):
            cuda.stwb(dst, i, cuda.ldcs(src, i))

    sig = (types.CPointer(types.float32), types.CPointer(types.float32), types.intp)
    ptx, _ = cuda.compile_ptx(move, sig)
    assert "ld.global.cs.b32" in ptx and "st.global.wb.b32" in ptx


def bad_float_index(x):
    cuda.ldcs(x, 1.0)


def bad_index_count(x):
    cuda.ldcs(x, (1, 2))


def bad_scalar_index_2d(x):
    cuda.ldcg(x, 1)


def bad_complex(x):
    x[0] = cuda.ldcs(x, 0)


@pytest.mark.parametrize("fn, sig, words", [
    (bad_float_index, "void(float32[::1])", r":71:18: float64 is not a valid index"),
    (bad_index_count, "void(float32[::1])", r":75:18: Expected 1 indices, got 2"),
    (bad_scalar_index_2d, "void(float32[:, ::1])", r":79:18: Expected 2 indices, got a scalar"),
    (bad_complex, "void(complex64[::1])", r":83:22: ldcs requires array of integer or float"),
])
def test_numbas_errors_are_located(fn, sig, words):
    with pytest.raises(kj.TypingError, match=r"test_cache_hints\.py" + words):
        cuda.compile_ptx(fn, sig)
