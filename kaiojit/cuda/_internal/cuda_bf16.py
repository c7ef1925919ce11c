"""``numba.cuda._internal.cuda_bf16``: the same functions as :mod:`kaiojit.cuda.bf16`."""

from __future__ import annotations

from ..bf16 import *
from ..bf16 import __all__  # noqa: F401
