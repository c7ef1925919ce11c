"""bfloat16 test data with or without ml_dtypes: NumPy float32 values rounded to bfloat16, put on
the device as ml_dtypes' bfloat16 arrays, or (a GPU machine without ml_dtypes) as PyTorch
bfloat16 tensors, which kaiojit takes through DLPack."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), still float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def to_device(x: np.ndarray):
    """float32 values (already bfloat16-exact) as a bfloat16 array of the current backend."""
    x = np.ascontiguousarray(x, np.float32)
    if ml_dtypes is not None:
        return kj.to_device(x.astype(ml_dtypes.bfloat16))
    if kj.backend() == "cuda":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(x).cuda().bfloat16()
    pytest.skip("bfloat16 arrays need ml_dtypes (or PyTorch on a GPU)")


def empty(shape: tuple, like):
    """A bfloat16 array of ``shape`` filled with NaN, of the same kind as ``like``."""
    if hasattr(like, "copy_to_host"):
        return to_device(np.full(shape, np.nan, np.float32))
    import torch
    return torch.full(shape, float("nan"), device="cuda", dtype=torch.bfloat16)


def to_host(a) -> np.ndarray:
    """A bfloat16 array of either kind as float32 NumPy values."""
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host().astype(np.float32)
    return a.float().cpu().numpy()
