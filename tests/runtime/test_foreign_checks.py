"""Foreign arrays are checked before kaiojit takes them: a DLPack tensor refused for any reason
is never consumed (its producer gets it back: its deleter runs once), and a
``__cuda_array_interface__`` dict is validated field by field, naming the field."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import kaiojit.runtime as rt
import kaiojit as kj
from kaiojit.runtime import dlpack, interop

RNG = np.random.default_rng()
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
SWAP = {1: 2, 2: 1}  # kDLCPU <-> kDLCUDA: the device types of the cpu and the cuda backend


class CraftedProducer:
    """A DLPack producer of a tensor with any header over a buffer of random bytes. Its
    deleter counts its calls; its capsule's destructor calls it while the capsule is
    unconsumed, as the protocol asks of producers."""

    def __init__(self, code: int, bits: int, shape: tuple[int, ...], device_type: int = 1,
                 null_data: bool = False, claimed_device_type: int | None = None):
        self.buffer = RNG.integers(0, 256, 64 + 8 * int(np.prod(shape)), dtype=np.uint8)
        self.extents = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.managed = dlpack.DLManagedTensor()
        t = self.managed.dl_tensor
        data = self.buffer.ctypes.data
        if rt.get_backend().name == "cuda":  # the tensor's bytes on the GPU, named as CUDA's
            self.on_device = rt.to_device(self.buffer)
            data = self.on_device.ptr
            device_type = SWAP.get(device_type, device_type)
            claimed_device_type = SWAP.get(claimed_device_type, claimed_device_type)
        t.data = None if null_data else data
        t.device = dlpack.DLDevice(device_type, 0)
        t.ndim = len(shape)
        t.dtype = dlpack.DLDataType(code, bits, 1)
        t.shape = self.extents
        t.byte_offset = 0
        self.deleted = 0
        self.managed.deleter = self._deleter = dlpack._DELETER(self._delete)
        self._destructor = _DESTRUCTOR(self._capsule_dies)
        self.device_type = claimed_device_type or device_type

    def _delete(self, managed) -> None:
        self.deleted += 1

    def _capsule_dies(self, capsule: int) -> None:
        if dlpack._capsule_is_valid_raw(capsule, ctypes.addressof(dlpack._NAME)):
            self.managed.deleter(ctypes.pointer(self.managed))

    def __dlpack__(self, stream=None):
        return dlpack._capsule_new(ctypes.addressof(self.managed),
                                   ctypes.addressof(dlpack._NAME),
                                   ctypes.cast(self._destructor, ctypes.c_void_p))

    def __dlpack_device__(self):
        return self.device_type, 0


@pytest.mark.parametrize("header, error, message", [
    ({"code": 2, "bits": 128, "shape": (4,)}, TypeError, "float128"),  # NumPy has it, kaiojit not
    ({"code": 2, "bits": 12, "shape": (4,)}, TypeError, r"\(code 2, 12 bits, 1 lanes\) has no "),
    ({"code": 2, "bits": 32, "shape": (4, 2), "null_data": True}, ValueError,
     r"^a DLPack tensor of shape \(4, 2\) with a NULL data pointer$"),
    ({"code": 0, "bits": 32, "shape": (3, -1)}, ValueError, r"extents must be 0 or more"),
    ({"code": 2, "bits": 32, "shape": (4,), "device_type": 2, "claimed_device_type": 1},
     TypeError, r"^a DLPack tensor on device type {wrong}; kaiojit takes device type {right} or "
                r"13 here$"),
])
def test_a_refused_dlpack_tensor_goes_back_to_its_producer(kj_backend, header, error, message):
    right = 2 if kj_backend == "cuda" else 1
    message = message.replace("{wrong}", str(SWAP[right])).replace("{right}", str(right))
    producer = CraftedProducer(**header)
    with pytest.raises(error, match=message):
        rt.as_device_array(producer)
    gc.collect()
    assert producer.deleted == 1  # given back, once


def test_a_taken_dlpack_tensor_is_released_once_when_its_view_dies(kj_backend):
    producer = CraftedProducer(code=2, bits=32, shape=(4, 3))
    view = rt.as_device_array(producer)
    expected = producer.buffer[:48].view(np.float32).reshape(4, 3)
    assert np.array_equal(view.copy_to_host(), expected, equal_nan=True)
    gc.collect()
    assert producer.deleted == 0
    del view
    gc.collect()
    assert producer.deleted == 1


class CAI:
    """A foreign array speaking only __cuda_array_interface__, with whatever dict it is given."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


