"""Cooperative launches: kernels that call ``kj.cg.this_grid().sync()``.

Such a kernel is launched cooperatively without being asked (numba does the same): every block
must be resident at once, so the grid is first checked against
:func:`max_cooperative_grid_blocks` (a :class:`kj.LaunchError` beyond it), then on the GPU the
grid barrier's counter (the module global ``kaiojit_grid_barrier``) is zeroed on the launch's
stream and the kernel goes through ``cuLaunchCooperativeKernel``. The cpu backend runs each
block of such a launch on its own host thread (see ``CpuBackend.run_grid``).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from kaiojit.errors import LaunchError

GRID_BARRIER_SYMBOL = "kaiojit_grid_barrier"
GRID_SYNC_SITE = "grid_sync"  # the host image's fault site that marks a grid barrier
# The cpu backend gives each block of a cooperative launch a host thread of its own; this
# many at most (the barrier's waiters yield their core, so more blocks than cores still run).
CPU_COOPERATIVE_BLOCKS = max(16, os.cpu_count() or 1)

_COUNTERS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_LIMITS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def is_cooperative(image: Any) -> bool:
    """Whether a compiled kernel (PTX or host image) has a grid barrier."""
    ptx = getattr(image, "ptx", "")
    if ptx:
        return GRID_BARRIER_SYMBOL in ptx
    host = getattr(image, "image", None)
    return any(site.get("kind") == GRID_SYNC_SITE for site in getattr(host, "sites", ()))


def _threads(block: Any) -> int:
    dims = block if isinstance(block, tuple) else (block,)
    n = 1
    for d in dims:
        n *= int(d)
    return n


def max_cooperative_grid_blocks(backend: Any, fn: Any, block: Any, dynamic_shared: int = 0,
                                device: int = 0) -> int:
    """The most blocks of ``block`` threads that can be resident at once: the occupancy API's
    blocks per multiprocessor times the multiprocessor count (on the cpu backend, the host
    threads it gives a cooperative launch)."""
    if backend.name != "cuda":
        return CPU_COOPERATIVE_BLOCKS
    from kaiojit.runtime.driver import check

    drv = backend.drv
    per_sm = check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        fn.obj, _threads(block), dynamic_shared))
    attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    sms = check(drv.cuDeviceGetAttribute(attr, device))
    return int(per_sm) * int(sms)


def check_cooperative_grid(name: str, grid: tuple, block: tuple, limit: int) -> None:
    blocks = grid[0] * grid[1] * grid[2]
    if blocks > limit:
        raise LaunchError(
            f"kernel {name!r} synchronizes its grid (kj.cg.this_grid().sync()), so all its "
            f"blocks must be resident at once: a grid of {blocks} blocks of {_threads(block)} "
            f"threads is more than the {limit} that fit; use at most "
            f"kernel.max_cooperative_grid_blocks(block) blocks (loop over the data in each)")


def launch_cuda(backend: Any, dk: Any, name: str, config: Any, stream: int, slots: Any,
                context: str) -> None:
    """Zero the grid barrier's counter on ``stream``, then ``cuLaunchCooperativeKernel``."""
    from kaiojit.runtime.driver import check

    drv = backend.drv
    limits = _LIMITS.setdefault(dk, {})
    limit = limits.get((config.block, config.shared_mem))
    if limit is None:
        limit = limits[(config.block, config.shared_mem)] = max_cooperative_grid_blocks(
            backend, dk.fn, config.block, config.shared_mem, dk.device)
    check_cooperative_grid(name, config.grid, config.block, limit)
    counter = _COUNTERS.get(dk)
    if counter is None:
        counter, _ = check(drv.cuModuleGetGlobal(dk.module, GRID_BARRIER_SYMBOL.encode()))
        counter = _COUNTERS[dk] = int(counter)
    check(drv.cuMemsetD32Async(counter, 0, 1, stream), f"kernel {name!r}: zeroing its grid "
                                                       "barrier")
    check(drv.cuLaunchCooperativeKernel(dk.fn.obj, *config.grid, *config.block,
                                        config.shared_mem, stream, slots.params_address),
          context + " (cooperative)")


__all__ = ["CPU_COOPERATIVE_BLOCKS", "check_cooperative_grid", "is_cooperative",
           "launch_cuda", "max_cooperative_grid_blocks"]
