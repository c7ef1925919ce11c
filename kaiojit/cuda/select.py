"""``cuda.selp``: numba's select, ``a if p else b`` with both operands evaluated (PTX's
``selp``; LLVM emits a select for the device function once inlined)."""

from __future__ import annotations

from .. import jit as _jit


@_jit(device=True)
def selp(p, a, b):
    return a if p else b


__all__ = ["selp"]
