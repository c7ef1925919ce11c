"""numba.cuda.devicearray: the device array classes under numba's names and ``auto_device``,
the conversion a launch applies to a host argument.

The arrays the ``cuda`` namespace makes are :class:`DeviceNDArray`, kaiojit's
:class:`~kaiojit.runtime.DeviceArray` with numba's protocol: they export
``__cuda_array_interface__`` on every backend. On the cpu backend their memory is host memory,
the memory its kernels run on, so the interface's pointer is valid for every kernel kaiojit
runs there, as the pointers of numba's simulator's arrays are for the simulator; ``kj.``'s
arrays keep exporting only the host's interfaces there (docs/porting.md says why and what
that means for PyTorch and CuPy).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..runtime import DeviceArray
from ..runtime.backend import get_backend
from ..runtime.stream import stream_handle


class DeviceNDArray(DeviceArray):
    """numba's device array: a :class:`DeviceArray` exporting ``__cuda_array_interface__``
    on the cpu backend too, with numba's ``device_ctypes_pointer`` (a ``ctypes.c_void_p``)."""

    __slots__ = ()
    cai_on_host = True

    @property
    def device_ctypes_pointer(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.ptr if self.size else 0)

    @property
    def T(self) -> DeviceArray:  # NumPy's name
        return self.transpose()

    def transpose(self, axes: Any = None) -> DeviceArray:
        """numba's: a 2-D array's transpose is a new C-contiguous array the transpose kernel
        fills (not a view, as NumPy's is); any other rank's is the view ``kj``'s ``.T`` is
        (numba refuses those)."""
        if axes is not None and tuple(axes) == tuple(range(self.ndim)):
            return self
        if axes is not None and sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"invalid axes list {axes!r}")
        if self.ndim != 2:
            return DeviceArray.T.fget(self)
        from .kernels.transpose import transpose

        return transpose(self)


DeviceRecord = DeviceNDArray


def as_numba_array(array: DeviceArray) -> DeviceNDArray:
    """``array`` (made by kaiojit's runtime for the ``cuda`` namespace) as a
    :class:`DeviceNDArray`: the same object, its class changed (the two share one layout)."""
    if type(array) is DeviceArray:
        array.__class__ = DeviceNDArray
    return array


class MappedNDArray(np.ndarray):
    """numba's mapped (and managed) host array: a NumPy array in memory the device addresses
    at the same pointer (on a GPU mapped page-locked or managed memory, ``gpu_visible`` its
    byte range; on the cpu backend host memory), exporting ``__cuda_array_interface__``. A
    copy or a result computed from it is host memory the GPU cannot address: no interface."""

    def __array_finalize__(self, obj: Any) -> None:
        self.stream = getattr(obj, "stream", 0)
        self.gpu_visible = getattr(obj, "gpu_visible", None)

    @property
    def __cuda_array_interface__(self) -> dict:
        backend = get_backend()
        if backend.name != "cpu" and not self._in_gpu_memory():
            raise AttributeError(f"this array is a copy in pageable host memory, not the "
                                 f"mapped or managed memory the {backend.name} backend's "
                                 "kernels address")
        contiguous = self.flags["C_CONTIGUOUS"]
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.ctypes.data if self.size else 0, False),
                "strides": None if contiguous else self.strides, "version": 3,
                "stream": stream_handle(self.stream) or None}


    def _in_gpu_memory(self) -> bool:
        if self.gpu_visible is None:
            return False
        start, end = self.gpu_visible
        return self.size == 0 or start <= self.ctypes.data < end


ManagedNDArray = MappedNDArray


def from_array_like(ary: Any, stream: Any = 0, gpu_data: Any = None) -> DeviceNDArray:
    """numba's: an uninitialized device array with ``ary``'s shape, dtype and order."""
    from ..runtime import device_array_like

    return as_numba_array(device_array_like(ary, stream=stream or None))


def is_cuda_ndarray(obj: Any) -> bool:
    return isinstance(obj, DeviceArray)


def auto_device(obj: Any, stream: Any = 0, copy: bool = True, user_explicit: bool = False):
    """``(device array, whether it was copied)``: a device array as it is, anything else
    (a NumPy array, a scalar: a 0-d array) copied to the device. A host array that is not
    contiguous is a ValueError, as numba's: it is not one memory region to copy."""
    from ..runtime import to_device

    if isinstance(obj, DeviceArray):
        return obj, False
    arr = np.asarray(obj)
    if arr.ndim and not (arr.flags["C_CONTIGUOUS"] or arr.flags["F_CONTIGUOUS"]):
        raise ValueError("Array contains non-contiguous buffer and cannot be transferred as "
                         "a single memory region; make it contiguous first "
                         "(np.ascontiguousarray)")
    return as_numba_array(to_device(arr, stream=stream or None, copy=copy)), True
