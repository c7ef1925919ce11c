"""numba.cuda's host API on kaiojit's runtime: streams, events, devices, host memory.

On the cpu backend "device" memory is host memory, so pinned, mapped and managed arrays are
NumPy arrays (numba's ``pinned_array`` returns one too); on the cuda backend they are NumPy
arrays in pageable memory, which every kaiojit copy accepts (docs/porting.md).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .. import runtime as rt
from ..runtime.interop import as_device_array
from .devicearray import DeviceNDArray, MappedNDArray, as_numba_array

# --- streams and events -------------------------------------------------------------------------

def stream() -> rt.Stream:
    """A new stream on the current device (numba's ``cuda.stream()``)."""
    return rt.Stream()


def default_stream() -> rt.Stream:
    return rt.default_stream()


legacy_default_stream = default_stream
per_thread_default_stream = default_stream


def external_stream(ptr: int) -> rt.Stream:
    """A stream someone else created, by its handle."""
    return rt.Stream(handle=int(ptr))


def event(timing: bool = True) -> rt.Event:
    return rt.Event(timing=timing)


def event_elapsed_time(evtstart: rt.Event, evtend: rt.Event) -> float:
    """Milliseconds between two recorded events."""
    return evtstart.elapsed_time(evtend)


def synchronize() -> None:
    rt.synchronize()


# --- devices ------------------------------------------------------------------------------------

class Device:
    """numba's device object: its id, name and compute capability."""

    def __init__(self, index: int):
        self.id = index

    @property
    def compute_capability(self) -> tuple[int, int]:
        backend = rt.get_backend()
        if backend.name == "cuda":
            return tuple(rt.device_compute_capability(self.id))
        arch = backend.target_spec().arch  # the cpu backend runs kernels compiled for sm_XY
        digits = arch.removeprefix("sm_").rstrip("a")
        return int(digits[:-1]), int(digits[-1])

    @property
    def name(self) -> bytes:
        return f"kaiojit {rt.backend()} device {self.id}".encode()

    @property
    def uuid(self) -> str:
        return f"GPU-kaiojit-{rt.backend()}-{self.id}"

    def get_device_identity(self) -> dict:
        return {"pci_domain_id": 0, "pci_bus_id": self.id, "pci_device_id": 0}

    def reset(self) -> None:
        rt.synchronize()

    def __enter__(self):
        self._old = rt.get_backend().current_device()
        rt.select_device(self.id)
        return self

    def __exit__(self, *exc) -> None:
        rt.select_device(self._old)

    def __repr__(self) -> str:
        return f"<CUDA device {self.id} '{self.name.decode()}'>"


class _Gpus:
    """``cuda.gpus``: the devices, indexable and iterable; ``cuda.gpus.current``."""

    def __len__(self) -> int:
        return rt.device_count()

    def __getitem__(self, index: int) -> Device:
        if not 0 <= index < len(self):
            raise IndexError(f"no device {index}: {len(self)} device(s)")
        return Device(index)

    def __iter__(self):
        return (Device(i) for i in range(len(self)))

    @property
    def current(self) -> Device:
        return get_current_device()


gpus = _Gpus()


def get_current_device() -> Device:
    return Device(rt.get_backend().current_device())


def select_device(device_id: int) -> Device:
    rt.select_device(device_id)
    return Device(device_id)


def list_devices() -> list[Device]:
    return list(gpus)


class Context:
    """numba's context object: the device it is on and its memory info."""

    def __init__(self, device: Device):
        self.device = device

    def get_memory_info(self) -> tuple[int, int]:
        limits = rt.get_backend().device_limits()
        total = int(getattr(limits, "total_memory", 0) or 0)
        return total, total

    def synchronize(self) -> None:
        rt.synchronize()

    def reset(self) -> None:
        rt.synchronize()


def current_context(devnum: int | None = None) -> Context:
    return Context(get_current_device() if devnum is None else Device(devnum))


def require_context(fn):
    return fn


def close() -> None:
    """numba releases the context here; kaiojit keeps it and waits for the device."""
    rt.synchronize()


def is_available() -> bool:
    """Whether kernels can run: a CUDA device, or the cpu backend (docs/porting.md)."""
    try:
        return rt.get_backend().name in ("cuda", "cpu")
    except Exception:  # noqa: BLE001  a backend that cannot start: no kernels run
        return False


def is_supported_version() -> bool:
    return True


def detect() -> bool:
    """Print the devices kernels run on (numba's ``cuda.detect()``); True if there are any."""
    n = len(gpus)
    print(f"Found {n} CUDA devices")
    for d in gpus:
        cc = ".".join(str(x) for x in d.compute_capability)
        print(f"id {d.id}    {d.name.decode()}    [SUPPORTED]")
        print(f"                      Compute Capability: {cc}")
    print(f"Summary:\n\t{n}/{n} devices are supported")
    return n > 0


@contextlib.contextmanager
def defer_cleanup():
    yield


def profile_start() -> None:
    pass


def profile_stop() -> None:
    pass


@contextlib.contextmanager
def profiling():
    yield


# --- memory -------------------------------------------------------------------------------------

def to_device(obj: Any, stream: Any = 0, copy: bool = True, to: Any = None) -> rt.DeviceArray:
    return as_numba_array(rt.to_device(obj, stream=stream or None, copy=copy, to=to))


def device_array(shape, dtype=np.float64, strides=None, order: str = "C", stream: Any = 0):
    return as_numba_array(rt.device_array(shape, dtype, order=order, stream=stream or None))


def device_array_like(ary, stream: Any = 0):
    return as_numba_array(rt.device_array_like(ary, stream=stream or None))


def _host_array(shape, dtype, strides, order, raw=None) -> np.ndarray:
    """A host array; ``raw(nbytes)``, where given, makes the byte buffer it lies in."""
    dtype = np.dtype(dtype)
    if strides is not None:
        span = sum((n - 1) * s for n, s in zip(np.atleast_1d(shape), strides)) + dtype.itemsize
        buffer = (raw or _bytes)(max(span, 0))
        return np.ndarray(shape, dtype, buffer=buffer, strides=strides)
    if raw is None:
        return np.empty(shape, dtype, order=order)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return np.ndarray(shape, dtype, buffer=raw(nbytes), order=order)


def _bytes(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, np.uint8)


class _HostVisibleMemory:
    """Memory host and GPU address at one pointer (the cuda backend's managed or mapped host
    memory), freed when the last array over it goes; NumPy reads it as bytes."""

    def __init__(self, backend: Any, nbytes: int, managed: bool):
        self.backend, self.managed = backend, managed
        self.ptr = backend.alloc_host_visible(nbytes, managed)
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 3,
                                    "data": (self.ptr, False)}

    def __del__(self) -> None:
        self.backend.free_host_visible(self.ptr, self.managed)