@kj.jit
def double_into(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = 2.0 * x[i]


def _good_cai(a: rt.DeviceArray) -> dict:
    return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ptr, False), "version": 3,
            "strides": None}


@pytest.mark.parametrize("change, message", [
    ({"shape": None}, r"__cuda_array_interface__\['shape'\] = None: takes a tuple of ints"),
    ({"shape": (8.0,)}, r"__cuda_array_interface__\['shape'\] = \(8.0,\): takes a tuple of "),
    ({"shape": (-8,)}, r"__cuda_array_interface__\['shape'\] = \(-8,\): extents must be 0 or "),
    ({"typestr": "<q9"}, r"__cuda_array_interface__\['typestr'\] = '<q9': "),
    ({"typestr": None}, r"__cuda_array_interface__\['typestr'\] = None: "),
    ({"data": 12345}, r"__cuda_array_interface__\['data'\] = 12345: takes a tuple \(pointer: "
                      r"int, read_only: bool\)"),
    ({"data": ("0x10", False)}, r"__cuda_array_interface__\['data'\] = \('0x10', False\)"),
    ({"data": (0, False)}, r"__cuda_array_interface__\['data'\] is a NULL pointer for an array "
                           r"of shape \(8,\)"),
    ({"data": (None, False)}, r"__cuda_array_interface__\['data'\] is a NULL pointer"),
    ({"strides": (8, 8)}, r"__cuda_array_interface__\['strides'\] = \(8, 8\) has 2 entries for "
                          r"a shape of 1 dimensions"),
])
def test_a_malformed_cuda_array_interface_names_the_field_and_parameter(kj_backend, change,
                                                                         message):
    """The cpu backend takes CAI objects over host memory; a NULL pointer used to segfault."""
    x = rt.to_device(RNG.standard_normal(8))
    out = rt.to_device(np.full(8, np.nan))
    cai = {**_good_cai(x), **change}
    with pytest.raises(TypeError, match=rf"parameter 'x': {message}"):
        double_into[1, 8](out, CAI(cai))
    assert np.isnan(out.copy_to_host()).all()


def test_a_missing_field_and_a_non_dict_are_named(kj_backend):
    x = rt.to_device(RNG.standard_normal(8))
    out = rt.to_device(np.full(8, np.nan))
    cai = _good_cai(x)
    del cai["typestr"]
    with pytest.raises(TypeError, match=r"^double_into\(\): parameter 'x': "
                                        r"__cuda_array_interface__ has no 'typestr'$"):
        double_into[1, 8](out, CAI(cai))
    with pytest.raises(TypeError, match=r"parameter 'x': __cuda_array_interface__ is a list, "
                                        r"not a dict"):
        double_into[1, 8](out, CAI([x.ptr]))


def test_a_well_formed_cuda_array_interface_still_launches(kj_backend):
    host = RNG.standard_normal(8)
    x = rt.to_device(host)
    out = rt.to_device(np.full(8, np.nan))
    double_into[1, 8](out, CAI({**_good_cai(x), "data": [x.ptr, False], "shape": [8]}))
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * host)
    empty = {**_good_cai(x), "shape": (0,), "data": (0, False)}  # no elements: NULL is fine
    assert interop.cai_info(empty)[:2] == (0, (0,))


def test_a_read_only_cuda_array_interface_is_refused_where_the_kernel_writes(kj_backend):
    """Which parameters a kernel writes comes from the compiled kernel: a read-only array is
    fine to read, an error (before the launch) to write."""
    host = RNG.standard_normal(8)
    x = rt.to_device(host)
    out = rt.to_device(np.full(8, np.nan))
    read_only_x = CAI({**_good_cai(x), "data": (x.ptr, True)})
    double_into[1, 8](out, read_only_x)
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * host)
    target = rt.to_device(np.full(8, np.nan))
    with pytest.raises(ValueError, match=r"^parameter 'out': the kernel writes this array, and "
                                         r"its __cuda_array_interface__ marks it read-only "
                                         r"\(data\[1\] is True\)$"):
        double_into[1, 8](CAI({**_good_cai(target), "data": (target.ptr, True)}), x)
    assert np.isnan(target.copy_to_host()).all()
    assert double_into.compile(double_into.signatures[-1]).written_arrays == {"out"}
