"""Foreign arrays are checked before kaiojit takes them: a DLPack tensor refused for any reason
is never consumed (its producer gets it back: its deleter runs once), and a
``__cuda_array_interface__`` dict is validated field by field, naming the field."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit.runtime import dlpack

RNG = np.random.default_rng()
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


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
        t.data = None if null_data else self.buffer.ctypes.data
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
     TypeError, r"^a DLPack tensor on device type 2; kaiojit takes device type 1 or 13 here$"),
])
def test_a_refused_dlpack_tensor_goes_back_to_its_producer(kj_backend, header, error, message):
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
