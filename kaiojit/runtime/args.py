"""From user arguments to kernel parameters: ``typeof`` and the per-signature packer.

Both dispatch on the argument's Python class through tables filled the first time a class is
seen (device arrays through :mod:`kaiojit.runtime.interop`'s), so a launch pays one dict lookup
per argument, never an ``isinstance`` chain. An array argument becomes its parameters as
``kaiojit.types.param_parts`` says: the data pointer, the shape, and (layout 'A' only) the
strides in bytes. A NumPy array is staged: copied to the device for the launch and back.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kaiojit import types as kt
from kaiojit.errors import PerformanceWarning, warn_user
from kaiojit.runtime.interop import (
    array_extractor,
    cai_extractor,
    cai_info,
    instance_extractor,
    producer_stream,
)
from kaiojit.runtime.layout import alignment, array_type, contiguous_strides
from kaiojit.runtime.memory import DeviceArray, to_device
from kaiojit.runtime.slots import ArgSlots, SlotLayout
from kaiojit.runtime.tensormap import TensorMap

_SCALAR_OF_PYTHON = {bool: kt.bool_, float: kt.float64, complex: kt.complex128}  # int: _typeof_int


# --- typeof -------------------------------------------------------------------------------------

def _typeof_numpy(a: np.ndarray) -> kt.ArrayType:
    scalar = kt.from_dtype(a.dtype)
    if a.flags.c_contiguous:
        layout = "C"
    elif a.flags.f_contiguous:
        layout = "F"
    else:
        layout = "A"
    return array_type(scalar, a.ndim, layout)


def _typeof_int(v: int) -> kt.ScalarType:
    """A Python int is an int64; one outside int64's range has no type to pass it as (it
    would wrap): a ``TypeError`` saying so."""
    if -(1 << 63) <= v < 1 << 63:
        return kt.int64
    hint = " (np.uint64(...) passes an unsigned one)" if 0 <= v < 1 << 64 else ""
    raise TypeError(f"the Python int {v} does not fit int64, the type a Python int is passed "
                    f"as{hint}")


def _classify_typeof(cls: type) -> Callable[[Any], kt.Type]:
    if cls is int or (issubclass(cls, int) and not issubclass(cls, (bool, np.generic))):
        return _typeof_int
    if cls in _SCALAR_OF_PYTHON:
        t = _SCALAR_OF_PYTHON[cls]
        return lambda v: t
    if issubclass(cls, DeviceArray):
        return operator.attrgetter("kaiojit_type")
    if issubclass(cls, np.void):  # a record scalar (numba passes it by reference)
        return _typeof_record
    if issubclass(cls, np.generic):
        try:
            t = kt.from_dtype(np.dtype(cls))
        except TypeError:
            return _unsupported(cls)
        return lambda v: t
    if issubclass(cls, np.ndarray):
        return _typeof_numpy
    if issubclass(cls, TensorMap):
        return operator.attrgetter("type")
    if issubclass(cls, tuple):  # its items' types (numba passes tuples; kernels index them)
        return _typeof_tuple
    if issubclass(cls, bool):
        return lambda v: kt.bool_
    if issubclass(cls, float):
        return lambda v: kt.float64
    if issubclass(cls, complex):
        return lambda v: kt.complex128
    ex = array_extractor(cls)
    if ex is not None:
        return lambda v: ex(v)[3]
    fail = _unsupported(cls)

    def by_instance(v: Any) -> kt.Type:
        ex = instance_extractor(v)
        return ex(v)[3] if ex is not None else fail(v)
    return by_instance


def _typeof_tuple(v: tuple) -> kt.TupleType:
    items = tuple(typeof(e) for e in v)
    fields = getattr(v, "_fields", None)  # a namedtuple: its items are read by name too
    if fields is not None:
        return kt.NamedTupleType(items, tuple(fields), type(v).__name__)
    return kt.TupleType(items)


def _typeof_record(v: np.void) -> kt.Type:
    if v.dtype.fields is None:
        raise TypeError(f"kaiojit cannot pass a NumPy void scalar of dtype {v.dtype} to a "
                        "kernel (records, structured dtypes, only)")
    return kt.from_dtype(v.dtype)


def _unsupported(cls: type) -> Callable[[Any], kt.Type]:
    def fail(v: Any) -> kt.Type:
        raise TypeError(f"kaiojit cannot pass an object of type {cls.__module__}.{cls.__qualname__}"
                        " to a kernel")
    return fail


_TYPEOF: dict[type, Callable[[Any], kt.Type]] = {}


def typeof(value: Any) -> kt.Type:
    """The kaiojit type of a kernel argument (what signatures are specialized on)."""
    cls = value.__class__
    fn = _TYPEOF.get(cls)
    if fn is None:
        fn = _TYPEOF[cls] = _classify_typeof(cls)
    return fn(value)


# --- packing ------------------------------------------------------------------------------------

class StagedArray:
    """A NumPy argument copied to the device for one launch and copied back after it."""

    __slots__ = ("host", "device_array")

    def __init__(self, host: np.ndarray, device_array: DeviceArray):
        self.host = host
        self.device_array = device_array

    def copy_back(self, stream: int | None) -> None:
        if self.host.flags.writeable:
            self.device_array.copy_to_host(self.host, stream=stream)


class StagedRecord:
    """A NumPy record scalar (``arr[i]`` of a structured array, a view of its element)
    copied to the device for one launch; after it, the kernel's writes go back into the
    element, field by field (once the launch's stream has finished)."""

    __slots__ = ("record", "device_array")

    def __init__(self, record: np.void, device_array: DeviceArray):
        self.record = record
        self.device_array = device_array

    def copy_back(self, stream: int | None) -> None:
        back = self.device_array.copy_to_host(stream=stream)
        if stream is not None:
            self.device_array.backend.stream_synchronize(stream)
        for name in self.record.dtype.names:
            try:
                self.record[name] = back[0][name]
            except (TypeError, ValueError):
                return  # a read-only record (a copy made by the caller): nothing to write


def _record_writer(slot: int, t: kt.RecordType, name: str) -> Writer:
    def write(slots: ArgSlots, value: Any, device: int) -> StagedRecord:
        if not isinstance(value, np.void) or value.dtype.fields is None or \
                kt.from_dtype(value.dtype) != t:
            raise TypeError(f"parameter {name!r} is a record ({t}): got {_describe(value)}")
        staged = StagedRecord(value, to_device(np.array([value], dtype=value.dtype)))
        slots.u64[slot] = staged.device_array.launch_info[0]
        return staged
    return write


Writer = Callable[[ArgSlots, Any, int], "StagedArray | StagedRecord | None"]


def _int_writer(slot: int, t: kt.ScalarType, name: str) -> Writer:
    mask = (1 << t.bits) - 1

    def write(slots: ArgSlots, value: Any, device: int) -> None:
        if value.__class__ is not int:
            value = _as_int(value, t, name)
        slots.u64[slot] = value & mask
    return write


def _as_int(value: Any, t: kt.ScalarType, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"parameter {name!r} is {t}: got {_describe(value)}, which is not an "
                        "integer") from None


def _float_writer(slot: int, t: kt.ScalarType, name: str) -> Writer:
    def as_float(value: Any) -> float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TypeError(f"parameter {name!r} is {t}: got {_describe(value)}") from None

    fmt = t.slot_format  # the type's packing decides, never its width
    if fmt == "f4x":  # float32: through the slots' float view
        def write32(slots: ArgSlots, value: Any, device: int) -> None:
            if value.__class__ is not float:
                value = as_float(value)
            try:
                slots.f32[2 * slot] = value
            except OverflowError:
                slots.f32[2 * slot] = np.float32(value).item()  # inf, as a C cast gives
        return write32
    if fmt == "d":
        def write64(slots: ArgSlots, value: Any, device: int) -> None:
            if value.__class__ is not float:
                value = as_float(value)
            slots.f64[slot] = value
        return write64

    def write_packed(slots: ArgSlots, value: Any, device: int) -> None:
        v = as_float(value)
        try:
            slots.write_scalar(slot, t, v)
        except OverflowError:  # float16 beyond its range: inf, as NumPy's cast gives
            slots.write_bytes(slot, t.np_dtype.type(v).tobytes())
    return write_packed


def _complex_writer(slot: int, t: kt.ScalarType, name: str) -> Writer:
    """A complex scalar: its real and imaginary parts in two consecutive slots."""
    real, imag = _float_writer(slot, t.component, name), _float_writer(slot + 1, t.component, name)

    def write(slots: ArgSlots, value: Any, device: int) -> None:
        try:
            z = complex(value)
        except (TypeError, ValueError):
            raise TypeError(f"parameter {name!r} is {t}: got {_describe(value)}") from None
        real(slots, z.real, device)
        imag(slots, z.imag, device)
    return write


def _bool_writer(slot: int, name: str) -> Writer:
    def write(slots: ArgSlots, value: Any, device: int) -> None:
        slots.u64[slot] = 1 if value else 0
    return write


def _tensormap_writer(slot: int, t: kt.TensorMapType, name: str) -> Writer:
    def write(slots: ArgSlots, value: Any, device: int) -> None:
        if value.__class__ is not TensorMap and not isinstance(value, TensorMap):
            raise TypeError(f"parameter {name!r} is a {t}: got {_describe(value)}")
        if not t.accepts(value.type):
            raise TypeError(f"parameter {name!r} is a {t}: got a map of type {value.type} "
                            f"(box {value.box})")
        slots.write_bytes(slot, value.bytes)
    return write


def _accepted_types(t: kt.ArrayType) -> frozenset[kt.ArrayType]:
    """The array types a parameter of type ``t`` takes as they are (an aligned array also
    fits an unaligned parameter); other layouts under an aligned 'A' parameter are checked
    by :func:`_fits_alignment`."""
    layouts = ("CA" if t.align and t.ndim > 1 else "CFA") if t.layout == "A" else t.layout
    aligns = (t.align,) if t.align else (0, kt.ALIGN_BYTES)
    return frozenset(array_type(t.dtype, t.ndim, layout, align)
                     for layout in layouts for align in aligns)


def _fits_alignment(t: kt.ArrayType, ptr: int, shape: tuple, strides: tuple) -> bool:
    return alignment(ptr, shape, strides, t.dtype.itemsize, t.layout) >= t.align


def _array_writer(first: int, t: kt.ArrayType, name: str, written: bool = True) -> Writer:
    """``written``: the kernel may write this parameter (a read-only NumPy array for it is an
    error: its writes could not be copied back)."""
    accepted = _accepted_types(t)
    exact = array_type(t.dtype, t.ndim, t.layout, t.align)
    ndim = t.ndim
    passes_strides = t.passes_strides
    itemsize = t.dtype.itemsize

    def write(slots: ArgSlots, value: Any, device: int) -> StagedArray | None:
        if value.__class__ is DeviceArray and not passes_strides:
            ptr, shape, _, vt, vdev = value.launch_info
            if vt is exact and vdev == device:  # the common case, in one step
                u64 = slots.u64
                u64[first] = ptr
                if ndim == 1:
                    u64[first + 1] = shape[0]
                else:
                    slot = first + 1
                    for n in shape:
                        u64[slot] = n
                        slot += 1
                return None
        return write_any(slots, value, device)

    def write_any(slots: ArgSlots, value: Any, device: int) -> StagedArray | None:
        ex = array_extractor(value.__class__) or instance_extractor(value)
        staged = None
        if ex is None:
            if not isinstance(value, np.ndarray):
                raise TypeError(f"parameter {name!r} is an array ({t}): got {_describe(value)}")
            if written and not value.flags.writeable:
                raise ValueError(f"parameter {name!r}: the kernel writes this array, and the "
                                 "NumPy array passed is read-only (the writes could not be "
                                 "copied back); pass a writeable array (np.array(a) copies it)")
            staged = _stage_numpy(value, name)
            info = staged.device_array.launch_info
        else:
            try:
                if ex is cai_extractor:  # the dict read once (a producer may build it per read)
                    cai = value.__cuda_array_interface__
                    info = cai_info(cai)
                    producer_stream(cai)  # synchronized on, as CAI v3 asks
                else:
                    cai, info = None, ex(value)
            except TypeError as e:
                raise TypeError(f"parameter {name!r}: {e}") from None
            if written and cai is not None and cai["data"][1]:
                raise ValueError(f"parameter {name!r}: the kernel writes this array, and its "
                                 "__cuda_array_interface__ marks it read-only (data[1] is True)")
        ptr, shape, strides, vt, vdev = info
        if vt not in accepted:
            if strides is None and vt.layout != "A":
                strides = contiguous_strides(shape, itemsize, vt.layout)
            if (vt.dtype != t.dtype or vt.ndim != t.ndim or t.layout != "A"
                    or not _fits_alignment(t, ptr, shape, strides)):
                raise TypeError(f"parameter {name!r} is {t}: got an array of type {vt}")
        if vdev != device and vdev >= 0:
            raise TypeError(f"parameter {name!r}: the array is on device {vdev}, the launch "
                            f"is on device {device}")
        u64 = slots.u64
        u64[first] = ptr
        slot = first + 1
        for n in shape:
            u64[slot] = n
            slot += 1
        if passes_strides:
            if strides is None:
                strides = contiguous_strides(shape, itemsize, vt.layout)
            for s in strides:
                u64[slot] = s & 0xFFFFFFFFFFFFFFFF
                slot += 1
        return staged
    return write


def _tuple_writer(t: kt.TupleType, first_slot: Sequence[int], start: int, name: str
                  ) -> Writer:
    """Writes a tuple's items flat, each as a parameter of its own type would be written
    (``x[1]`` names item 1 of ``x`` in errors); the NumPy arrays it stages, as a list."""
    items = []
    for i, e in enumerate(t.elements):
        item = f"{name}[{i}]"
        if isinstance(e, kt.TupleType):
            items.append(_tuple_writer(e, first_slot, start, item))
        else:
            items.append(ArgPacker._writer(e, first_slot[start], item))
        start += len(kt.param_parts(e))
    n = len(items)

    def write(slots: ArgSlots, value: Any, device: int) -> list | None:
        if not isinstance(value, tuple) or len(value) != n:
            raise TypeError(f"parameter {name!r} is a tuple of {n} items ({t}): got "
                            f"{_describe(value)}")
        staged = []
        for write_item, v in zip(items, value):
            s = write_item(slots, v, device)
            if s is not None:
                staged += s if isinstance(s, list) else [s]
        return staged or None
    return write


def _stage_numpy(a: np.ndarray, name: str) -> StagedArray:
    # it opens with numba's words, so that numba users' warning filters keep matching it
    warn_user(f"Host array used in CUDA kernel will incur copy overhead to/from device: "
              f"parameter {name!r} (a NumPy array) is copied to the device before the launch "
              "and back after it; pass a kj.DeviceArray to avoid the copies", PerformanceWarning)
    try:
        kt.from_dtype(a.dtype)
    except TypeError as e:
        raise TypeError(f"parameter {name!r}: {e}") from None
    return StagedArray(a, to_device(a))


def _describe(value: Any) -> str:
    cls = value.__class__
    module = "" if cls.__module__ == "builtins" else f"{cls.__module__}."
    text = repr(value) if cls in (int, float, bool, str) or value is None else ""
    return f"{module}{cls.__qualname__}{f' {text}' if text and len(text) < 40 else ''}"


class ArgPacker:
    """Writes one signature's arguments into :class:`ArgSlots`; built once per signature."""

    def __init__(self, arg_types: Sequence[kt.Type], arg_names: Sequence[str] | None = None,
                 trailing: bool = False, written: frozenset | None = None):
        """``trailing``: one more int64 slot after the arguments, which the launch writes (a
        coarse entry's grid extent, ``trailing_slot``); an entry without that parameter
        ignores it. ``written``: the array parameters the kernel may write (None: any)."""
        self.arg_types = tuple(arg_types)
        names = tuple(arg_names) if arg_names is not None else ()
        if len(names) != len(self.arg_types):
            names = tuple(f"arg{i}" for i in range(len(self.arg_types)))
        self.arg_names = names
        kinds: list[str] = []
        starts: list[int] = []
        for t in self.arg_types:
            starts.append(len(kinds))
            kinds.extend(kt.param_parts(t))
        self.layout = SlotLayout.for_kinds(kinds + ["int64"] if trailing else kinds)
        self.trailing_slot = self.layout.first_slot[len(kinds)] if trailing else None
        self.writers: tuple[Writer, ...] = tuple(
            self._writer(t, self.layout.first_slot[start], name,
                         written is None or name in written)
            if not isinstance(t, kt.TupleType) else
            _tuple_writer(t, self.layout.first_slot, start, name)
            for t, start, name in zip(self.arg_types, starts, names))
        self.nargs = len(self.arg_types)

    @staticmethod
    def _writer(t: kt.Type, slot: int, name: str, written: bool = True) -> Writer:
        if isinstance(t, kt.ScalarType):
            if t.is_bool:
                return _bool_writer(slot, name)
            if t.is_complex:
                return _complex_writer(slot, t, name)
            if t.is_float:
                return _float_writer(slot, t, name)
            return _int_writer(slot, t, name)
        if isinstance(t, kt.ArrayType):
            return _array_writer(slot, t, name, written)
        if isinstance(t, kt.TensorMapType):
            return _tensormap_writer(slot, t, name)
        if isinstance(t, kt.RecordType):
            return _record_writer(slot, t, name)
        raise TypeError(f"parameter {name!r}: type {t} cannot be a kernel parameter")

    def pack(self, slots: ArgSlots, args: Sequence[Any], device: int) -> list[StagedArray] | None:
        """Write ``args``; returns the NumPy arrays to copy back after the launch, if any."""
        if len(args) != self.nargs:
            self._wrong_count(args)
        staged = None
        for write, value in zip(self.writers, args):
            s = write(slots, value, device)
            if s is not None:
                s = s if isinstance(s, list) else [s]  # a tuple's items: a list of them
                staged = s if staged is None else staged + s
        return staged

    def _wrong_count(self, args: Sequence[Any]) -> None:
        n = len(args)
        if n < self.nargs:
            missing = ", ".join(repr(x) for x in self.arg_names[n:])
            raise TypeError(f"kernel takes {self.nargs} arguments, got {n}: missing {missing}")
        raise TypeError(f"kernel takes {self.nargs} arguments "
                        f"({', '.join(self.arg_names)}), got {n}")
