"""Stand-ins for PyTorch tensors and CuPy arrays over DeviceArrays: what kaiojit's interop and
fast launch read of them, so their launch paths run on the mock backend without either
library. Each attribute can be changed between launches (device, dtype, contiguity)."""

from __future__ import annotations

import ctypes

import numpy as np

from kaiojit.runtime.dlpack import DLTensor


class TorchDtype:
    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


TORCH_DTYPES = {np.dtype(np.float32): TorchDtype("float32"),
                np.dtype(np.float64): TorchDtype("float64"),
                np.dtype(np.complex64): TorchDtype("complex64")}


class Tensor:
    """What kaiojit reads of a ``torch.Tensor``: dtype, get_device, is_contiguous, data_ptr,
    shape and stride (element strides)."""

    def __init__(self, array, dtype: TorchDtype | None = None, device: int | None = None,
                 contiguous: bool = True):
        self.array = array
        self.dtype = TORCH_DTYPES[np.dtype(array.dtype)] if dtype is None else dtype
        self.device = array.device_id if device is None else device
        self.contiguous = contiguous
        self.conj = False  # the conjugate bit of a lazy x.conj() view

    def get_device(self) -> int:
        return self.device

    def is_contiguous(self) -> bool:
        return self.contiguous

    def data_ptr(self) -> int:
        return self.array.ptr

    def is_conj(self) -> bool:
        return self.conj

    def is_neg(self) -> bool:
        return False

    @property
    def shape(self) -> tuple:
        return self.array.shape

    def stride(self) -> tuple:
        return tuple(s // self.array.dtype.itemsize for s in self.array.strides)


Tensor.__module__ = "torch.fake"  # kaiojit's interop reads torch.Tensor by module and name


class Memory:
    def __init__(self, ptr: int, device_id: int):
        self.ptr, self.device_id = ptr, device_id


class ndarray:  # CuPy's class name, which kaiojit's interop reads
    """What kaiojit reads of a ``cupy.ndarray``: dtype, shape, strides (bytes), data.ptr,
    data.device_id and _c_contiguous."""

    def __init__(self, array, device: int | None = None):
        self.array = array
        self.dtype, self.shape, self.strides = np.dtype(array.dtype), array.shape, array.strides
        self.data = Memory(array.ptr, array.device_id if device is None else device)
        self._c_contiguous = array.strides == _c_strides(array.shape, array.dtype.itemsize)


    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


ndarray.__module__ = "cupy.fake"


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


# --- a tensor class that publishes DLPack's C exchange API (as torch.Tensor does) ---------------

_API_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")
_EXPORT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))
_DL_CODES = {"f": 2, "i": 0, "u": 1, "c": 5, "b": 6}


class _Api(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p), ("allocator", ctypes.c_void_p),
                ("managed_from", ctypes.c_void_p), ("managed_to", ctypes.c_void_p),
                ("dltensor_from", _EXPORT), ("current_stream", ctypes.c_void_p)]


@_EXPORT
def _export(obj: int, out) -> int:
    """``dltensor_from_py_object_no_sync`` of :class:`ExchangeTensor`."""
    t = ctypes.cast(obj, ctypes.py_object).value
    t.exports += 1
    if t.export_fails:
        return -1
    a, d = t.array, out.contents
    itemsize = a.dtype.itemsize
    t._shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
    t._strides = (ctypes.c_int64 * max(a.ndim, 1))(*(s // itemsize for s in a.strides))
    d.data, d.byte_offset = a.ptr, 0
    d.device.device_type, d.device.device_id = 2, t.device  # kDLCUDA
    d.ndim = a.ndim
    d.dtype.code, d.dtype.bits, d.dtype.lanes = _DL_CODES[a.dtype.kind], 8 * itemsize, 1
    d.shape = ctypes.cast(t._shape, ctypes.POINTER(ctypes.c_int64))
    d.strides = ctypes.cast(t._strides, ctypes.POINTER(ctypes.c_int64))
    return 0


_API = _Api(1, 3, None, None, None, None, _export, None)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)


class ExchangeTensor(Tensor):
    """A :class:`Tensor` whose class publishes ``__dlpack_c_exchange_api__``, with an export
    function that reads the DeviceArray behind it (its device as this object says). It
    counts its exports, and ``export_fails`` makes the export report an error."""

    __dlpack_c_exchange_api__ = _capsule_new(ctypes.addressof(_API), _API_NAME, None)

    def __init__(self, array, **kw):
        super().__init__(array, **kw)
        self.exports = 0
        self.export_fails = False


# --- a CuPy-like array class whose attributes are C getters (as CuPy's Cython class) ----------

# one C getter for every attribute: it calls the Python function its closure points to, so a
# function that raises makes it return NULL with the exception set, as a Cython getter does
_GETTER_IR = """
declare ptr @PyObject_CallFunctionObjArgs(ptr, ...)

define ptr @kaiojit_fake_getter(ptr %obj, ptr %closure) {
  %value = call ptr (ptr, ...) @PyObject_CallFunctionObjArgs(ptr %closure, ptr %obj, ptr null)
  ret ptr %value
}
"""
_getter_engine = None
_PY_TP_GETSET = 73  # typeslots.h
_TPFLAGS = (1 << 18) | (1 << 10)  # Py_TPFLAGS_DEFAULT (version tag) | Py_TPFLAGS_BASETYPE


class _GetSetDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("get", ctypes.c_void_p), ("set", ctypes.c_void_p),
                ("doc", ctypes.c_char_p), ("closure", ctypes.c_void_p)]


