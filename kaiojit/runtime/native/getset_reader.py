"""Reading CuPy arrays at launch through their C getters, in native code.

CuPy 14 publishes no DLPack C exchange API (:mod:`kaiojit.runtime.native.dlpack_exchange`), and the
facts a launch needs of a ``cupy.ndarray`` are Cython attributes: ``dtype``,
``_c_contiguous``, ``shape``, and its ``data`` (a ``MemoryPointer``) with ``ptr`` and
``device_id``. Read from Python each is a generic attribute lookup that ends in a C getter,
~25 ns apiece, ~220 ns an array. Each of those attributes is a ``getset_descriptor`` of the
class: its ``PyGetSetDef`` holds the getter's C function and closure. The builtin made here,
one per fast form (:mod:`kaiojit.runtime.native.fastlaunch`), calls those functions directly. For
each array it:

1. tests the array's class (``PyObject_Type``) against the one the fast form was built for
   (a getter is only valid for its class);
2. calls the ``dtype`` getter and tests the result's identity (NumPy's builtin dtypes are
   singletons; the fast form keeps the one it was built with);
3. calls ``_c_contiguous`` (``True`` or not);
4. calls ``data``, tests the ``MemoryPointer``'s class, and calls its ``ptr`` and
   ``device_id`` getters; the device must be the launch's;
5. for a vector calls ``ndim`` and ``size``; otherwise calls ``shape`` (a tuple) and tests its
   length against the rank;
6. tests the alignment the kernel was specialized on, as the Python form does;
7. writes the pointer and the extents into the fast form's parameter buffer.

Any getter that fails (an exception set) is a miss, with the exception cleared: the fast form
then takes the general path, which reads the array again and reports what is wrong. The
getters are looked up once per class, through the class's MRO as attribute lookup does (a
``getset_descriptor`` is a data descriptor: nothing on an instance overrides it), and each
descriptor is checked to be of the class and the name looked up before its ``PyGetSetDef`` is
read; a class whose attributes are not C getters keeps the Python form.
"""

from __future__ import annotations

import ctypes
import types
from dataclasses import dataclass
from typing import Any

from kaiojit import types as kt
from kaiojit.runtime.native import guard
from kaiojit.runtime.native.reader import Reader, alignment_test, entry_fields, spec_fields

# the facts read of an array, and of its ``data`` (``MemoryPointer``), in the order of the
# reader's getter slots (a vector's rank and length are read from ``ndim`` and ``size``, as
# ``shape`` builds a tuple)
ARRAY_ATTRIBUTES = ("dtype", "_c_contiguous", "data", "shape", "ndim", "size")
MEMORY_ATTRIBUTES = ("ptr", "device_id")

_DECLARATIONS = """
declare i64 @PyTuple_Size(ptr)
declare ptr @PyErr_Occurred()
declare i64 @PyLong_AsUnsignedLongLong(ptr)
declare i64 @PyLong_AsLongLong(ptr)
declare i64 @PyLong_AsSsize_t(ptr)

; getter %which of entry %e (ARRAY_ATTRIBUTES, then MEMORY_ATTRIBUTES) called on %obj
define internal ptr @get(ptr %e, i32 %which, ptr %obj) {
  %getter = getelementptr %Entry, ptr %e, i32 0, i32 $(Entry.getters), i32 %which
  %fn.at = getelementptr %Getter, ptr %getter, i32 0, i32 $(Getter.get)
  %fn = load ptr, ptr %fn.at
  %closure.at = getelementptr %Getter, ptr %getter, i32 0, i32 $(Getter.closure)
  %closure = load ptr, ptr %closure.at
  %value = call ptr %fn(ptr %obj, ptr %closure)
  ret ptr %value
}
"""

