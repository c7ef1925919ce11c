"""Arrays a kernel reads from its globals or closure, as numba compiles them.

A NumPy array is host memory: its values at compile time become a constant array of the
kernel (constant memory on a GPU), as ``kj.const.array_like(arr)`` makes one and numba freezes
global arrays; the kernel cannot write it.

numba compiles a global device array (its own, or any object with
``__cuda_array_interface__``) into the kernel as a constant: its address, shape and strides
are part of the code, and the kernel reads and writes that memory. kaiojit does the same: the
array becomes a ``globalarray`` expression holding the array object, so the memory lives as
long as the compiled code. The address belongs to this process: a function that captures one
is never written to the disk cache (``deps.fingerprint``). Rebinding the name after the
compile does not change the compiled code, as with every other global a kernel reads.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

from .. import types as T
from ..kir import Expr


def global_ndarray(function: str, arr: Any, loc) -> Expr:
    """The constant array of a NumPy array a kernel reads (C-contiguous, as many dimensions,
    one at least); named by its contents, so that copies of a loop body unrolled over several
    arrays each get their own."""
    import numpy as np

    data = np.ascontiguousarray(arr)
    digest = hashlib.blake2s(data.tobytes() + repr((data.dtype.str, data.shape)).encode(),
                             digest_size=8).hexdigest()
    dtype = T.from_dtype(data.dtype)
    return Expr("constarray", T.ArrayType(dtype, max(data.ndim, 1), "C"),
                attr=(data, f"{function}_cglobal_{digest}"), loc=loc)


def captured_array(value: Any, loc) -> Expr | None:
    """The ``globalarray`` expression of a device array, None if ``value`` is none (a NumPy
    array is host memory: ``kj.const.array_like`` takes it)."""
    # The runtime reads what a device array is; it is loaded whenever one exists (the
    # frontend, an earlier stage, never imports it)
    interop = sys.modules.get("kaiojit.runtime.interop")
    if interop is None:
        return None
    try:
        info = interop.array_info(value)
    except TypeError:
        return None
    if info is None:
        return None
    ptr, shape, strides, t, _ = info
    if strides is None:
        layout = sys.modules["kaiojit.runtime.layout"]  # loaded with interop
        strides = layout.contiguous_strides(shape, t.dtype.itemsize, t.layout)
    return Expr("globalarray", t, attr=(ptr, tuple(shape), tuple(strides), value), loc=loc)

