"""Array layouts: contiguous strides, the layout ('C', 'F' or 'A') of a shape and strides,
and the interned array types signatures are specialized on. One place for these rules, which
DeviceArray, foreign arrays, the argument packer and tensor maps all follow."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kaiojit import types as kt

_ARRAY_TYPES: dict[tuple[kt.ScalarType, int, str, int], kt.ArrayType] = {}


def array_type(scalar: kt.ScalarType, ndim: int, layout: str, align: int = 0) -> kt.ArrayType:
    """The interned ArrayType, so types compare and hash by identity in the common case."""
    key = (scalar, ndim, layout, align)
    t = _ARRAY_TYPES.get(key)
    if t is None:
        t = _ARRAY_TYPES[key] = kt.ArrayType(scalar, ndim, layout, align)
    return t


def alignment(ptr: int, shape: Sequence[int], strides: Sequence[int] | None, itemsize: int,
              layout: str) -> int:
    """``kt.ALIGN_BYTES`` if the pointer and the row strides of an array of ``layout`` are
    multiples of it, else 0 (see :class:`kaiojit.types.ArrayType`). Contiguous layouts take
    their row stride from the shape (the stride the kernel computes), 'A' from ``strides``."""
    a = kt.ALIGN_BYTES
    if ptr % a:
        return 0
    ndim = len(shape)
    if ndim <= 1:
        return a
    if layout == "C":
        return 0 if shape[-1] * itemsize % a else a
    if layout == "F":
        return 0 if shape[0] * itemsize % a else a
    if strides is None:
        return 0
    return 0 if any(s % a for s in strides[:-1]) else a


_TAGS: dict[tuple[kt.ArrayType, int], tuple[kt.ArrayType, int]] = {}


def launch_tag(t: kt.ArrayType, device: int, backend: Any) -> tuple[kt.ArrayType, int, Any]:
    """One interned object per (array type, device, backend): a fast launch checks an array's
    kind with one identity test (arrays of every backend say device 0: the backend tells a cpu
    array from a GPU one)."""
    key = (t, device, backend)
    return _TAGS.setdefault(key, key)


def contiguous_strides(shape: Sequence[int], itemsize: int, order: str = "C") -> tuple[int, ...]:
    """Byte strides of a contiguous array of ``shape`` in order 'C' (the default) or 'F'."""
    strides = [0] * len(shape)
    step = itemsize
    axes = range(len(shape)) if order == "F" else range(len(shape) - 1, -1, -1)
    for i in axes:
        strides[i] = step
        step *= max(shape[i], 1)
    return tuple(strides)


def layout_of(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int) -> str:
    """'C' if C-contiguous, else 'F' if F-contiguous, else 'A' (NumPy's rules: dimensions of
    length 1 do not count, an empty array is contiguous; 1-D contiguous is 'C')."""
    if strides is None or 0 in shape:
        return "C"
    if _contiguous(shape, strides, itemsize, range(len(shape) - 1, -1, -1)):
        return "C"
    if _contiguous(shape, strides, itemsize, range(len(shape))):
        return "F"
    return "A"


def _contiguous(shape: Sequence[int], strides: Sequence[int], itemsize: int,
                axes: Iterable[int]) -> bool:
    """Whether the array is packed along ``axes``, innermost first."""
    expected = itemsize
    for i in axes:
        if shape[i] != 1:
            if strides[i] != expected:
                return False
            expected *= shape[i]
    return True
