"""Foreign arrays (kaiojit.runtime.interop) and layouts (kaiojit.runtime.layout), on the mock
backend, whose device memory is host memory."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit import types as kt
from kaiojit.runtime import dlpack, interop
from kaiojit.runtime.layout import array_type, contiguous_strides, layout_of
from kaiojit.runtime.module import Module
from kaiojit.runtime.tensormap import TensorMap

from .ptx_kernels import AXPY_PTX

RNG = np.random.default_rng()


class Producer:
    """A DLPack producer in front of a DeviceArray, counting its deleter's calls."""

    def __init__(self, array: rt.DeviceArray, device_type: int = 1):
        self.array = array
        self.device_type = device_type
        self.exported = 0

    def __dlpack__(self, stream=None):
        self.exported += 1
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.device_type, 0


def test_array_info_of_each_kind_of_array(mock):
    host = RNG.standard_normal((6, 10)).astype(np.float32)
    a = rt.to_device(host)
    view = a[1:, ::3]
    assert interop.array_info(a) == (a.ptr, (6, 10), None, kt.float32[:, ::1], 0)
    assert interop.array_info(view) == view.launch_info
    cai_class = type("CAI", (), {"__cuda_array_interface__": view.__cuda_array_interface__})
    assert interop.array_info(cai_class())[:4] == (view.ptr, (5, 4), (40, 12), kt.float32[:, :])
    on_instance = type("Bare", (), {})()
    on_instance.__cuda_array_interface__ = a.__cuda_array_interface__
    assert interop.array_extractor(type(on_instance)) is None
    assert interop.array_info(on_instance)[:4] == (a.ptr, (6, 10), None, kt.float32[:, ::1])
    assert interop.array_info(host) is None  # NumPy arrays are host memory: staged, not read
    assert interop.array_info([1.0, 2.0]) is None


def test_dlpack_view_releases_the_producer_when_collected(mock):
    host = RNG.integers(-99, 99, (4, 6)).astype(np.int16)
    producer = Producer(rt.to_device(host))
    view = interop.from_dlpack(producer)
    assert producer.exported == 1 and len(dlpack._exported) == 1
    assert view.ptr == producer.array.ptr and view.kaiojit_type == kt.int16[:, ::1]
    assert np.array_equal(view.copy_to_host(), host)
    del view
    gc.collect()
    assert dlpack._exported == {}  # the producer's deleter ran


def test_dlpack_on_another_device_type_is_refused_before_consuming(mock):
    producer = Producer(rt.to_device(RNG.standard_normal(8)), device_type=2)
    with pytest.raises(TypeError, match=r"^a DLPack tensor on device type 2; kaiojit's mock "
                                        r"backend takes device type 1$"):
        interop.as_device_array(producer)
    assert producer.exported == 0


def test_masked_cuda_array_interface_is_refused(mock):
    cai = {**rt.to_device(RNG.standard_normal(4)).__cuda_array_interface__, "mask": (1, False)}
    with pytest.raises(TypeError, match="^masked __cuda_array_interface__ arrays are not "):
        interop.cai_info(cai)


def test_pointer_takers_refuse_host_arrays(mock):
    host = RNG.standard_normal((16, 16)).astype(np.float32)
    with pytest.raises(TypeError, match=r"^TensorMap.tiled needs a device array, got ndarray$"):
        TensorMap.tiled(host, box=(8, 8))
    fn = Module(AXPY_PTX).get_function("axpy")
    with pytest.raises(TypeError, match=r"^argument 0 \(ptr\): a device pointer or a device "
                                        r"array, got ndarray$"):
        fn.arg_ptr(host)
    a = rt.to_device(host)
    assert fn.launcher().arg_ptr(a[2:]).values == [a.ptr + 2 * 64]


@pytest.mark.parametrize("order", ["C", "F"])
def test_contiguous_strides_are_numpys(order):
    for _ in range(20):
        shape = tuple(int(n) for n in RNG.integers(1, 7, RNG.integers(1, 5)))
        dtype = np.dtype(RNG.choice(["int8", "float16", "int32", "float64"]))
        expected = np.empty(shape, dtype, order=order).strides
        assert contiguous_strides(shape, dtype.itemsize, order) == expected, (shape, dtype)


def test_layout_follows_numpys_flags():
    base = RNG.standard_normal((6, 8, 4))
    for view in [base, base[::2], base[:, 3:4], base.T, np.asfortranarray(base), base[..., 0],
                 base[:, :, ::-1], np.asfortranarray(base)[:1], base[:0]]:
        flags = view.flags
        expected = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        assert layout_of(view.shape, view.strides, view.itemsize) == expected, view.strides


def test_array_types_are_interned():
    assert array_type(kt.float32, 2, "A") is array_type(kt.float32, 2, "A")
    assert array_type(kt.float32, 2, "A") == kt.float32[:, :]
