"""DeviceArray on the mock backend (host memory): copies, views, CAI and DLPack, freeing."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import kaiojit.runtime as rt

RNG = np.random.default_rng(99)


def test_round_trip_and_metadata(mock):
    host = RNG.standard_normal((5, 7)).astype(np.float32)
    a = rt.to_device(host)
    assert (a.shape, a.dtype, a.size, a.nbytes, a.strides, a.ndim, len(a)) == (
        (5, 7), np.float32, 35, 140, (28, 4), 2, 5)
    out = np.full_like(host, np.nan)
    assert a.copy_to_host(out) is out
    assert np.array_equal(out, host)
    assert np.array_equal(a.copy_to_host(stream=rt.Stream()), host)


def test_views_index_like_numpy(mock):
    host = RNG.integers(-1000, 1000, (6, 9)).astype(np.int64)
    a = rt.to_device(host)
    for index in [(slice(1, 5), slice(None, None, 2)), (slice(None, None, -1),), (2,),
                  (slice(None), 3), (slice(4, 1, -2), slice(8, None, -3))]:
        assert np.array_equal(a[index].copy_to_host(), host[index]), index
    assert a[2, 3] == host[2, 3]
    a[1:3, ::4] = np.zeros((2, 3), np.int64)
    host[1:3, ::4] = 0
    a[0, 0] = 5
    host[0, 0] = 5
    assert np.array_equal(a.copy_to_host(), host)
    with pytest.raises(IndexError, match=r"index 6 is out of bounds for axis 0 with size 6"):
        a[6]


def test_reshape_takes_one_minus_one_as_numpy_does(mock):
    rows = int(np.random.default_rng().integers(2, 9))
    host = np.random.default_rng().standard_normal((rows, 6)).astype(np.float32)
    a = rt.to_device(host)
    for shape in [(-1,), (3, -1), (-1, 2, 3), (np.int64(-1),)]:
        assert np.array_equal(a.reshape(*shape).copy_to_host(), host.reshape(*shape)), shape
    assert a.reshape((2, -1)).shape == host.reshape((2, -1)).shape
    with pytest.raises(ValueError, match=r"only one extent can be -1"):
        a.reshape(-1, -1)
    with pytest.raises(ValueError, match=rf"cannot reshape an array of size {rows * 6} into "
                                         r"\(11, -1\)"):
        a.reshape(11, -1)  # no multiple of 11 is 6 * rows


def test_fortran_arrays_and_device_to_device(mock):
    host = np.asfortranarray(RNG.standard_normal((4, 3)))
    a = rt.to_device(host)
    assert str(rt.typeof(a)) == "float64[::1, :, align=16]"
    b = rt.device_array_like(a)
    b.copy_to_device(a)
    assert np.array_equal(b.copy_to_host(), host)


def test_cuda_array_interface_export_and_import(mock):
    host = RNG.standard_normal((3, 8)).astype(np.float32)
    a = rt.to_device(host)
    cai = a.__cuda_array_interface__
    assert cai == {"shape": (3, 8), "typestr": "<f4", "data": (a.ptr, False), "strides": None,
                   "version": 3, "stream": None}
    view = a[:, 1::2]
    assert view.__cuda_array_interface__["strides"] == (32, 8)
    again = rt.as_device_array(view)
    assert again is view
    holder = type("Holder", (), {"__cuda_array_interface__": view.__cuda_array_interface__})()
    wrapped = rt.as_device_array(holder)
    assert wrapped.ptr == view.ptr and wrapped.strides == (32, 8)
    assert np.array_equal(wrapped.copy_to_host(), host[:, 1::2])


def test_dlpack_export_is_zero_copy(mock):
    host = RNG.standard_normal((4, 5))
    a = rt.to_device(host)
    assert a.__dlpack_device__() == (1, 0)  # the mock's memory is host memory
    seen = np.from_dlpack(a[1:, ::2])
    assert np.array_equal(seen, host[1:, ::2])
    assert seen.__array_interface__["data"][0] == a.ptr + 40
    del seen
    gc.collect()
    from kaiojit.runtime import dlpack

    assert dlpack._exported == {}


def test_unconsumed_capsule_frees_its_export(mock):
    from kaiojit.runtime import dlpack

    a = rt.to_device(np.arange(4.0))
    capsule = a.__dlpack__()
    assert len(dlpack._exported) == 1
    del capsule
    gc.collect()
    assert dlpack._exported == {}


def test_dlpack_import_is_zero_copy(mock):
    host = RNG.standard_normal((3, 4)).astype(np.float32)[:, ::2]
    view = rt.as_device_array(host)  # NumPy speaks DLPack for the CPU; the mock takes it
    assert view.ptr == host.ctypes.data
    assert view.strides == host.strides
    host[0, 0] = 42
    assert view.copy_to_host()[0, 0] == 42


def test_memory_is_freed_when_collected(mock):
    before = mock.live_allocations
    a = rt.device_array((100,), np.float32)
    view = a[10:20]
    del a
    gc.collect()
    assert mock.live_allocations == before + 1  # the view keeps it alive
    del view
    gc.collect()
    assert mock.live_allocations == before


def test_to_device_takes_non_contiguous_host_arrays(mock):
    host = RNG.standard_normal((6, 6))[::2, 1::2]
    assert np.array_equal(rt.to_device(host).copy_to_host(), host)


def test_as_device_array_rejects_other_objects(mock):
    with pytest.raises(TypeError, match=r"needs an object with __cuda_array_interface__ or "
                                        r"__dlpack__, got list"):
        rt.as_device_array([1, 2])


@pytest.mark.parametrize("shape", [(2**32, 2**32), (2**31, 2**31, 4), (2**62, 3), (2**64,)])
def test_a_size_past_int64_is_refused_before_allocating(kj_backend, shape):
    """The size is a Python int: (2**32, 2**32) float64 is 2**67 bytes, not a wrapped 16."""
    backend = rt.get_backend()
    live = backend.live_allocations
    with pytest.raises(ValueError, match=r"(would take \d+ bytes, more than a kernel can "
                                         r"address|has an extent past int64)"):
        rt.device_array(shape, np.float64)
    assert backend.live_allocations == live


def test_a_size_the_backend_cannot_allocate_is_a_memory_error(kj_backend):
    backend = rt.get_backend()
    live = backend.live_allocations
    with pytest.raises(MemoryError, match=r"^cannot allocate 4611686018427387904 bytes for an "
                                          r"array of shape \(1073741824, 2147483648\) and "
                                          r"dtype float16 on the (cpu|cuda) backend \("):
        rt.device_array((2**30, 2**31), np.float16)  # 4 EiB
    assert backend.live_allocations == live


def test_sizes_are_exact_python_ints(kj_backend):
    n = int(RNG.integers(3, 40))
    a = rt.device_array((n, 0, 2**40), np.float32)
    assert (a.size, a.nbytes, a.shape) == (0, 0, (n, 0, 2**40))
    b = rt.device_array((n, 5), np.complex128)
    assert (b.size, b.nbytes) == (5 * n, 80 * n)
    assert b.reshape(5, n).size == 5 * n


def test_cpu_arrays_are_host_memory_to_numpy_and_torch(kj_backend):
    """The cpu backend's arrays speak the host's interfaces (NumPy's array interface, DLPack
    on the CPU), never __cuda_array_interface__ with a host pointer (torch would start CUDA)."""
    torch = pytest.importorskip("torch")
    if kj_backend != "cpu":
        pytest.skip("the cpu backend's memory")
    host = RNG.standard_normal((5, 6))
    a = rt.to_device(host)
    assert not hasattr(a, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="host memory: it has __array_interface__ and "
                                             "__dlpack__"):
        a.__cuda_array_interface__  # noqa: B018
    view = a[1:, ::2]
    for seen, expected in ((np.asarray(a), host), (np.asarray(view), host[1:, ::2]),
                           (np.from_dlpack(view), host[1:, ::2])):
        assert np.array_equal(seen, expected)
    assert np.asarray(view).__array_interface__["data"][0] == a.ptr + 48 + 0
    for t, expected in ((torch.as_tensor(a), host), (torch.from_dlpack(view), host[1:, ::2]),
                        (torch.as_tensor(view), host[1:, ::2])):
        assert t.device.type == "cpu"
        assert np.array_equal(t.numpy(), expected)
    shared = torch.as_tensor(a)
    shared[2, 3] = 7.5  # one memory: a write through torch is the array's
    assert a.copy_to_host()[2, 3] == 7.5 and np.asarray(a)[2, 3] == 7.5


def test_device_memory_has_no_host_array_interface(mock):
    a = rt.to_device(RNG.standard_normal(4))
    assert not hasattr(a, "__array_interface__")
    assert a.__cuda_array_interface__["data"] == (a.ptr, False)
