"""Where kaiojit finds the CUDA binary utilities it runs (ptxas, nvdisasm, cuobjdump): on
PATH first, else where cuda-pathfinder finds them (the pip packages of the ``test`` extra)."""

from __future__ import annotations

import functools
import shutil


@functools.lru_cache(maxsize=None)
def find_tool(name: str) -> str | None:
    """The path of a CUDA binary utility, or None when there is none."""
    path = shutil.which(name)
    if path:
        return path
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        return find_nvidia_binary_utility(name)
    except Exception:  # noqa: BLE001 - any failure means: not found
        return None
