"""Device memory: :class:`DeviceArray` and the functions that make one.

All memory goes through the active backend's ``alloc``/``free``/``memcpy_*`` methods, so the
cpu and mock backends back arrays with host memory. An array frees its allocation when it is
collected (never at interpreter exit, when the context may already be gone). Views (slices,
wrappers of foreign CAI or DLPack arrays) keep their owner alive instead of owning memory.
"""

from __future__ import annotations

import math
import struct
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from kaiojit import types as kt
from kaiojit.errors import KaiojitError, user_facing
from kaiojit.runtime import dlpack
from kaiojit.runtime.backend import GpuBackend, get_backend
from kaiojit.runtime.graph import forbid_in_capture
from kaiojit.runtime.layout import (
    alignment, array_type, contiguous_strides, launch_tag, layout_of,
)
from kaiojit.runtime.stream import stream_handle


_U64 = 0xFFFFFFFFFFFFFFFF
# Kernels index with int64 byte offsets: an array of more bytes than int64 holds could not be
# addressed without wrapping, whatever the device (and no device has that much memory).
MAX_ARRAY_BYTES = (1 << 63) - 1

# a bad shape, dtype or array given to the functions users call: shown at their line
_BAD_INPUT = (KaiojitError, TypeError, ValueError)


def _normalize_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"shape {shape} has a negative dimension")
    if any(n > MAX_ARRAY_BYTES for n in shape):
        raise ValueError(f"shape {shape} has an extent past int64, the type kernels read "
                         "extents as")
    return shape


def array_nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes of a contiguous array, computed with Python ints (no int64 wrap); a
    ``ValueError`` past :data:`MAX_ARRAY_BYTES`."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise ValueError(f"an array of shape {shape} and dtype {dtype} would take {nbytes} "
                         f"bytes, more than a kernel can address (2**63 - 1 bytes)")
    return nbytes


class _Allocation:
    """Owns one device allocation; frees it when the last array using it is collected."""

    __slots__ = ("ptr", "nbytes", "device", "__weakref__")

    def __init__(self, backend: GpuBackend, nbytes: int, what: str = ""):
        forbid_in_capture(f"allocating {nbytes} bytes of device memory")
        try:
            self.ptr = backend.alloc(nbytes)
        except (MemoryError, OverflowError) as e:  # the host's (cpu, mock) malloc failed
            raise MemoryError(f"cannot allocate {nbytes} bytes{what} on the {backend.name} "
                              f"backend ({e})") from None
        self.nbytes = nbytes
        self.device = backend.current_device()
        fin = weakref.finalize(self, _free, backend, self.ptr, self.device)
        fin.atexit = False


def _free(backend: GpuBackend, ptr: int, device: int) -> None:
    if backend.closing:
        return
    try:
        backend.free(ptr, device)
    except Exception:  # a poisoned context cannot free; the process is going down anyway
        pass


class ArrayFlags(dict):
    """NumPy's flags of an array: ``flags["C_CONTIGUOUS"]`` and ``flags.c_contiguous``."""

    def __getattr__(self, name: str) -> bool:
        try:
            return self[name.upper()]
        except KeyError:
            raise AttributeError(name) from None


