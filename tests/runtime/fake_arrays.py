"""Stand-ins for PyTorch tensors and CuPy arrays over DeviceArrays: what kaiojit's interop and
fast launch read of them, so their launch paths run on the mock backend without either
library. Each attribute can be changed between launches (device, dtype, contiguity)."""

from __future__ import annotations

import numpy as np


class TorchDtype:
    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


TORCH_DTYPES = {np.dtype(np.float32): TorchDtype("float32"),
                np.dtype(np.float64): TorchDtype("float64")}


class Tensor:
    """What kaiojit reads of a ``torch.Tensor``: dtype, get_device, is_contiguous, data_ptr,
    shape and stride (element strides)."""

    def __init__(self, array, dtype: TorchDtype | None = None, device: int | None = None,
                 contiguous: bool = True):
        self.array = array
        self.dtype = TORCH_DTYPES[np.dtype(array.dtype)] if dtype is None else dtype
        self.device = array.device_id if device is None else device
        self.contiguous = contiguous

    def get_device(self) -> int:
        return self.device

    def is_contiguous(self) -> bool:
        return self.contiguous

    def data_ptr(self) -> int:
        return self.array.ptr

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
