"""Library kernels built on kaiojit's public API: ``@kj.vectorize`` (elementwise ufuncs),
``@kj.guvectorize`` (generalized ufuncs) and ``@kj.reduce`` (device reductions), as numba-cuda
has them."""

from __future__ import annotations

from .guvectorize import GUFunc, guvectorize
from .reduce import Reduce, reduce
from .vectorize import UFunc, vectorize

__all__ = ["GUFunc", "Reduce", "UFunc", "guvectorize", "reduce", "vectorize"]
