"""The stream of a launch that names none: PyTorch's current stream where it launches on
PyTorch's CUDA tensors, as Triton does, so ``with torch.cuda.stream(s):`` and
``torch.cuda.graph(...)`` take kaiojit kernels along; the legacy default stream otherwise.

A launch that names a stream (``kernel[grid, block, stream]``) runs there, whatever its
arguments. Only a launch without one pays for this choice: one table lookup per array
argument, and for the first PyTorch tensor on a CUDA device one call asking PyTorch for its
current stream (``torch._C._cuda_getCurrentRawStream``, what Triton's launcher calls). A fast
form built for such a launch tests that the current stream is still the one it launches on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kaiojit.runtime.interop import _torch_info, array_extractor


class StreamChoice:
    """How launches without a stream choose one. ``current`` replaces PyTorch's answer in
    tests, whose stand-in tensors have no CUDA build of PyTorch behind them."""

    current: Callable[[int], int] | None = None

    @classmethod
    def getter(cls) -> Callable[[int], int] | None:
        """What gives the raw handle of PyTorch's current stream on a device (None: no CUDA
        build of PyTorch is loaded, so no tensor is on a CUDA device)."""
        if cls.current is not None:
            return cls.current
        torch = sys.modules.get("torch")
        return getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)

    @staticmethod
    def follows_torch(values: Sequence[Any], at: Iterable[int]) -> bool:
        """Whether the arrays ``values[i]`` for ``i`` in ``at`` include a PyTorch tensor on a
        CUDA device (a CPU tensor runs on the cpu backend, where streams do not order work)."""
        for i in at:
            value = values[i]
            if array_extractor(value.__class__) is _torch_info and value.get_device() >= 0:
                return True
        return False

    @classmethod
    def default(cls, values: Sequence[Any], at: Sequence[int], device: int) -> int:
        """The stream handle of a launch of ``values`` that names no stream. Without a CUDA
        build of PyTorch loaded no argument can be a CUDA tensor: the arguments are not
        looked at (the general launch path of every kernel with arrays comes here)."""
        current = cls.getter()
        if current is None or not cls.follows_torch(values, at):
            return 0
        return current(device)
