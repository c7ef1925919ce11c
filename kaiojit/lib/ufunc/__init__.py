"""Library kernels built on kaiojit's public API: ``@kj.vectorize`` (elementwise ufuncs) and
``@kj.reduce`` (device reductions), as numba-cuda has them."""

from __future__ import annotations

from .reduce import Reduce, reduce
from .vectorize import UFunc, vectorize

__all__ = ["Reduce", "UFunc", "reduce", "vectorize"]
