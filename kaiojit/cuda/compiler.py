"""``numba.cuda.compiler``: the compile entry points (see :mod:`kaiojit.cuda.decorators`)."""

from __future__ import annotations

from .decorators import (  # noqa: F401
    compile,
    compile_all,
    compile_for_current_device,
    compile_ptx,
    compile_ptx_for_current_device,
)