class _TypeSlot(ctypes.Structure):
    _fields_ = [("slot", ctypes.c_int), ("pfunc", ctypes.c_void_p)]


class _TypeSpec(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("basicsize", ctypes.c_int),
                ("itemsize", ctypes.c_int), ("flags", ctypes.c_uint),
                ("slots", ctypes.POINTER(_TypeSlot))]


_type_from_spec = ctypes.pythonapi.PyType_FromSpec
_type_from_spec.restype = ctypes.py_object
_type_from_spec.argtypes = (ctypes.POINTER(_TypeSpec),)
_kept: list = []  # what the C types point into: their specs, getter tables and callbacks


def c_getter_type(name: str, attributes: tuple[str, ...]) -> type:
    """A C type (``PyType_FromSpec``) whose ``attributes`` are getset descriptors; each C
    getter returns the instance's ``_values[attribute]``, and raises ``KeyError`` (the getter
    returns NULL) where that entry is missing."""
    global _getter_engine
    if _getter_engine is None:
        from kaiojit.runtime.native.cbuiltins import compile_ir

        _getter_engine = compile_ir(_GETTER_IR, ("PyObject_CallFunctionObjArgs",))
    getter = _getter_engine.get_function_address("kaiojit_fake_getter")
    table = (_GetSetDef * (len(attributes) + 1))()
    functions = [lambda obj, a=attribute: obj._values[a] for attribute in attributes]
    for entry, attribute, function in zip(table, attributes, functions, strict=False):
        entry.name, entry.get, entry.closure = attribute.encode(), getter, id(function)
    slots = (_TypeSlot * 2)((_PY_TP_GETSET, ctypes.addressof(table)), (0, None))
    spec = _TypeSpec(name.encode(), 0, 0, _TPFLAGS, slots)
    _kept.append((table, slots, spec, functions))
    return _type_from_spec(ctypes.byref(spec))


_CMemoryBase = c_getter_type("kaiojit_fake.MemoryPointer", ("ptr", "device_id"))
_CArrayBase = c_getter_type("kaiojit_fake.ndarray",
                            ("dtype", "_c_contiguous", "data", "shape", "ndim", "size"))


class CMemory(_CMemoryBase):
    def __init__(self, ptr, device_id: int):
        self._values = {"ptr": ptr, "device_id": device_id}


class CArray(_CArrayBase):
    """A CuPy-like array over a DeviceArray whose ``dtype``, ``_c_contiguous``, ``data`` (a
    :class:`CMemory`), ``shape``, ``ndim`` and ``size`` are C getters of its class, as in
    CuPy's Cython ``ndarray``: what :mod:`kaiojit.runtime.native.getset_reader` calls. ``set``
    changes what a getter returns."""

    def __init__(self, array, device: int | None = None):
        self.array = array
        self.strides = array.strides
        self._values = {
            "dtype": np.dtype(array.dtype), "shape": array.shape, "ndim": len(array.shape),
            "size": int(np.prod(array.shape)),
            "_c_contiguous": array.strides == _c_strides(array.shape, array.dtype.itemsize),
            "data": CMemory(array.ptr, array.device_id if device is None else device)}

    def set(self, attribute: str, value) -> None:
        if attribute in ("ptr", "device_id"):
            self._values["data"]._values[attribute] = value
        else:
            self._values[attribute] = value


CArray.__module__ = "cupy.fake"  # kaiojit's interop reads cupy.ndarray by module and name
CArray.__name__ = CArray.__qualname__ = "ndarray"
