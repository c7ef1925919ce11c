"""numba.cuda.devicearray: the device array class under numba's names and ``auto_device``,
the conversion a launch applies to a host argument."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import DeviceArray
from .host import to_device

DeviceNDArray = DeviceArray
DeviceRecord = DeviceArray


def is_cuda_ndarray(obj: Any) -> bool:
    return isinstance(obj, DeviceArray)


def auto_device(obj: Any, stream: Any = 0, copy: bool = True, user_explicit: bool = False):
    """``(device array, whether it was copied)``: a device array as it is, anything else
    (a NumPy array, a scalar: a 0-d array) copied to the device. A host array that is not
    contiguous is a ValueError, as numba's: it is not one memory region to copy."""
    if isinstance(obj, DeviceArray):
        return obj, False
    arr = np.asarray(obj)
    if arr.ndim and not (arr.flags["C_CONTIGUOUS"] or arr.flags["F_CONTIGUOUS"]):
        raise ValueError("Array contains non-contiguous buffer and cannot be transferred as "
                         "a single memory region; make it contiguous first "
                         "(np.ascontiguousarray)")
    return to_device(arr, stream, copy=copy), True
