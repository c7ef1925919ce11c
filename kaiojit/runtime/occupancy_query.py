"""The driver's occupancy answers and an SM's limits, for ``kj.occupancy`` on the cuda backend.

Plain numbers only: the arithmetic and what the numbers mean live in ``kaiojit/occupancy.py``,
which compares its calculator with what is asked here.
"""

from __future__ import annotations

from typing import Any

from kaiojit.runtime.backend import GpuBackend

# SmLimits field -> the CUdevice_attribute that gives it
_SM_ATTRIBUTES = {
    "sm_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "max_threads_per_sm": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR",
    "max_blocks_per_sm": "CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR",
    "shared_per_sm": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "shared_per_block_optin": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "reserved_shared_per_block": "CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK",
    "regs_per_sm": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR",
    "regs_per_block": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK",
    "max_threads_per_block": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "warp_size": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
}


def sm_limits(backend: GpuBackend, device: int) -> dict[str, Any]:
    """The fields of ``kaiojit.tools.occupancy_calc.SmLimits`` for a CUDA device, from its
    attributes."""
    from kaiojit.runtime.cuda import check

    drv = backend.drv  # type: ignore[attr-defined]
    out: dict[str, Any] = {}
    for field, name in _SM_ATTRIBUTES.items():
        attr = getattr(drv.CUdevice_attribute, name)
        out[field] = int(check(drv.cuDeviceGetAttribute(attr, device), f"device {device}"))
    major, minor = backend.compute_capability(device)
    out["name"] = f"device {device} (sm_{major}{minor})"
    return out


def max_active_blocks(backend: GpuBackend, fn: Any, block_size: int, dynamic_shared: int) -> int:
    """``cuOccupancyMaxActiveBlocksPerMultiprocessor`` for a loaded function."""
    from kaiojit.runtime.cuda import check

    drv = backend.drv  # type: ignore[attr-defined]
    return int(check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        fn.obj, block_size, dynamic_shared), f"kernel {fn.name!r}"))