# one argument (the prologue, shared with the other reader, is in reader.py)
_BODY = """
read:
  %dt = call ptr @get(ptr %entry, i32 0, ptr %obj)
  %dt.null = icmp eq ptr %dt, null
  br i1 %dt.null, label %error, label %dtype.test
dtype.test:
  %want.dt.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.dtype)
  %want.dt = load ptr, ptr %want.dt.at
  %dt.ok = icmp eq ptr %dt, %want.dt
  call void @Py_DecRef(ptr %dt)
  br i1 %dt.ok, label %contiguity, label %miss
contiguity:
  %cc = call ptr @get(ptr %entry, i32 1, ptr %obj)
  %cc.null = icmp eq ptr %cc, null
  br i1 %cc.null, label %error, label %contiguity.test
contiguity.test:
  %cc.ok = icmp eq ptr %cc, %spec.true
  call void @Py_DecRef(ptr %cc)
  br i1 %cc.ok, label %data, label %miss
data:
  %mp = call ptr @get(ptr %entry, i32 2, ptr %obj)
  %mp.null = icmp eq ptr %mp, null
  br i1 %mp.null, label %error, label %data.class
data.class:
  %mp.type = call ptr @PyObject_Type(ptr %mp)
  call void @Py_DecRef(ptr %mp.type)
  %want.mp.type.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.memory_cls)
  %want.mp.type = load ptr, ptr %want.mp.type.at
  %mp.type.ok = icmp eq ptr %mp.type, %want.mp.type
  br i1 %mp.type.ok, label %memory.read, label %data.miss
data.miss:
  call void @Py_DecRef(ptr %mp)
  br label %miss
memory.read:
  %ptr.obj = call ptr @get(ptr %entry, i32 6, ptr %mp)
  %dev.obj = call ptr @get(ptr %entry, i32 7, ptr %mp)
  call void @Py_DecRef(ptr %mp)
  %ptr.null = icmp eq ptr %ptr.obj, null
  %dev.null = icmp eq ptr %dev.obj, null
  %either.null = or i1 %ptr.null, %dev.null
  br i1 %either.null, label %pointer.error, label %pointer.values
pointer.error:  ; Py_DecRef is Py_XDECREF: a null is left alone
  call void @Py_DecRef(ptr %ptr.obj)
  call void @Py_DecRef(ptr %dev.obj)
  br label %error
pointer.values:
  %pointer = call i64 @PyLong_AsUnsignedLongLong(ptr %ptr.obj)
  %dev = call i64 @PyLong_AsLongLong(ptr %dev.obj)
  call void @Py_DecRef(ptr %ptr.obj)
  call void @Py_DecRef(ptr %dev.obj)
  %conversion.failed = call ptr @PyErr_Occurred()
  %conversion.bad = icmp ne ptr %conversion.failed, null
  br i1 %conversion.bad, label %error, label %device.test
device.test:
  %dev.ok = icmp eq i64 %dev, %spec.device_id
  br i1 %dev.ok, label %rank.choice, label %miss
rank.choice:
  %ndim.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.ndim)
  %ndim = load i64, ptr %ndim.at
  %offset.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.offset)
  %offset = load i64, ptr %offset.at
  %slot = getelementptr i8, ptr %spec.buffer, i64 %offset
  %extents = getelementptr i8, ptr %slot, i64 8
  %is.vector = icmp eq i64 %ndim, 1
  br i1 %is.vector, label %vector, label %shape
vector:
  %rank.obj = call ptr @get(ptr %entry, i32 4, ptr %obj)
  %rank.obj.null = icmp eq ptr %rank.obj, null
  br i1 %rank.obj.null, label %error, label %vector.size
vector.size:
  %vector.rank = call i64 @PyLong_AsLongLong(ptr %rank.obj)
  call void @Py_DecRef(ptr %rank.obj)
  %size.obj = call ptr @get(ptr %entry, i32 5, ptr %obj)
  %size.obj.null = icmp eq ptr %size.obj, null
  br i1 %size.obj.null, label %error, label %vector.values
vector.values:
  %size = call i64 @PyLong_AsSsize_t(ptr %size.obj)
  call void @Py_DecRef(ptr %size.obj)
  %vector.failed = call ptr @PyErr_Occurred()
  %vector.bad = icmp ne ptr %vector.failed, null
  br i1 %vector.bad, label %error, label %vector.test
vector.test:
  %vector.ok = icmp eq i64 %vector.rank, 1
  br i1 %vector.ok, label %vector.write, label %miss
vector.write:
  store i64 %pointer, ptr %slot, align 1
  store i64 %size, ptr %extents, align 1
  br label %alignment
shape:
  %shape.obj = call ptr @get(ptr %entry, i32 3, ptr %obj)
  %shape.null = icmp eq ptr %shape.obj, null
  br i1 %shape.null, label %error, label %rank.test
rank.test:
  %rank = call i64 @PyTuple_Size(ptr %shape.obj)
  %rank.ok = icmp eq i64 %rank, %ndim
  br i1 %rank.ok, label %write, label %shape.miss
shape.miss:
  call void @Py_DecRef(ptr %shape.obj)
  %rank.failed = call ptr @PyErr_Occurred()
  %rank.bad = icmp ne ptr %rank.failed, null
  br i1 %rank.bad, label %error, label %miss
write:
  store i64 %pointer, ptr %slot, align 1
  br label %extent.loop
extent.loop:
  %j = phi i64 [ 0, %write ], [ %j.next, %extent.copy ]
  %last = phi i64 [ 0, %write ], [ %value, %extent.copy ]
  %extents.done = icmp eq i64 %j, %ndim
  br i1 %extents.done, label %extents.read, label %extent.copy
extent.copy:
  %item = call ptr @PyTuple_GetItem(ptr %shape.obj, i64 %j)
  %value = call i64 @PyLong_AsSsize_t(ptr %item)
  %to = getelementptr i64, ptr %extents, i64 %j
  store i64 %value, ptr %to, align 1
  %j.next = add i64 %j, 1
  br label %extent.loop
extents.read:
  call void @Py_DecRef(ptr %shape.obj)
  %extent.failed = call ptr @PyErr_Occurred()
  %extent.bad = icmp ne ptr %extent.failed, null
  br i1 %extent.bad, label %error, label %alignment
alignment:
  %row.extent = phi i64 [ 0, %vector.write ], [ %last, %extents.read ]
""" + alignment_test("written")