class DeviceArray:
    """An N-d array in device memory (or a view of one), NumPy-like in its metadata.

    Besides NumPy's metadata it carries what launches read: ``ptr``, ``device_id``, the
    ``backend`` that owns the memory, ``kaiojit_type`` (the array type signatures specialize
    on) and ``launch_info`` (:data:`kaiojit.runtime.interop.ArrayInfo`, ready-made).
    """

    __slots__ = ("shape", "strides", "dtype", "size", "nbytes", "ndim", "ptr", "device_id",
                 "backend", "kaiojit_type", "launch_info", "launch_tag", "launch_bytes", "_owner",
                 "stream", "__weakref__")

    def __init__(self, shape: Sequence[int], strides: Sequence[int] | None, dtype: Any,
                 ptr: int, device: int, owner: Any, backend: GpuBackend):
        self.dtype = np.dtype(dtype)
        scalar = kt.from_dtype(self.dtype)
        self.shape = tuple(int(n) for n in shape)
        itemsize = self.dtype.itemsize
        self.strides = (tuple(int(s) for s in strides) if strides is not None
                        else contiguous_strides(self.shape, itemsize))
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * itemsize
        self.ptr = int(ptr)
        self.device_id = device
        self.backend = backend
        self._owner = owner
        self.stream = 0  # the stream it was made on (numba's .stream; CAI's "stream")
        layout = layout_of(self.shape, self.strides, itemsize)
        align = alignment(self.ptr, self.shape, self.strides, itemsize, layout)
        self.kaiojit_type = array_type(scalar, self.ndim, layout, align)
        self.launch_info = (self.ptr, self.shape, self.strides if layout == "A" else None,
                            self.kaiojit_type, device)
        self.launch_tag = launch_tag(self.kaiojit_type, device, backend)
        # the parameter slots of this array (pointer, shape, 'A': strides), as a launch writes them
        words = (self.ptr, *self.shape, *(self.strides if layout == "A" else ()))
        self.launch_bytes = struct.pack(f"<{len(words)}Q", *(w & _U64 for w in words))

    # --- metadata ---------------------------------------------------------------------------

    @property
    def device_ctypes_pointer(self) -> int:
        return self.ptr

    @property
    def is_c_contiguous(self) -> bool:
        return self.kaiojit_type.layout == "C"

    @property
    def is_f_contiguous(self) -> bool:
        layout = self.kaiojit_type.layout
        return layout == "F" or (self.ndim <= 1 and layout == "C")

    @property
    def flags(self) -> ArrayFlags:
        """NumPy's contiguity flags, as numba's device arrays have them."""
        return ArrayFlags(C_CONTIGUOUS=self.is_c_contiguous, F_CONTIGUOUS=self.is_f_contiguous)

    @property
    def T(self) -> DeviceArray:  # noqa: N802  NumPy's name
        """The transpose: a view with the axes reversed."""
        return type(self)(self.shape[::-1], self.strides[::-1], self.dtype, self.ptr,
                          self.device_id, self, self.backend)

    @property
    def alloc_size(self) -> int:
        """Bytes the array spans (numba's name)."""
        return self.nbytes

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<kj.DeviceArray shape={self.shape} dtype={self.dtype} "
                f"device={self.device_id} ptr=0x{self.ptr:x}>")

    # --- interop exports ------------------------------------------------------------------

    # Whether the cpu backend's arrays (host memory) export __cuda_array_interface__ too:
    # kj's do not (torch and CuPy would take the pointer for CUDA memory); numba's namespace's
    # do, as numba's simulator's arrays do (kaiojit.cuda.devicearray, docs/porting.md).
    cai_on_host = False

    @property
    def is_host_memory(self) -> bool:
        """Whether the memory is the host's, for kernels the host runs (the cpu backend): it
        is then exported as host memory (``__array_interface__``, DLPack's CPU device), never
        as CUDA memory. (The mock backend's host buffers stand for CUDA memory.)"""
        return self.backend.name == "cpu"

    def _interface(self) -> dict:
        contiguous = self.kaiojit_type.layout == "C"
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr if self.size else 0, False),  # CAI: 0 for no elements
            "strides": None if contiguous else self.strides,
            "version": 3,
        }

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.is_host_memory and not self.cai_on_host:
            raise AttributeError("a DeviceArray of the cpu backend is host memory: it has "
                                 "__array_interface__ and __dlpack__ (a CPU device), not "
                                 "__cuda_array_interface__")
        # the stream it was made on, so consumers synchronize on it (None: the default)
        return {**self._interface(), "stream": stream_handle(self.stream) or None}

    @property
    def __array_interface__(self) -> dict:
        if not self.is_host_memory:
            raise AttributeError("a DeviceArray in device memory has no __array_interface__; "
                                 "copy_to_host() makes a NumPy array of it")
        self._exported()
        return self._interface()

    def _exported(self) -> None:
        """Other code may write this memory now: the checked mode's initcheck of it ends."""
        unwritten = getattr(self.backend, "unwritten", None)
        if unwritten:
            unwritten.forget(self.ptr)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        if copy:
            raise BufferError("kaiojit's __dlpack__ does not copy")
        self._exported()
        return dlpack.to_dlpack_capsule(self, self.backend.dlpack_device_type())

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.backend.dlpack_device_type(), self.device_id

    # --- copies -----------------------------------------------------------------------------

    def _span(self) -> tuple[int, int]:
        """Byte offsets (relative to ``ptr``) of the lowest and one past the highest element."""
        if self.size == 0:
            return 0, 0
        lo = sum(s * (n - 1) for s, n in zip(self.strides, self.shape) if s < 0)
        hi = sum(s * (n - 1) for s, n in zip(self.strides, self.shape) if s > 0)
        return lo, hi + self.dtype.itemsize

    @user_facing(errors=_BAD_INPUT)
    def copy_to_host(self, out: np.ndarray | None = None, stream: Any = None) -> np.ndarray:
        """Copy to a NumPy array (``out`` or a new one). With a stream the copy is
        asynchronous on it: ``out`` is valid once the stream is synchronized."""
        handle = None if stream is None else stream_handle(stream)
        if out is None:
            order = "F" if self.kaiojit_type.layout == "F" else "C"
            out = np.empty(self.shape, self.dtype, order=order)
        self._check_host_peer(out)
        lo, hi = self._span()
        if self.kaiojit_type.layout != "A" and out.strides == self.strides:
            self.backend.memcpy_dtoh(out.ctypes.data, self.ptr, self.nbytes, handle)
            return out
        staging = np.empty(hi - lo, np.uint8)
        self.backend.memcpy_dtoh(staging.ctypes.data, self.ptr + lo, hi - lo, None)
        out[...] = _strided_view(staging, -lo, self.shape, self.strides, self.dtype)
        return out

    @user_facing(errors=_BAD_INPUT)
    def copy_to_device(self, ary: Any, stream: Any = None) -> None:
        """Copy a NumPy array (or another DeviceArray of the same shape) into this array."""
        handle = None if stream is None else stream_handle(stream)
        if isinstance(ary, DeviceArray):
            if ary.shape != self.shape or ary.dtype != self.dtype:
                raise ValueError(f"copy_to_device: got {ary.shape} {ary.dtype}, this array is "
                                 f"{self.shape} {self.dtype}")
            if ary.strides == self.strides and self.kaiojit_type.layout != "A":
                self.backend.memcpy_dtod(self.ptr, ary.ptr, self.nbytes, handle)
                return
            ary = ary.copy_to_host()
        host = np.asarray(ary, dtype=self.dtype)
        if host.shape != self.shape:
            host = np.broadcast_to(host, self.shape)
        if self.kaiojit_type.layout != "A" and host.strides == self.strides:
            # From pageable memory the driver stages the bytes before returning, so ``host``
            # may be dropped even when the copy is asynchronous.
            self.backend.memcpy_htod(self.ptr, host.ctypes.data, self.nbytes, handle)
            return
        lo, hi = self._span()
        staging = np.empty(hi - lo, np.uint8)
        self.backend.memcpy_dtoh(staging.ctypes.data, self.ptr + lo, hi - lo, None)
        _strided_view(staging, -lo, self.shape, self.strides, self.dtype)[...] = host
        self.backend.memcpy_htod(self.ptr + lo, staging.ctypes.data, hi - lo, None)

    def _check_host_peer(self, out: np.ndarray) -> None:
        if out.shape != self.shape or out.dtype != self.dtype:
            raise ValueError(f"copy_to_host: out is {out.shape} {out.dtype}, this array is "
                             f"{self.shape} {self.dtype}")

    def copy_to_host_async(self, stream: Any) -> np.ndarray:
        return self.copy_to_host(stream=stream)

    # --- views --------------------------------------------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        """Basic indexing: integers and slices give a view; all-integer indexing a scalar."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) > self.ndim:
            raise IndexError(f"too many indices for a {self.ndim}-d array")
        offset, shape, strides = 0, [], []
        for dim, idx in enumerate(index):
            n, s = self.shape[dim], self.strides[dim]
            if isinstance(idx, slice):
                start, stop, step = idx.indices(n)
                length = len(range(start, stop, step))
                offset += start * s
                shape.append(length)
                strides.append(s * step)
            elif isinstance(idx, (int, np.integer)):
                i = int(idx)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
                offset += (i % n) * s
            else:
                raise TypeError(f"DeviceArray supports integers and slices, got {idx!r}")
        shape += self.shape[len(index):]
        strides += self.strides[len(index):]
        ptr = self.ptr + offset if self.size else self.ptr
        view = type(self)(shape, strides, self.dtype, ptr, self.device_id, self, self.backend)
        if not shape:
            return view.copy_to_host()[()]
        return view

    def __setitem__(self, index: Any, value: Any) -> None:
        index = index if isinstance(index, tuple) else (index,)
        full = len(index) == self.ndim and all(isinstance(i, (int, np.integer)) for i in index)
        target = self._scalar_view(index) if full else self[index]
        target.copy_to_device(value)

    def _scalar_view(self, index: tuple) -> DeviceArray:
        offset = sum((int(i) % n) * s for i, n, s in zip(index, self.shape, self.strides))
        return type(self)((), (), self.dtype, self.ptr + offset, self.device_id, self,
                          self.backend)

    def reshape(self, *shape: Any) -> DeviceArray:
        """A view of another shape (C-contiguous arrays); one extent may be -1, the one the
        size implies, as in NumPy and numba."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        shape = tuple(int(n) for n in shape)
        if shape.count(-1) > 1:
            raise ValueError(f"cannot reshape into {shape}: only one extent can be -1")
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape an array of size {self.size} into {shape}")
            shape = tuple(self.size // known if n == -1 else n for n in shape)
        shape = _normalize_shape(shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape an array of size {self.size} into {shape}")
        if self.kaiojit_type.layout != "C":
            raise ValueError("reshape needs a C-contiguous array")
        return type(self)(shape, None, self.dtype, self.ptr, self.device_id, self, self.backend)

    def ravel(self) -> DeviceArray:
        return self.reshape(self.size)


def _strided_view(buffer: np.ndarray, origin: int, shape: tuple, strides: tuple,
                  dtype: np.dtype) -> np.ndarray:
    """An ndarray over ``buffer`` whose element 0 sits at byte ``origin``."""
    return np.ndarray(shape, dtype, buffer=buffer, offset=origin, strides=strides)


# --- making arrays ------------------------------------------------------------------------------

@user_facing(errors=_BAD_INPUT)
def device_array(shape: int | Sequence[int], dtype: Any = np.float64, order: str = "C",
                 stream: Any = None) -> DeviceArray:
    """An uninitialized array on the current device."""
    backend = get_backend()
    shape = _normalize_shape(shape)
    try:
        dtype = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"device_array: dtype {dtype!r} is not a NumPy dtype ({e})") from None
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    strides = contiguous_strides(shape, dtype.itemsize, order)
    nbytes = array_nbytes(shape, dtype)
    allocation = _Allocation(backend, nbytes, f" for an array of shape {shape} and dtype {dtype}")
    array = DeviceArray(shape, strides, dtype, allocation.ptr, allocation.device, allocation,
                        backend)
    if stream is not None:
        array.stream = stream
    return array


def like_order(a: Any) -> str:
    """The order of an array made like ``a``, as NumPy's ``empty_like`` (order 'K') takes
    it: C unless ``a`` is F-contiguous, or, not contiguous, has its strides growing along
    its dimensions (an F array's view)."""
    if isinstance(a, DeviceArray):
        layout = a.kaiojit_type.layout
        if layout != "A":
            return layout
    else:
        flags = getattr(a, "flags", None)
        if flags is None or flags["C_CONTIGUOUS"]:
            return "C"
        if flags["F_CONTIGUOUS"]:
            return "F"
    strides = [abs(s) for s, n in zip(a.strides, a.shape) if n > 1]
    return "F" if len(strides) > 1 and strides == sorted(strides) and \
        strides[0] != strides[-1] else "C"


@user_facing(errors=_BAD_INPUT)
def device_array_like(a: Any, stream: Any = None) -> DeviceArray:
    """An uninitialized array with the shape and dtype of ``a``, in the order NumPy's
    ``empty_like`` would give it (:func:`like_order`)."""
    return device_array(a.shape, a.dtype, order=like_order(a), stream=stream)


@user_facing(errors=_BAD_INPUT)
def to_device(ary: Any, stream: Any = None, copy: bool = True, to: DeviceArray | None = None
              ) -> DeviceArray:
    """Copy a NumPy array (or anything ``np.asarray`` takes) to the current device."""
    if isinstance(ary, DeviceArray) and to is None:
        return ary
    host = np.asarray(ary)
    try:
        kt.from_dtype(host.dtype)
    except TypeError as e:
        raise TypeError(f"to_device: the array has dtype {host.dtype}: {e}; give an array of "
                        "numbers, bools or records of them") from None
    if not (host.flags.c_contiguous or host.flags.f_contiguous):
        host = np.ascontiguousarray(host)
    target = to if to is not None else device_array_like(host, stream=stream)
    target.copy_to_device(host, stream=stream)
    return target
