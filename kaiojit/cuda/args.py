"""numba.cuda.args: ``In``, ``Out``, ``InOut`` (what a launch copies of a host array) and
``wrap_arg``, which dispatcher extensions use to give host arrays a default."""

from __future__ import annotations

from typing import Any

import numpy as np

from .host import to_device


def In(ary: Any) -> Any:
    """An array the kernel only reads: copied to the device, never back."""
    return to_device(ary)


def Out(ary: Any) -> Any:
    """An array the kernel writes: a host array is copied back after the launch."""
    return ary


InOut = Out


def wrap_arg(value: Any, default=InOut) -> Any:
    """numba's ``wrap_arg``: a host array as ``default`` makes it (``In``, ``Out`` or
    ``InOut``); any other argument as it is."""
    return default(value) if isinstance(value, np.ndarray) else value
