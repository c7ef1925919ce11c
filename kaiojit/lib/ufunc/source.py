"""Kernels from generated source, and the host-side handling of their operands.

kaiojit compiles kernels from their Python source, so the library's elementwise and reduction
kernels are written out as text, registered with ``linecache`` under a name of their own (as
a notebook cell is) and decorated with ``kj.jit`` like any user kernel; the user's scalar
function is a device function they call, so its errors point at the user's lines.
"""

from __future__ import annotations

import hashlib
import linecache
from typing import Any

import numpy as np

import kaiojit as kj
from kaiojit import types as kt

# Python scalars that NumPy 2 treats as weak (NEP 50): their kind, not a dtype, takes part.
PYTHON_SCALARS = (bool, int, float)


def compile_generated(name: str, source: str, namespace: dict[str, Any],
                      options: dict[str, Any]) -> Any:
    """``kj.jit(**options)`` of the function ``name`` defined by ``source``, whose globals are
    ``namespace``."""
    digest = hashlib.blake2s(source.encode(), digest_size=6).hexdigest()
    filename = f"<kaiojit generated {name} {digest}>"
    # an mtime of None keeps linecache.checkcache from dropping the entry (no file behind it)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    scope = dict(namespace)
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - our own generated source
    return kj.jit(**options)(scope[name])


def parse_signature(sig: Any, where: str, example: str, tuples: bool = False) -> kt.Signature:
    """A library signature: a string, a Signature, or (``tuples``) a tuple of argument
    types (numba's void signature); anything else is a TypeError naming ``where``."""
    if isinstance(sig, str):
        try:
            return kt.parse_signature(sig)
        except ValueError as e:
            raise TypeError(f"{where}: bad signature {sig!r}: {e}") from None
    if isinstance(sig, kt.Signature):
        return sig
    if tuples and isinstance(sig, tuple) and all(isinstance(a, kt.Type) for a in sig):
        return kt.Signature(tuple(sig))
    raise TypeError(f"{where}: a signature is a string like {example!r}, got {sig!r}")


# a public entry point of a library kernel: a CompileError (located in the user's function)
# leaves it with none of the library's frames below, as from ``kj.jit``
user_facing = kj.errors.user_facing(errors=(kj.CompileError,))


def is_device_array_like(value: Any) -> bool:
    """A kaiojit DeviceArray or a zero-copy-viewable foreign array (CAI or a CUDA DLPack)."""
    if isinstance(value, kj.DeviceArray):
        return True
    if isinstance(value, np.ndarray):
        return False
    return hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack_device__")


def as_device(value: Any, what: str) -> Any:
    """``value`` as a kj.DeviceArray without copying, or a TypeError naming ``what``."""
    if isinstance(value, kj.DeviceArray):
        return value
    try:
        return kj.as_device_array(value)
    except (TypeError, ValueError, BufferError) as e:
        raise TypeError(f"{what}: cannot use {type(value).__name__} as a device array ({e})") \
            from None


def synchronize_stream(stream: Any) -> None:
    """Wait for the work queued so far on ``stream`` (any stream-like kaiojit accepts)."""
    if stream is None or (isinstance(stream, int) and stream == 0):
        kj.synchronize()
        return
    kj.Event(timing=False).record(stream).synchronize()


class StridedView:
    """A zero-copy view of device memory with the given shape and byte strides (zero for a
    broadcast dimension), handed to kernels through ``__cuda_array_interface__``."""

    __slots__ = ("base", "__cuda_array_interface__")

    def __init__(self, base: Any, shape: tuple[int, ...], strides: tuple[int, ...]):
        self.base = base  # keeps the memory alive while the view is
        self.__cuda_array_interface__ = {
            "shape": shape, "strides": strides, "typestr": base.dtype.str,
            "data": (int(base.ptr), False), "version": 3, "stream": None,
        }


def broadcast_view(array: Any, shape: tuple[int, ...]) -> Any:
    """``array`` seen with ``shape`` (NumPy's broadcasting: leading dimensions added, length-1
    dimensions repeated with stride 0). ``array`` already has a shape that broadcasts."""
    if tuple(array.shape) == shape:
        return array
    pad = len(shape) - array.ndim
    strides = [0] * pad
    for n, stride, target in zip(array.shape, array.strides, shape[pad:]):
        strides.append(0 if n == 1 and target != 1 else stride)
    return StridedView(array, shape, tuple(strides))


def flat_view(array: Any) -> Any:
    """A contiguous array (C or F order) as 1-D, in memory order (an elementwise kernel visits
    elements in any order, so the order of their layout is the fast one)."""
    if array.ndim == 1:
        return array
    if array.is_c_contiguous:
        return array.reshape(array.size)
    return StridedView(array, (array.size,), (array.dtype.itemsize,))
