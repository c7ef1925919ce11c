"""Reading foreign arrays at launch through DLPack's C exchange API, in native code.

A class may publish ``__dlpack_c_exchange_api__``: a capsule named ``dlpack_exchange_api``
around a ``DLPackExchangeAPI`` (dlpack.h, version 1), a table of C functions. One of them,
``dltensor_from_py_object_no_sync(obj, &dltensor)``, fills a caller's ``DLTensor`` with the
array's pointer, device, dtype, shape and strides, allocating nothing. PyTorch publishes it on
``torch.Tensor`` (2.11 has it; a class without it keeps the fast form's attribute reads). It
is meant for exactly this: a library launching its own kernel on a framework's arrays.

Read through the tensor's Python attributes, the facts a launch needs of one ``torch.Tensor``
cost five calls into PyTorch's bindings, ~0.4-0.5 µs. The launch fast form
(:mod:`kaiojit.runtime.native.fastlaunch`) instead calls one builtin ``read(a0, a1, ...)`` made here
per fast form, whose C function, for each array:

1. tests the array's class (``PyObject_Type``) against the one the fast form was built for
   (the API is only valid for the class it was found on);
2. calls the class's ``dltensor_from_py_object_no_sync``; a failure (an exception set) is
   cleared and counts as a miss;
3. tests the device (kind and ordinal), rank and dtype against the specialization's;
4. tests C-contiguity from the shape and strides (extent-1 dimensions may have any stride, as
   ``Tensor.is_contiguous()`` says);
5. tests the alignment the kernel was specialized on (the pointer, and a row's bytes where
   there are rows, against 16 bytes: aligned, or not);
6. writes the pointer and the extents into the fast form's parameter buffer.

It returns True when every array passed, False otherwise; the fast form then launches, or
takes the general path (which types and checks the arrays itself). A miss can leave some
arrays written into the buffer: the buffer is the fast form's own, rewritten every launch.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from kaiojit import types as kt
from kaiojit.runtime.dlpack import (
    K_DL_CUDA,
    DLTensor,
    _capsule_is_valid,
    _capsule_pointer,
)
from kaiojit.runtime.native import guard
from kaiojit.runtime.native.reader import Reader, alignment_test, entry_fields, spec_fields

API_CAPSULE_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")
API_MAJOR = 1  # the DLPackExchangeAPI layout read here

# one argument (the prologue, shared with the other reader, is in reader.py)
_BODY = """
read:
  %fn.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.export)
  %fn = load ptr, ptr %fn.at
  %rc = call i32 %fn(ptr %obj, ptr %dl)
  %rc.ok = icmp eq i32 %rc, 0
  br i1 %rc.ok, label %facts, label %error
facts:
  %dl.device = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.device)
  %dl.devtype.at = getelementptr %DLDevice, ptr %dl.device, i32 0, i32 $(DLDevice.device_type)
  %dl.devtype = load i32, ptr %dl.devtype.at
  %dl.devid.at = getelementptr %DLDevice, ptr %dl.device, i32 0, i32 $(DLDevice.device_id)
  %dl.devid = load i32, ptr %dl.devid.at
  %dl.ndim.at = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.ndim)
  %dl.ndim = load i32, ptr %dl.ndim.at
  %dl.dtype.at = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.dtype)
  %dl.dtype = load i32, ptr %dl.dtype.at  ; code, bits and lanes as one word (dtype_word)
  %want.ndim.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.ndim)
  %want.ndim = load i32, ptr %want.ndim.at
  %want.dtype.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.dtype)
  %want.dtype = load i32, ptr %want.dtype.at
  %devtype.ok = icmp eq i32 %dl.devtype, %spec.device_type
  %devid.ok = icmp eq i32 %dl.devid, %spec.device_id
  %ndim.ok = icmp eq i32 %dl.ndim, %want.ndim
  %dtype.ok = icmp eq i32 %dl.dtype, %want.dtype
  %device.ok = and i1 %devtype.ok, %devid.ok
  %kind.ok = and i1 %ndim.ok, %dtype.ok
  %facts.ok = and i1 %device.ok, %kind.ok
  br i1 %facts.ok, label %layout, label %miss
layout:
  %shape.at = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.shape)
  %shape = load ptr, ptr %shape.at
  %strides.at = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.strides)
  %strides = load ptr, ptr %strides.at
  %ndim = sext i32 %dl.ndim to i64
  %has.strides = icmp ne ptr %strides, null
  br i1 %has.strides, label %stride.loop, label %alignment
stride.loop:
  %k = phi i64 [ %ndim, %layout ], [ %k.less, %stride.fits ]
  %expected = phi i64 [ 1, %layout ], [ %expected.next, %stride.fits ]
  %strides.done = icmp eq i64 %k, 0
  br i1 %strides.done, label %alignment, label %stride.test
stride.test:
  %k.less = sub i64 %k, 1
  %extent.at = getelementptr i64, ptr %shape, i64 %k.less
  %extent = load i64, ptr %extent.at
  %stride.at = getelementptr i64, ptr %strides, i64 %k.less
  %stride = load i64, ptr %stride.at
  %unit = icmp eq i64 %extent, 1
  %compact = icmp eq i64 %stride, %expected
  %stride.ok = or i1 %unit, %compact
  %expected.next = mul i64 %expected, %extent
  br i1 %stride.ok, label %stride.fits, label %miss
stride.fits:
  br label %stride.loop
