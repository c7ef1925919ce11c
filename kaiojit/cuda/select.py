"""numba's small device helpers: ``cuda.selp``, ``a if p else b`` with both operands
evaluated (PTX's ``selp``; LLVM emits a select once the device function is inlined), and
``cuda.lanemask_lt()``, the bits of the lanes below this one (PTX's ``%lanemask_lt``)."""

from __future__ import annotations

from .. import jit as _jit
from .. import laneid as _laneid
from ..types import uint32 as _uint32


@_jit(device=True)
def selp(p, a, b):
    return a if p else b


@_jit(device=True)
def lanemask_lt():
    return _uint32((_uint32(1) << _uint32(_laneid)) - _uint32(1))


__all__ = ["lanemask_lt", "selp"]
