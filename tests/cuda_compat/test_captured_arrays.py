"""Device arrays a kernel reads from its globals or closure (numba's capture, issue 28): the
array's address and extents are compiled in, its memory lives as long as the code, and a
function that captures one is never written to the disk cache (its address is this
process's)."""

import gc

import numpy as np

import kaiojit as kj
from kaiojit import cuda
from kaiojit.frontend.deps import fingerprint

rng = np.random.default_rng()


class OnlyInterface:
    """A foreign array: nothing but another array's ``__cuda_array_interface__``."""

    def __init__(self, arr):
        self.arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


def test_kernels_and_device_functions_read_and_write_captured_arrays(kj_backend):
    rows, cols = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    host = rng.standard_normal((rows, 2 * cols)).astype(np.float32)
    table = cuda.to_device(host)[:, ::2]  # strided: its strides are compiled in too
    counts = rng.integers(1, 100, rows).astype(np.int64)
    foreign = OnlyInterface(cuda.to_device(counts))
    marks = OnlyInterface(cuda.to_device(np.full((rows, cols), -1, np.int64)))

    @cuda.jit(device=True)
    def cell(i, j):
        return table[i, j] * foreign[i]

    @cuda.jit
    def scale(out):
        i, j = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            out[i, j] = cell(i, j)
            marks[i, j] = i * out.shape[1] + j  # writes reach the captured memory

    out = cuda.to_device(np.full((rows, cols), np.nan, np.float32))
    scale[(1, 1), (8, 8)](out)
    np.testing.assert_allclose(out.copy_to_host(), host[:, ::2] * counts[:, None], rtol=1e-6)
    np.testing.assert_array_equal(marks.arr.copy_to_host(),
                                  np.arange(rows * cols).reshape(rows, cols))


def _kernel_over_a_fresh_array(values):
    captured = kj.to_device(values)

    @kj.jit
    def copy(out):
        i = kj.grid(1)
        if i < out.size:
            out[i] = captured[i]
    return copy


def test_the_captured_memory_lives_as_long_as_the_compiled_code(kj_backend):
    values = rng.standard_normal(int(rng.integers(4, 40)))
    copy = _kernel_over_a_fresh_array(values)
    out = kj.to_device(np.full(values.size, np.nan))
    copy[1, 64](out)  # compiles: the array is held from here on
    gc.collect()
    junk = [kj.to_device(rng.standard_normal(values.size)) for _ in range(8)]  # reuse freed memory
    out2 = kj.to_device(np.full(values.size, np.nan))
    copy[1, 64](out2)
    np.testing.assert_array_equal(out.copy_to_host(), values)
    np.testing.assert_array_equal(out2.copy_to_host(), values)
    assert len(junk) == 8


def test_a_zero_dimensional_captured_array(kj_backend):
    value = np.array(rng.standard_normal(), np.float32)
    scalar = cuda.to_device(value)

    @cuda.jit
    def twice(out):
        out[()] = scalar[()] * 2

    out = cuda.to_device(np.array(np.nan, np.float32))
    twice[1, 1](out)
    assert out.copy_to_host()[()] == value * 2


def test_capturing_compiles_to_ptx_with_the_address_and_is_not_disk_cacheable():
    arr = kj.to_device(rng.standard_normal(int(rng.integers(3, 30))).astype(np.float32))

    def read(out):
        i = kj.grid(1)
        if i < arr.size:
            out[i] = arr[i]

    ptx = kj.compile_ptx(read, "void(float32[:])")
    assert str(arr.ptr) in ptx  # the address is a constant of the code
    assert fingerprint(arr) is None and fingerprint(OnlyInterface(cuda.to_device(
        np.ones(2)))) is None
