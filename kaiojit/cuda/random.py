"""``numba.cuda.random``: the xoroshiro128+ generator (kaiojit's :mod:`kaiojit.random`)."""

from __future__ import annotations

from ..random import *
from ..random import __all__  # noqa: F401