_SYMBOLS = ("PyTuple_Size", "PyErr_Occurred", "PyLong_AsUnsignedLongLong", "PyLong_AsLongLong",
            "PyLong_AsSsize_t")


class _Getter(ctypes.Structure):
    _fields_ = [("get", ctypes.c_void_p), ("closure", ctypes.c_void_p)]


class Entry(ctypes.Structure):
    """One array of a reader: its class, the dtype it must have, its ``data``'s class, the eight
    getters (``ARRAY_ATTRIBUTES``, then ``MEMORY_ATTRIBUTES``), its slot's byte offset in the
    buffer, its rank, element size, and whether the kernel was specialized as aligned."""

    _fields_ = entry_fields(("dtype", ctypes.c_void_p), ("memory_cls", ctypes.c_void_p),
                            ("getters", _Getter * 8), ("ndim", ctypes.c_int64))


class Spec(ctypes.Structure):
    """A reader's arrays, the device they must be on, and ``True`` (what ``_c_contiguous``
    returns of a contiguous array)."""

    _fields_ = spec_fields(("device_id", ctypes.c_int64), ("true", ctypes.c_void_p))


class _GetSetDescr(ctypes.Structure):
    """``PyGetSetDescrObject`` (descrobject.h: ``PyDescr_COMMON`` then ``d_getset``), the
    same in CPython 3.8 to 3.13."""

    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p),
                ("d_type", ctypes.c_void_p), ("d_name", ctypes.c_void_p),
                ("d_qualname", ctypes.c_void_p), ("d_getset", ctypes.c_void_p)]


