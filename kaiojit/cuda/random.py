"""``numba.cuda.random``: the xoroshiro128+ generator (kaiojit's :mod:`kaiojit.random`)."""

from __future__ import annotations

from ..lib.random import *
from ..lib.random import __all__  # noqa: F401
