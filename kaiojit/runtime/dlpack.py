"""DLPack capsules, read and written through ctypes.

Export: :func:`to_dlpack_capsule` builds a ``DLManagedTensor`` that keeps the exported array
(and the shape/strides storage) alive until the consumer calls the deleter, or until the
capsule dies unconsumed. Import: :func:`consume` reads and checks a producer's tensor, hands
it to the caller's ``accept`` (which makes the view), and only then renames the capsule
``used_dltensor`` (the protocol's "consumed" mark): a tensor refused by either check is never
consumed, so the capsule's own destructor hands it back to its producer. Whoever views the
tensor calls :func:`release` when the view dies, which calls the producer's deleter. Making a
DeviceArray of an imported tensor is :func:`kaiojit.runtime.interop.from_dlpack`'s job.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from kaiojit import types as kt

K_DL_CPU, K_DL_CUDA, K_DL_CUDA_HOST, K_DL_CUDA_MANAGED = 1, 2, 3, 13


def _dl_code(dtype: np.dtype) -> int | None:
    """DLPack's type code of a NumPy dtype: its kaiojit type's (``ScalarType.dlpack_code``)."""
    try:
        t = kt.from_dtype(dtype)
    except TypeError:
        return None
    return t.dlpack_code if isinstance(t, kt.ScalarType) else None


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
        ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

_NAME = ctypes.create_string_buffer(b"dltensor")
_USED_NAME = ctypes.create_string_buffer(b"used_dltensor")
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))

# Exported tensors alive on the consumer's side, by the address of their DLManagedTensor.
_exported: dict[int, Any] = {}
_exported_lock = threading.Lock()


class _Export:
    """Everything one exported DLManagedTensor points into."""

    __slots__ = ("managed", "shape", "strides", "array")

    def __init__(self, array: Any, device_type: int):
        ndim = array.ndim
        itemsize = array.dtype.itemsize
        self.array = array
        self.shape = (ctypes.c_int64 * max(ndim, 1))(*array.shape)
        self.strides = (ctypes.c_int64 * max(ndim, 1))(*(s // itemsize for s in array.strides))
        m = DLManagedTensor()
        t = m.dl_tensor
        t.data = array.ptr or None
        t.device = DLDevice(device_type, array.device_id)
        t.ndim = ndim
        t.dtype = DLDataType(_dl_code(array.dtype), itemsize * 8, 1)
        t.shape = self.shape
        t.strides = self.strides
        t.byte_offset = 0
        m.deleter = _deleter
        self.managed = m


def _delete_export(address: int) -> None:
    with _exported_lock:
        _exported.pop(address, None)


@_DELETER
def _deleter(managed: Any) -> None:
    _delete_export(ctypes.cast(managed, ctypes.c_void_p).value or 0)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule: int) -> None:
    # Only a capsule nobody consumed still carries the name "dltensor".
    if _capsule_is_valid_raw(capsule, ctypes.addressof(_NAME)):
        address = _capsule_pointer_raw(capsule, ctypes.addressof(_NAME))
        if address:
            _delete_export(address)


def to_dlpack_capsule(array: Any, device_type: int) -> Any:
    """A ``dltensor`` capsule viewing ``array`` (a DeviceArray) on a DLPack device type."""
    if _dl_code(array.dtype) is None:
        raise BufferError(f"DLPack has no code for dtype {array.dtype}")
    export = _Export(array, device_type)
    address = ctypes.addressof(export.managed)
    with _exported_lock:
        _exported[address] = export
    return _capsule_new(address, ctypes.addressof(_NAME),
                        ctypes.cast(_capsule_destructor, ctypes.c_void_p))


@dataclass(frozen=True, slots=True)
class ImportedTensor:
    """A producer's tensor, read from its capsule: strides in bytes (None: C-contiguous);
    ``address`` is its DLManagedTensor, for :func:`release`."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: np.dtype
    device_id: int
    address: int


def release(address: int) -> None:
    """Give an imported tensor back to its producer (call its deleter)."""
    managed = DLManagedTensor.from_address(address)
    if managed.deleter:
        managed.deleter(ctypes.cast(address, ctypes.POINTER(DLManagedTensor)))


View = TypeVar("View")


def _as_is(t: ImportedTensor) -> Any:
    return t


def consume(obj: Any, device_types: Collection[int] | None = None,
            accept: Callable[[ImportedTensor], View] = _as_is) -> View:
    """``accept(tensor)`` of ``obj.__dlpack__()``'s tensor (by default the
    :class:`ImportedTensor` itself), which is then consumed: the caller must :func:`release`
    it when the view dies. The tensor is checked first (its dtype, device type among
    ``device_types`` where given, shape, data pointer); whatever refuses it, a check here or
    ``accept`` raising, leaves the capsule unconsumed, so its producer gets it back."""
    try:
        capsule = obj.__dlpack__(stream=None)
    except TypeError:
        capsule = obj.__dlpack__()
    if not _capsule_is_valid(capsule, ctypes.addressof(_NAME)):
        raise TypeError("__dlpack__ did not return an unconsumed 'dltensor' capsule")
    address = _capsule_pointer(capsule, ctypes.addressof(_NAME))
    view = accept(_read(DLManagedTensor.from_address(address).dl_tensor, device_types, address))
    _capsule_set_name(capsule, ctypes.addressof(_USED_NAME))
    return view


def _read(t: DLTensor, device_types: Collection[int] | None, address: int) -> ImportedTensor:
    """The checked facts of a producer's DLTensor (``TypeError``/``ValueError`` naming what
    kaiojit cannot take)."""
    dtype = _dtype_of(t.dtype)
    if device_types is not None and int(t.device.device_type) not in device_types:
        raise TypeError(f"a DLPack tensor on device type {t.device.device_type}; kaiojit takes "
                        f"device type {' or '.join(str(d) for d in sorted(device_types))} here")
    if t.ndim < 0 or (t.ndim and not t.shape):
        raise ValueError(f"a DLPack tensor of {t.ndim} dimensions without a shape")
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    if any(n < 0 for n in shape):
        raise ValueError(f"a DLPack tensor of shape {shape}: extents must be 0 or more")
    if not t.data and math.prod(shape):
        raise ValueError(f"a DLPack tensor of shape {shape} with a NULL data pointer")
    strides = (tuple(int(t.strides[i]) * dtype.itemsize for i in range(t.ndim))
               if t.strides else None)
    ptr = (t.data or 0) + t.byte_offset
    return ImportedTensor(ptr, shape, strides, dtype, int(t.device.device_id), address)


def _dtype_of(dl: DLDataType) -> np.dtype:
    """NumPy's dtype of a DLPack dtype, through the kaiojit type that has its code and bits
    (``ScalarType.dlpack_code``)."""
    scalar = kt.from_dlpack_code(dl.code, dl.bits) if dl.lanes == 1 else None
    if scalar is None:
        kind = _CODE_NAMES.get(dl.code)
        named = f" ({kind}{dl.bits})" if kind else ""
        raise TypeError(f"DLPack dtype (code {dl.code}, {dl.bits} bits, {dl.lanes} lanes) has "
                        f"no kaiojit type{named}")
    return scalar.np_dtype


# the DLPack type codes' names, for a message about a dtype kaiojit has no type for
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}