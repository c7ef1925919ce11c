"""``kj.TensorMap``: a CUtensorMap for the bulk tensor copy engine (TMA), by value to kernels.

Dimensions, boxes and element strides are given in the array's own order (like ``shape``);
the driver wants them innermost first, and gets them reversed. The constraints of
``cuTensorMapEncodeTiled`` are checked here first, so a broken one is a ``ValueError`` that
names it rather than a bare CUDA_ERROR_INVALID_VALUE.

A map carries its kernel-visible type, ``tensormap(dtype, ndim)``: a launch with a map whose
element type or rank differs from the kernel parameter's is a ``TypeError`` naming the
parameter. Encoding is cached: the same array geometry, box and options on the same backend
give the same 128 bytes without asking the encoder again.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from kaiojit import types as kt
from kaiojit.runtime.backend import get_backend
from kaiojit.runtime.interop import array_info
from kaiojit.runtime.layout import contiguous_strides

_DTYPES = {
    "uint8": "UINT8", "int8": "UINT8", "bool": "UINT8", "uint16": "UINT16", "int16": "UINT16",
    "uint32": "UINT32", "int32": "INT32", "uint64": "UINT64", "int64": "INT64",
    "float16": "FLOAT16", "float32": "FLOAT32", "float64": "FLOAT64", "bfloat16": "BFLOAT16",
    "float8_e4m3fn": "UINT8", "float8_e5m2": "UINT8",  # fp8: bytes to the copy engine
}
_ITEMSIZE = {"UINT8": 1, "UINT16": 2, "UINT32": 4, "INT32": 4, "UINT64": 8, "INT64": 8,
             "FLOAT16": 2, "FLOAT32": 4, "FLOAT64": 8, "BFLOAT16": 2}
_SWIZZLE_BYTES = {None: 0, "none": 0, 32: 32, 64: 64, 128: 128, "32B": 32, "64B": 64,
                  "128B": 128}
_INTERLEAVE_BYTES = {None: 0, "none": 0, 16: 16, 32: 32, "16B": 16, "32B": 32}
_L2_PROMOTION = {None: "NONE", "none": "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B",
                 "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
_OOB_FILL = {None: "NONE", "none": "NONE", "zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}

# encoded maps by everything the bytes depend on; a hit skips validation and the encoder
_ENCODED: dict[tuple, bytes] = {}
_ENCODED_LIMIT = 4096


def _choice(table: dict, value: Any, what: str) -> Any:
    try:
        return table[value]
    except (KeyError, TypeError):
        options = ", ".join(repr(k) for k in table if k is not None)
        raise ValueError(f"{what} must be None or one of {options}; got {value!r}") from None


class TensorMap:
    """128 bytes of CUtensorMap (``.bytes``); pass it to a kernel parameter of type tensormap.

    ``type`` is ``tensormap(dtype, ndim)`` for maps made by :meth:`tiled`, and the bare
    ``tensormap`` (which matches any parameter) for maps made from raw bytes.
    """

    __slots__ = ("bytes", "array", "box", "dtype", "type")

    def __init__(self, data: bytes, array: Any = None, box: tuple[int, ...] = (),
                 dtype: kt.ScalarType | None = None, ndim: int | None = None):
        if len(data) != 128:
            raise ValueError(f"a CUtensorMap is 128 bytes, got {len(data)}")
        self.bytes = bytes(data)
        self.array = array  # keeps the global memory alive as long as the map
        self.box = box
        self.dtype = dtype
        self.type = (kt.TensorMapType(dtype, ndim) if dtype is not None and ndim is not None
                     else kt.tensormap)

    @classmethod
    def tiled(cls, array: Any, box: Sequence[int], swizzle: Any = None, interleave: Any = None,
              l2_promotion: Any = None, oob_fill: Any = None,
              element_strides: Sequence[int] | None = None) -> TensorMap:
        """A tiled map of ``array`` (a device array of 1 to 5 dimensions, innermost contiguous)
        that copies boxes of shape ``box``.

        ``swizzle``: None, '32B', '64B' or '128B'; ``interleave``: None, '16B' or '32B';
        ``l2_promotion``: None, '64B', '128B' or '256B'; ``oob_fill``: None or 'zero' (elements
        outside the array load as zeros) or 'nan' (as NaN; floating-point arrays only);
        ``element_strides``: the traversal stride of each dimension (1 to 8, default 1).

        A store through the map writes whole 16-byte chunks: where a row's size in bytes is no
        multiple of 16, a box over its right edge also writes the row's padding up to the next
        16-byte boundary (the H200 does; see docs/semantics.md).
        """
        info = array_info(array)
        if info is None:
            raise TypeError(f"TensorMap.tiled needs a device array, got "
                            f"{type(array).__qualname__}")
        ptr, shape, strides, t, _ = info
        if strides is None:
            strides = contiguous_strides(shape, t.dtype.itemsize, t.layout)
        backend = get_backend()
        box = _sizes(box)
        try:
            key: tuple | None = (backend, ptr, tuple(shape), tuple(strides), t.dtype, box,
                                 swizzle, interleave, l2_promotion, oob_fill,
                                 None if element_strides is None else _sizes(element_strides))
            data = _ENCODED.get(key)
        except TypeError:  # an unhashable option: tiled_fields says what is wrong with it
            key, data = None, None
        if data is None:
            fields = tiled_fields(ptr, tuple(shape), tuple(strides), t.dtype.name, box, swizzle,
                                  interleave, l2_promotion, oob_fill, element_strides)
            data = backend.encode_tensormap_tiled(**fields)
            if key is not None:
                _remember(key, data)
        return cls(data, array, box, t.dtype, len(shape))

    def __repr__(self) -> str:
        return f"<kj.TensorMap {self.type} box={self.box}>"


def _sizes(values: Any) -> Any:
    """A tuple of Python ints from any sequence of integers; anything else unchanged, for
    ``tiled_fields`` to name."""
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        return values


def _remember(key: tuple, data: bytes) -> None:
    if len(_ENCODED) >= _ENCODED_LIMIT:
        try:  # drop the oldest entry (dicts keep insertion order)
            del _ENCODED[next(iter(_ENCODED))]
        except (KeyError, RuntimeError, StopIteration):
            pass  # another thread changed the cache meanwhile
    _ENCODED[key] = data


def tiled_fields(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str,
                 box: tuple[int, ...], swizzle: Any = None, interleave: Any = None,
                 l2_promotion: Any = None, oob_fill: Any = None,
                 element_strides: Sequence[int] | None = None) -> dict[str, Any]:
    """Check the encode constraints; the keyword arguments of ``encode_tensormap_tiled``."""
    rank = len(shape)
    if not 1 <= rank <= 5:
        raise ValueError(f"rank: a tensor map has 1 to 5 dimensions, the array has {rank}")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype: a tensor map cannot hold {dtype}")
    itemsize = _ITEMSIZE[_DTYPES[dtype]]
    swizzle_bytes = _choice(_SWIZZLE_BYTES, swizzle, "swizzle")
    interleave_bytes = _choice(_INTERLEAVE_BYTES, interleave, "interleave")
    promotion = _choice(_L2_PROMOTION, l2_promotion, "l2_promotion")
    fill = _choice(_OOB_FILL, oob_fill, "oob_fill")
    if fill != "NONE" and not dtype.startswith("float"):
        raise ValueError("oob_fill: NaN fill needs a floating-point array")
    alignment = 32 if interleave_bytes == 32 else 16
    if ptr % alignment:
        raise ValueError(f"global address: 0x{ptr:x} is not {alignment}-byte aligned")
    if interleave_bytes and rank < 3:
        raise ValueError("interleave: an interleaved tensor map needs rank >= 3")
    if strides[-1] != itemsize:
        raise ValueError(f"strides: the last dimension must be contiguous (stride {itemsize} "
                         f"bytes), got {strides[-1]}")
    for axis in range(rank - 1):
        s = strides[axis]
        if s <= 0 or s % 16 or s >= 2**40:
            raise ValueError(f"strides: dimension {axis} has a stride of {s} bytes; tensor map "
                             "strides must be positive multiples of 16 below 2**40")
    for axis, n in enumerate(shape):
        if not 1 <= n <= 2**32:
            raise ValueError(f"dims: dimension {axis} has size {n}; sizes must be 1 to 2**32")
    if not isinstance(box, tuple):
        raise ValueError(f"box: a tuple of {rank} sizes, got {box!r}")
    if len(box) != rank:
        raise ValueError(f"box: {box} has {len(box)} dimensions, the array has {rank}")
    for axis, n in enumerate(box):
        if not isinstance(n, int) or not 1 <= n <= 256:
            raise ValueError(f"box: box[{axis}] = {n!r}; box sizes must be 1 to 256")
    inner_bytes = box[-1] * itemsize
    if not interleave_bytes and inner_bytes % 16:
        raise ValueError(f"box: the innermost box row is {inner_bytes} bytes; it must be a "
                         "multiple of 16 bytes")
    if not interleave_bytes and swizzle_bytes and inner_bytes > swizzle_bytes:
        raise ValueError(f"box: the innermost box row is {inner_bytes} bytes, more than the "
                         f"{swizzle_bytes}-byte swizzle span")
    if interleave_bytes == 32 and swizzle_bytes == 32:
        raise ValueError("swizzle: a 32-byte interleave cannot use the 32B swizzle")
    if element_strides is None:
        element_strides = (1,) * rank
    if not isinstance(element_strides, Sequence):
        raise ValueError(f"element_strides: a tuple of {rank} strides, got {element_strides!r}")
    element_strides = tuple(element_strides)
    if len(element_strides) != rank:
        raise ValueError(f"element_strides: {element_strides} has {len(element_strides)} "
                         f"entries, the array has {rank} dimensions")
    for axis, e in enumerate(element_strides):
        if not isinstance(e, int) or not 1 <= e <= 8:
            raise ValueError(f"element_strides: element_strides[{axis}] = {e!r}; each must "
                             "be 1 to 8")
    if not interleave_bytes and element_strides[-1] != 1:
        raise ValueError(f"element_strides: the innermost traversal stride must be 1 without "
                         f"interleave, got {element_strides[-1]}")
    swizzle_name = "NONE" if not swizzle_bytes else f"{swizzle_bytes}B"
    interleave_name = "NONE" if not interleave_bytes else f"{interleave_bytes}B"
    return {
        "dtype": f"CU_TENSOR_MAP_DATA_TYPE_{_DTYPES[dtype]}",
        "rank": rank,
        "address": ptr,
        "dims": tuple(reversed(shape)),
        "strides": tuple(reversed(strides[:-1])),
        "box": tuple(reversed(box)),
        "element_strides": tuple(reversed(element_strides)),
        "interleave": f"CU_TENSOR_MAP_INTERLEAVE_{interleave_name}",
        "swizzle": f"CU_TENSOR_MAP_SWIZZLE_{swizzle_name}",
        "l2_promotion": f"CU_TENSOR_MAP_L2_PROMOTION_{promotion}",
        "oob_fill": f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{fill}",
    }
