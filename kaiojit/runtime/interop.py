"""Foreign device arrays: their pointers, shapes and types, and zero-copy DeviceArray views.

kaiojit takes any device array without copying it: its own :class:`DeviceArray`, PyTorch
tensors and CuPy arrays (read through their attributes, the fastest way), and anything with
``__cuda_array_interface__`` (v2, v3) or a ``__dlpack__`` on the backend's device. What a
launch needs of one is its :data:`ArrayInfo`. The extractor is chosen once per Python class,
so a launch pays one dict lookup per array. NumPy arrays are host memory, not device arrays:
they have no extractor here (the argument packer stages them).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from kaiojit import types as kt
from kaiojit.runtime import dlpack
from kaiojit.runtime.backend import get_backend
from kaiojit.runtime.layout import alignment, array_type, layout_of
from kaiojit.runtime.memory import DeviceArray
from kaiojit.runtime.stream import Stream

# An array's launch facts: (pointer, shape, strides in bytes or None when contiguous,
# kaiojit type, device ordinal or -1 when unknown). DeviceArray keeps this tuple ready.
ArrayInfo = tuple[int, tuple[int, ...], "tuple[int, ...] | None", kt.ArrayType, int]
Extractor = Callable[[Any], ArrayInfo]


def _device_array_info(a: DeviceArray) -> ArrayInfo:
    return a.launch_info


def _torch_info(t: Any) -> ArrayInfo:
    device = t.get_device()
    if device < 0:
        device = _host_tensor_device(t)
    scalar = _torch_scalar(t.dtype)
    if scalar.is_complex and t.is_conj() or t.is_neg():
        # a lazy view: the memory holds the values before the conjugation or negation
        raise TypeError("a PyTorch tensor with its conjugate or negative bit set (a lazy view "
                        "such as x.conj()); pass x.resolve_conj() or x.resolve_neg()")
    shape = tuple(t.shape)
    itemsize = scalar.itemsize
    ptr = t.data_ptr()
    if t.is_contiguous():
        align = alignment(ptr, shape, None, itemsize, "C")
        return ptr, shape, None, array_type(scalar, len(shape), "C", align), device
    strides = tuple(s * itemsize for s in t.stride())
    layout = layout_of(shape, strides, itemsize)
    t = array_type(scalar, len(shape), layout, alignment(ptr, shape, strides, itemsize, layout))
    return ptr, shape, strides if layout == "A" else None, t, device


def _host_tensor_device(t: Any) -> int:
    """The device a CPU tensor is passed on: host memory is the memory of backends whose
    arrays are host memory (cpu, mock), zero-copy as their own arrays are; the cuda backend
    refuses it, as a CUDA kernel cannot read it."""
    backend = get_backend()
    if not getattr(t, "is_cpu", False):
        raise TypeError(f"a PyTorch tensor on device {t.device}, which kaiojit cannot launch on")
    if backend.dlpack_device_type() != dlpack.K_DL_CPU:
        raise TypeError(f"a PyTorch tensor on the CPU, which kaiojit's {backend.name} backend "
                        "cannot read; move it to the GPU with .cuda() first, or run on the cpu "
                        "backend (KAIOJIT_BACKEND=cpu)")
    return backend.current_device()


_TORCH_DTYPES: dict[Any, kt.ScalarType] = {}


def _torch_scalar(dtype: Any) -> kt.ScalarType:
    scalar = _TORCH_DTYPES.get(dtype)
    if scalar is None:
        name = str(dtype).removeprefix("torch.")
        if name not in kt.SCALARS:
            raise TypeError(f"kaiojit has no type for PyTorch dtype {dtype}")
        scalar = _TORCH_DTYPES[dtype] = kt.SCALARS[name]
    return scalar


def _cupy_info(a: Any) -> ArrayInfo:
    scalar = kt.from_dtype(a.dtype)
    shape, strides = a.shape, a.strides
    layout = layout_of(shape, strides, scalar.itemsize)
    ptr = a.data.ptr
    align = alignment(ptr, shape, strides, scalar.itemsize, layout)
    return (ptr, shape, strides if layout == "A" else None,
            array_type(scalar, len(shape), layout, align), a.data.device_id)


class CaiConsumer:
    """How kaiojit consumes a foreign ``__cuda_array_interface__``. ``sync``: synchronize on
    the stream the interface names before using the array, as CAI v3 asks of consumers that
    do not order their work after that stream themselves (numba's
    ``CUDA_ARRAY_INTERFACE_SYNC``, on by default; ``kaiojit.cuda.config`` sets it)."""

    sync = True


cai_consumer = CaiConsumer()


def producer_stream(cai: Any, sync: bool = True) -> Stream | None:
    """The stream a CAI dict says its producer works on (None: no stream), synchronized when
    ``sync`` and :data:`cai_consumer` say so. A ``TypeError`` names a malformed ``stream``."""
    handle = cai.get("stream") if isinstance(cai, dict) else None
    if handle is None:
        return None
    if not _is_int(handle) or handle == 0:
        raise TypeError(f"__cuda_array_interface__['stream'] = {handle!r}: takes None or a "
                        "stream handle (an int; 0 is disallowed, 1 and 2 are the default "
                        "streams)")
    stream = Stream(handle=int(handle))
    if sync and cai_consumer.sync:
        stream.synchronize()
    return stream


def _cai_info(obj: Any) -> ArrayInfo:
    return cai_info(obj.__cuda_array_interface__)


cai_extractor: Extractor = _cai_info  # the extractor of CAI arrays (the packer asks which)


def cai_info(cai: dict) -> ArrayInfo:
    """Launch facts of a ``__cuda_array_interface__`` dict (v2 or v3), each field checked: a
    ``TypeError`` names the field that is malformed (the caller names the parameter)."""
    return _cai_fields(cai)


def _cai_fields(cai: Any) -> ArrayInfo:
    if not isinstance(cai, dict):
        raise TypeError(f"__cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    if cai.get("mask") is not None:
        raise TypeError("masked __cuda_array_interface__ arrays are not supported")
    shape = _cai_ints(cai, "shape", required=True)
    if "typestr" not in cai:
        raise TypeError("__cuda_array_interface__ has no 'typestr'")
    typestr = cai["typestr"]
    try:
        if not isinstance(typestr, str):
            raise TypeError("takes a NumPy type string such as '<f4'")
        scalar = kt.from_dtype(np.dtype(typestr))
    except (TypeError, ValueError) as e:
        raise TypeError(f"__cuda_array_interface__['typestr'] = {typestr!r}: {e}") from None
    strides = _cai_ints(cai, "strides", required=False)
    if strides is not None and len(strides) != len(shape):
        raise TypeError(f"__cuda_array_interface__['strides'] = {strides} has {len(strides)} "
                        f"entries for a shape of {len(shape)} dimensions")
    data = cai.get("data")
    if (not isinstance(data, (tuple, list)) or len(data) != 2 or not _is_int(data[0], none_ok=True)
            or not isinstance(data[1], (bool, np.bool_))):
        raise TypeError(f"__cuda_array_interface__['data'] = {data!r}: takes a tuple "
                        "(pointer: int, read_only: bool)")
    ptr = int(data[0] or 0)
    if not 0 <= ptr < 1 << 64:
        raise TypeError(f"__cuda_array_interface__['data'] pointer {ptr} is not an address")
    if ptr == 0 and math.prod(shape):
        raise TypeError(f"__cuda_array_interface__['data'] is a NULL pointer for an array of "
                        f"shape {shape}")
    layout = layout_of(shape, strides, scalar.itemsize)
    t = array_type(scalar, len(shape), layout,
                   alignment(ptr, shape, strides, scalar.itemsize, layout))
    return ptr, shape, strides if layout == "A" else None, t, -1


def _is_int(value: Any, none_ok: bool = False) -> bool:
    if value is None:
        return none_ok
    return not isinstance(value, bool) and isinstance(value, (int, np.integer))


def _cai_ints(cai: dict, field: str, required: bool) -> tuple[int, ...] | None:
    """A tuple-of-ints field of a CAI dict (extents non-negative)."""
    if field not in cai and required:
        raise TypeError(f"__cuda_array_interface__ has no {field!r}")
    value = cai.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, (tuple, list)) or not all(_is_int(n) for n in value):
        raise TypeError(f"__cuda_array_interface__[{field!r}] = {value!r}: takes a tuple of "
                        "ints")
    ints = tuple(int(n) for n in value)
    if field == "shape" and any(n < 0 for n in ints):
        raise TypeError(f"__cuda_array_interface__['shape'] = {ints}: extents must be 0 or more")
    return ints


def _dlpack_info(obj: Any) -> ArrayInfo:
    return from_dlpack(obj).launch_info


def _classify_array(cls: type) -> Extractor | None:
    """The extractor for arrays of class ``cls``, or None if ``cls`` is no device array."""
    if issubclass(cls, DeviceArray):
        return _device_array_info
    if issubclass(cls, np.ndarray):
        return None  # host memory (it has a __dlpack__ too, on the CPU)
    for base in cls.__mro__:
        module = base.__module__ or ""
        if module.startswith("torch") and base.__name__ == "Tensor":
            return _torch_info
        if module.startswith("cupy") and base.__name__ == "ndarray":
            return _cupy_info
    if hasattr(cls, "__cuda_array_interface__"):
        return _cai_info
    if hasattr(cls, "__dlpack__") and hasattr(cls, "__dlpack_device__"):
        return _dlpack_info
    return None


_EXTRACTORS: dict[type, Extractor | None] = {}


def array_extractor(cls: type) -> Extractor | None:
    """How to read the :data:`ArrayInfo` of instances of ``cls`` (None: not a device array)."""
    try:
        return _EXTRACTORS[cls]
    except KeyError:
        ex = _EXTRACTORS[cls] = _classify_array(cls)
        return ex


def instance_extractor(value: Any) -> Extractor | None:
    """For objects that carry ``__cuda_array_interface__`` as an instance attribute."""
    if hasattr(value, "__cuda_array_interface__"):
        return _cai_info
    return None


def array_info(value: Any) -> ArrayInfo | None:
    """The :data:`ArrayInfo` of any device array kaiojit takes, None for anything else."""
    ex = array_extractor(value.__class__) or instance_extractor(value)
    return ex(value) if ex is not None else None


def from_dlpack(obj: Any) -> DeviceArray:
    """A zero-copy DeviceArray viewing a ``__dlpack__`` producer's tensor on the backend's
    device; the producer's deleter runs when the view is collected."""
    backend = get_backend()
    device_type, _ = obj.__dlpack_device__()
    accepted = {backend.dlpack_device_type(), dlpack.K_DL_CUDA_MANAGED}
    if int(device_type) not in accepted:
        raise TypeError(f"a DLPack tensor on device type {int(device_type)}; kaiojit's "
                        f"{backend.name} backend takes device type {backend.dlpack_device_type()}")

    def view_of(t: dlpack.ImportedTensor) -> tuple[DeviceArray, int]:
        return DeviceArray(t.shape, t.strides, t.dtype, t.ptr, t.device_id, obj, backend), \
            t.address

    view, address = dlpack.consume(obj, accepted, view_of)
    weakref.finalize(view, dlpack.release, address).atexit = False
    return view


def as_device_array(obj: Any, cls: type[DeviceArray] = DeviceArray, sync: bool = True
                    ) -> DeviceArray:
    """A zero-copy DeviceArray (of class ``cls``) viewing a CAI or DLPack array; keeps ``obj``
    alive. A CAI array made on a stream is synchronized on it (:func:`producer_stream`), and
    the view's ``stream`` is that stream."""
    if isinstance(obj, cls):
        return obj
    backend = get_backend()
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr, shape, strides, t, _ = cai_info(cai)
        stream = producer_stream(cai, sync)
        device = backend.pointer_device(ptr) if ptr else -1
        if device < 0:
            device = backend.current_device()
        if strides is None:
            strides = cai.get("strides")
        view = cls(shape, strides, t.dtype.np_dtype, ptr, device, obj, backend)
        view.stream = stream or 0
        return view
    if hasattr(obj, "__dlpack__"):
        return from_dlpack(obj)
    raise TypeError(f"as_device_array needs an object with __cuda_array_interface__ or "
                    f"__dlpack__, got {type(obj).__qualname__}")