def pinned_array(shape, dtype=np.float64, strides=None, order: str = "C") -> np.ndarray:
    """A host array (numba's is page-locked; kaiojit's copies accept pageable memory)."""
    return _host_array(shape, dtype, strides, order)


def _mapped(shape, dtype, strides, order, stream: Any, managed: bool) -> MappedNDArray:
    """numba's mapped or managed array: on the cpu backend a host array (its memory is the
    device's), on a GPU one in memory the GPU addresses (kernels take it without a copy)."""
    backend = rt.get_backend()
    if not hasattr(backend, "alloc_host_visible"):
        array = _host_array(shape, dtype, strides, order).view(MappedNDArray)
    else:
        memories = []

        def raw(nbytes: int) -> np.ndarray:
            memories.append(_HostVisibleMemory(backend, nbytes, managed))
            return np.asarray(memories[-1])

        array = _host_array(shape, dtype, strides, order, raw).view(MappedNDArray)
        start = memories[0].ptr
        array.gpu_visible = (start, start + memories[0].__array_interface__["shape"][0])
    array.stream = stream
    return array


def mapped_array(shape, dtype=np.float64, strides=None, order: str = "C", stream: Any = 0,
                 portable: bool = False, wc: bool = False) -> np.ndarray:
    """A host array kernels take without a copy (page-locked host memory mapped into the
    GPU; on the cpu backend host memory is the device's: ``MappedNDArray``)."""
    return _mapped(shape, dtype, strides, order, stream, managed=False)


def managed_array(shape, dtype=np.float64, strides=None, order: str = "C", stream: Any = 0,
                  attach_global: bool = True) -> np.ndarray:
    """Memory both sides use (CUDA managed memory; on the cpu backend a host array)."""
    return _mapped(shape, dtype, strides, order, stream, managed=True)


def pinned_array_like(ary) -> np.ndarray:
    return pinned_array(ary.shape, ary.dtype, order="F" if _is_f(ary) else "C")


def mapped_array_like(ary, stream: Any = 0, portable: bool = False, wc: bool = False):
    return mapped_array(ary.shape, ary.dtype, order="F" if _is_f(ary) else "C")


def managed_array_like(ary, stream: Any = 0, attach_global: bool = True):
    return managed_array(ary.shape, ary.dtype, order="F" if _is_f(ary) else "C")


def _is_f(ary) -> bool:
    from ..runtime.memory import like_order

    return like_order(ary) == "F"


@contextlib.contextmanager
def pinned(*arylist):
    """numba page-locks the arrays for the block; kaiojit copies from pageable memory."""
    yield


@contextlib.contextmanager
def mapped(*arylist, stream: Any = 0):
    """Device views of host arrays for the block; written back when it ends."""
    devarys = [rt.to_device(a, stream=stream or None) for a in arylist]
    try:
        yield devarys[0] if len(devarys) == 1 else devarys
    finally:
        for host, dev in zip(arylist, devarys):
            dev.copy_to_host(host, stream=stream or None)


# --- foreign arrays -----------------------------------------------------------------------------

def is_cuda_array(obj: Any) -> bool:
    """Whether ``obj`` exports ``__cuda_array_interface__``."""
    return hasattr(obj, "__cuda_array_interface__")


def as_cuda_array(obj: Any, sync: bool = True) -> DeviceNDArray:
    """A device array viewing ``obj``'s memory, ``obj`` kept alive; made on the stream the
    interface names, synchronized on it first unless ``sync`` is False (or numba's
    ``config.CUDA_ARRAY_INTERFACE_SYNC`` is)."""
    if not is_cuda_array(obj):
        raise TypeError("*obj* doesn't implement the cuda array interface.")
    if obj.__cuda_array_interface__.get("mask") is not None:
        raise NotImplementedError("Masked arrays are not supported")
    return as_device_array(obj, DeviceNDArray, sync)


class _Interface:
    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, desc: dict, owner: Any):
        self.__cuda_array_interface__ = desc
        self.owner = owner


def from_cuda_array_interface(desc: dict, owner: Any = None, sync: bool = True):
    """A device array viewing the memory a CUDA array interface dict describes."""
    return as_cuda_array(_Interface(desc, owner), sync)


def is_float16_supported() -> bool:
    return True


def is_bfloat16_supported() -> bool:
    return True