alignment:
  %data.at = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.data)
  %data = load ptr, ptr %data.at
  %offset.at = getelementptr %DLTensor, ptr %dl, i32 0, i32 $(DLTensor.byte_offset)
  %byte.offset = load i64, ptr %offset.at
  %base = ptrtoint ptr %data to i64
  %pointer = add i64 %base, %byte.offset
  %has.rows = icmp sgt i64 %ndim, 1
  br i1 %has.rows, label %last.row, label %alignment.test
last.row:
  %last = sub i64 %ndim, 1
  %last.extent.at = getelementptr i64, ptr %shape, i64 %last
  %last.extent = load i64, ptr %last.extent.at
  br label %alignment.test
alignment.test:
  %row.extent = phi i64 [ 0, %alignment ], [ %last.extent, %last.row ]
""" + alignment_test("write") + """write:
  %slot.offset.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.offset)
  %slot.offset = load i64, ptr %slot.offset.at
  %slot = getelementptr i8, ptr %spec.buffer, i64 %slot.offset
  store i64 %pointer, ptr %slot, align 1
  %extents = getelementptr i8, ptr %slot, i64 8
  br label %extent.loop
extent.loop:
  %j = phi i64 [ 0, %write ], [ %j.next, %extent.copy ]
  %extents.done = icmp eq i64 %j, %ndim
  br i1 %extents.done, label %written, label %extent.copy
extent.copy:
  %from = getelementptr i64, ptr %shape, i64 %j
  %value = load i64, ptr %from
  %to = getelementptr i64, ptr %extents, i64 %j
  store i64 %value, ptr %to, align 1
  %j.next = add i64 %j, 1
  br label %extent.loop
"""


class Entry(ctypes.Structure):
    """One array of a reader: its class, the class's export function, where its pointer and
    extents go in the buffer, and what the specialization expects of it."""

    _fields_ = entry_fields(("export", ctypes.c_void_p), ("ndim", ctypes.c_int32),
                            ("dtype", ctypes.c_uint32))


class Spec(ctypes.Structure):
    """A reader's arrays and the device they must be on."""

    _fields_ = spec_fields(("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class _ApiHeader(ctypes.Structure):
    """The start of ``DLPackExchangeAPI``: the version, the older-API link, then the five
    functions (allocator, managed from/to Python, DLTensor from Python, current stream)."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p), ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
                ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
                ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
                ("current_work_stream", ctypes.c_void_p)]


@dataclass(frozen=True)
class ArrayRead:
    """What the reader expects of one argument: its class, rank, element type, whether the
    kernel was specialized as 16-byte aligned, and its slot's byte offset in the buffer."""

    cls: type
    ndim: int
    dtype: kt.ScalarType
    aligned: bool
    offset: int


_READER = Reader("kaiojit_read_arrays",
                 "Read arrays through their DLPack exchange API into a parameter buffer.",
                 Spec, Entry, _BODY, structs=(DLTensor,),
                 allocas="  %dl = alloca %DLTensor, align 8")
_exports: dict[type, int | None] = {}


def export_function(cls: type) -> int | None:
    """The address of ``cls``'s ``dltensor_from_py_object_no_sync``, or None where ``cls``
    publishes no exchange API of a version read here. Only a class that defines the API
    itself counts: a subclass (a tensor subclass with its own ``__torch_function__``) keeps
    the attribute reads, which honour its overrides."""
    if not guard.available():  # the Python path: the class's attribute reads
        return None
    try:
        return _exports[cls]
    except KeyError:
        pass
    address = None
    capsule = cls.__dict__.get("__dlpack_c_exchange_api__")
    if capsule is not None and _capsule_is_valid(capsule, API_CAPSULE_NAME):
        api = _ApiHeader.from_address(_capsule_pointer(capsule, API_CAPSULE_NAME))
        # a newer major version may link an older one that still has this layout
        while api.major != API_MAJOR and api.prev_api:
            api = _ApiHeader.from_address(api.prev_api)
        if api.major == API_MAJOR and api.dltensor_from_py_object_no_sync:
            address = api.dltensor_from_py_object_no_sync
    _exports[cls] = address
    return address


def dtype_word(t: kt.ScalarType) -> int:
    """A DLPack ``DLDataType`` (code, bits, one lane) as the little-endian 32-bit word the
    reader compares with."""
    return t.dlpack_code | (t.bits << 8) | (1 << 16)


def reader(arrays: list[ArrayRead], buffer_address: int, device_id: int, *owners: Any,
           device_type: int = K_DL_CUDA) -> Any:
    """The builtin ``read(*arrays) -> bool`` for ``arrays`` (each class must have an
    :func:`export_function`), writing into the buffer at ``buffer_address``, which
    ``owners`` keep alive."""
    entries = _READER.entries(len(arrays))
    for entry, a in zip(entries, arrays):
        export = export_function(a.cls)
        if export is None:
            raise ValueError(f"{a.cls.__qualname__} publishes no DLPack exchange API")
        entry.cls, entry.export, entry.offset = id(a.cls), export, a.offset
        entry.ndim, entry.dtype = a.ndim, dtype_word(a.dtype)
        entry.itemsize, entry.aligned = a.dtype.itemsize, int(a.aligned)
    classes = tuple(a.cls for a in arrays)  # the entries hold their addresses
    return _READER.builtin(entries, buffer_address, classes, *owners, device_type=device_type,
                           device_id=device_id)


__all__ = ["ArrayRead", "dtype_word", "export_function", "reader"]
