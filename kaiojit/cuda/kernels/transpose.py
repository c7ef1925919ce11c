"""numba's ``cuda.kernels.transpose.transpose(a, b=None)``: ``b = a.T`` of a 2-D device array,
computed by a kernel (tiles of 32 x 32 elements through shared memory, the tile padded by one
column so that the column reads do not collide on a bank). Records, which a kernel cannot
assign whole, are moved as their bytes."""

from __future__ import annotations

from typing import Any

import numpy as np

import kaiojit as kj

TILE = 32


@kj.jit
def _transpose_tiled(src, dst):
    tile = kj.shared.array((TILE, TILE + 1), src.dtype)
    bx = kj.blockIdx.x * TILE
    by = kj.blockIdx.y * TILE
    tx = kj.threadIdx.x
    ty = kj.threadIdx.y
    if by + ty < src.shape[0] and bx + tx < src.shape[1]:
        tile[ty, tx] = src[by + ty, bx + tx]
    kj.syncthreads()
    if bx + ty < dst.shape[0] and by + tx < dst.shape[1]:
        dst[bx + ty, by + tx] = tile[tx, ty]


@kj.jit
def _transpose_bytes(src, dst):
    i, j = kj.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        for k in range(src.shape[2]):
            dst[j, i, k] = src[i, j, k]


def _as_bytes(a: kj.DeviceArray) -> kj.DeviceArray:
    """The array as ``(rows, cols, itemsize)`` bytes: the same memory."""
    return kj.DeviceArray(a.shape + (a.dtype.itemsize,), a.strides + (1,), np.uint8, a.ptr,
                          a.device_id, a, a.backend)


def transpose(a: Any, b: Any = None) -> kj.DeviceArray:
    """``a`` transposed into ``b`` (a new device array of ``a``'s class if None: numba's for
    numba's), on the stream ``a`` was made on; returns ``b``."""
    if a.ndim != 2:
        raise ValueError(f"transpose needs a 2-D array, got {a.ndim} dimensions")
    if b is None:
        b = kj.device_array(a.shape[::-1], a.dtype, stream=a.stream or None)
        if isinstance(a, kj.DeviceArray):
            b.__class__ = type(a)  # the same layout: numba's DeviceNDArray stays one
    if tuple(b.shape) != a.shape[::-1] or b.dtype != a.dtype:
        raise ValueError(f"transpose: b is {tuple(b.shape)} {b.dtype}, a.T is "
                         f"{a.shape[::-1]} {a.dtype}")
    stream = a.stream or 0
    rows, cols = a.shape
    if a.dtype.fields is not None:
        grid = (-(-rows // 16), -(-cols // 16))
        _transpose_bytes[grid, (16, 16), stream](_as_bytes(a), _as_bytes(b))
    else:
        grid = (-(-cols // TILE), -(-rows // TILE))
        _transpose_tiled[grid, (TILE, TILE), stream](a, b)
    return b