class _GetSetDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("get", ctypes.c_void_p), ("set", ctypes.c_void_p),
                ("doc", ctypes.c_char_p), ("closure", ctypes.c_void_p)]


@dataclass(frozen=True)
class ArrayRead:
    """What the reader expects of one argument: its class and its ``data``'s class (both
    :func:`readable`), the dtype object it must have, its rank and element type, whether the
    kernel was specialized as 16-byte aligned, and its slot's byte offset in the buffer."""

    cls: type
    memory_cls: type
    dtype: Any
    ndim: int
    scalar: kt.ScalarType
    aligned: bool
    offset: int


_READER = Reader("kaiojit_read_getset_arrays",
                 "Read arrays through their classes' C getters into a parameter buffer.",
                 Spec, Entry, _BODY, symbols=_SYMBOLS, declarations=_DECLARATIONS)
_getters: dict[tuple[type, str], tuple[int, int, Any] | None] = {}


def c_getter(cls: type, name: str) -> tuple[int, int, Any] | None:
    """``(function, closure, descriptor)`` of the C getter that ``getattr(x, name)`` calls for
    an ``x`` of class ``cls``, or None where that attribute is not a C getter (a property, a
    plain attribute, a getter-less descriptor). The descriptor is returned to be kept alive.
    None too where this interpreter's object layout is not the one read here
    (:func:`kaiojit.runtime.native.guard.available`)."""
    if not guard.available():
        return None
    key = (cls, name)
    try:
        return _getters[key]
    except KeyError:
        pass
    found = None
    for base in cls.__mro__:
        descriptor = base.__dict__.get(name)
        if descriptor is None:
            continue
        if type(descriptor) is types.GetSetDescriptorType:
            raw = _GetSetDescr.from_address(id(descriptor))
            definition = _GetSetDef.from_address(raw.d_getset) if raw.d_getset else None
            # the layout read is the one assumed: the descriptor names its class and name
            if (definition is not None and raw.d_type == id(base) and definition.get
                    and definition.name == name.encode()):
                found = (definition.get, definition.closure or 0, descriptor)
        break
    _getters[key] = found
    return found


def readable(cls: type, memory_cls: type) -> bool:
    """Whether arrays of ``cls`` whose ``data`` is of ``memory_cls`` can be read here."""
    return (all(c_getter(cls, n) for n in ARRAY_ATTRIBUTES)
            and all(c_getter(memory_cls, n) for n in MEMORY_ATTRIBUTES))


def reader(arrays: list[ArrayRead], buffer_address: int, device_id: int, *owners: Any) -> Any:
    """The builtin ``read(*arrays) -> bool`` for ``arrays``, writing into the buffer at
    ``buffer_address``, which ``owners`` keep alive."""
    entries = _READER.entries(len(arrays))
    keep: list[Any] = []
    for entry, a in zip(entries, arrays, strict=True):
        found = ([c_getter(a.cls, n) for n in ARRAY_ATTRIBUTES]
                 + [c_getter(a.memory_cls, n) for n in MEMORY_ATTRIBUTES])
        if not all(found):
            raise ValueError(f"{a.cls.__qualname__}: its array facts are not all C getters")
        for slot, (get, closure, descriptor) in zip(entry.getters, found, strict=True):
            slot.get, slot.closure = get, closure
            keep.append(descriptor)
        entry.cls, entry.dtype, entry.memory_cls = id(a.cls), id(a.dtype), id(a.memory_cls)
        entry.offset, entry.ndim = a.offset, a.ndim
        entry.itemsize, entry.aligned = a.scalar.itemsize, int(a.aligned)
        keep += [a.cls, a.dtype, a.memory_cls]
    return _READER.builtin(entries, buffer_address, tuple(keep), *owners, device_id=device_id,
                           true=id(True))


__all__ = ["ARRAY_ATTRIBUTES", "MEMORY_ATTRIBUTES", "ArrayRead", "c_getter", "readable",
           "reader"]
