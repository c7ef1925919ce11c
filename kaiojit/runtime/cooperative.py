"""Cooperative launches: kernels that call ``kj.cg.this_grid().sync()``.

Such a kernel is launched cooperatively without being asked (numba does the same): every block
must be resident at once, so the grid is first checked against
:func:`max_cooperative_grid_blocks` (a :class:`kj.LaunchError` beyond it), then on the GPU the
grid barrier's counter (the module global ``kaiojit_grid_barrier``) is zeroed on the launch's
stream and the kernel goes through ``cuLaunchCooperativeKernel``.

The cpu backend accepts every grid the GPU it models (an H200: 132 SMs, see
:mod:`kaiojit.tools.occupancy_calc`) would: as many blocks as fit on its SMs at once for the block's
threads and shared memory (4224 blocks of 32 threads, 264 of 1024). Each block of such a launch
runs on a host thread of its own (:class:`CpuCrew`), so every block is live while any waits at
the grid barrier. The cost (docs/cooperative.md): a thread started and joined per block and
launch, with a stack of ``threads x 512 KiB`` address space touched only as far as the block
uses it; a grid sync wakes every block's thread once (the waiters sleep on a futex, see
``kaiojit/intrinsics/cg.py``).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from kaiojit.errors import LaunchError

GRID_BARRIER_SYMBOL = "kaiojit_grid_barrier"
GRID_SYNC_SITE = "grid_sync"  # the host image's fault site that marks a grid barrier
# The cpu backend gives each block of a cooperative launch a host thread of its own, with a stack
# of this many bytes per thread of the block (block mode keeps one copy of every variable per
# thread; 512 KiB is a GPU thread's local memory limit).
CPU_STACK_PER_THREAD = 512 << 10
CPU_MIN_STACK = 8 << 20
FAULT_POLL_S = 0.02  # how often a cooperative launch's caller looks for a fault while it waits

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
    blocks per multiprocessor times the multiprocessor count (elsewhere, the occupancy
    calculator's for the H200 the cpu backend models)."""
    if backend.name != "cuda":
        host = getattr(fn, "host", None)
        return cpu_max_blocks(block, getattr(host, "static_shared_bytes", 0) + dynamic_shared)
    from kaiojit.runtime.driver import check

    drv = backend.drv
    per_sm = check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        fn.obj, _threads(block), dynamic_shared))
    attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    sms = check(drv.cuDeviceGetAttribute(attr, device))
    return int(per_sm) * int(sms)


def cpu_max_blocks(block: Any, shared_bytes: int) -> int:
    """The blocks of ``block`` threads using ``shared_bytes`` of shared memory that the modeled
    H200's SMs hold at once (registers are not known for host code: they do not limit)."""
    from types import SimpleNamespace

    from kaiojit.tools.occupancy_calc import H200, block_limits

    host_code = SimpleNamespace(registers=0, shared_bytes=shared_bytes)  # what the calculator reads
    return min(block_limits(host_code, _threads(block), 0, H200).values()) * H200.sm_count


def cpu_stack_bytes(threads: int) -> int:
    """The stack a cooperative block of ``threads`` threads runs on (a power of two)."""
    need = max(CPU_MIN_STACK, threads * CPU_STACK_PER_THREAD)
    return 1 << (need - 1).bit_length()


class CpuCrew:
    """Runs the blocks of the cpu backend's cooperative launches, each on a thread of its own
    (:mod:`kaiojit.runtime.blockthreads`). One launch at a time: it shares the launch state of
    its caller's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def run(self, fn: Any, calls: list[tuple[int, int, int, int]], threads: int,
            launch: np.ndarray, cluster_state: int = 0) -> None:
        """Run the host entry ``fn`` for every ``(slots, ctx, first, end)`` call, blocks of
        ``threads`` threads (the blocks of one cluster, where ``cluster_state`` is its state's
        address); a LaunchError when the system gives fewer threads than blocks."""
        from kaiojit.runtime.blockthreads import run_blocks

        stack = cpu_stack_bytes(threads)
        with self._lock:
            made = run_blocks(fn, calls, stack, launch, cluster_state)
        if made < len(calls):
            raise LaunchError(
                f"the cpu backend could not start a thread for each of the {len(calls)} blocks "
                f"of a cooperative launch (it started {made}, each with {stack >> 20} MiB of "
                "stack address space): raise the process's thread limit (ulimit -u) or launch "
                "fewer blocks")


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


__all__ = ["CpuCrew", "check_cooperative_grid", "cpu_max_blocks", "cpu_stack_bytes",
           "is_cooperative", "launch_cuda", "max_cooperative_grid_blocks"]
