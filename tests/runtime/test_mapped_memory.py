"""numba's ``cuda.mapped_array`` and ``cuda.managed_array`` on a GPU backend: memory host and
GPU address at one pointer (mapped page-locked host memory, CUDA managed memory), exported
through ``__cuda_array_interface__`` and taken by kernels without a copy, as numba's are
(numba's test_cuda_array_interface ``test_produce_*`` and test_warning ``test_nowarn_on_*``
failed on the H100 only: kaiojit's were pageable host memory there). The mock backend stands
for the GPU; the ``gpu`` test runs a kernel on the real memory."""

from __future__ import annotations

import ctypes
import gc
import struct
import warnings

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda

rng = np.random.default_rng()


def add_one(r, x):
    i = cuda.grid(1)
    if i < r.size:
        r[i] = x[i] + 1


@pytest.mark.parametrize("make, managed", [(cuda.mapped_array, False),
                                           (cuda.managed_array, True)])
def test_the_array_lies_in_memory_the_gpu_addresses(mock, make, managed):
    n = int(rng.integers(2, 50))
    s = cuda.stream()
    plain, on_stream = make(n, np.float32), make((n, 3), np.int16, stream=s)
    for a in (plain, on_stream):
        buffer, was_managed = mock.host_visible[a.ctypes.data]  # the backend's, not NumPy's
        assert was_managed is managed and ctypes.sizeof(buffer) >= a.nbytes
        assert a.__cuda_array_interface__["data"] == (a.ctypes.data, False)
    assert plain.__cuda_array_interface__["stream"] is None
    assert on_stream.__cuda_array_interface__["stream"] == s.handle
    assert on_stream.shape == (n, 3) and on_stream.dtype == np.int16
    view = plain[1:]  # a view of the same memory is still the GPU's
    assert view.__cuda_array_interface__["data"][0] == plain.ctypes.data + 4
    copy = plain.copy()  # a copy is pageable host memory: no interface, as NumPy's arrays
    with pytest.raises(AttributeError, match="a copy in pageable host memory"):
        copy.__cuda_array_interface__  # noqa: B018
    del plain, on_stream, view, copy, a
    gc.collect()
    assert mock.host_visible == {}  # freed with the last array over it


@pytest.mark.parametrize("make", [cuda.mapped_array, cuda.managed_array])
def test_a_kernel_takes_the_array_without_a_copy(mock, make):
    n = int(rng.integers(2, 50))
    r, x = make(n, np.float32), make(n, np.float32)
    x[:] = rng.standard_normal(n)
    kernel = cuda.jit(add_one)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Host array used in CUDA kernel" warning
        kernel[1, 64](r, x)
    (launch,) = mock.launches
    pointers = [struct.unpack("<Q", p[:8])[0] for p in launch.params if len(p) == 8]
    assert r.ctypes.data in pointers and x.ctypes.data in pointers  # the arrays' own memory


@pytest.mark.gpu
@pytest.mark.parametrize("make", [cuda.mapped_array, cuda.managed_array])
def test_a_kernel_writes_the_array_the_host_reads(cuda_backend, make):
    n = int(rng.integers(100, 1000))
    r, x = make(n, np.float32), make(n, np.float32)
    r[:] = np.nan
    x[:] = rng.standard_normal(n).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuda.jit(add_one)[(n + 127) // 128, 128](r, x)
    cuda.synchronize()
    np.testing.assert_array_equal(r, x + np.float32(1))


@pytest.fixture
def cuda_backend():
    previous = kj.set_backend("cuda")
    yield
    kj.set_backend(previous)
