"""Occupancy: how many blocks of a kernel an SM holds at once, and which resource limits it.

The calculator is pure arithmetic over a kernel's :class:`~kaiojit.tools.resources.Resources` and an
SM's limits (:class:`SmLimits`), following the rules of CUDA's occupancy calculator
(``cuda_occupancy.h``) for compute capability 7.0 and newer:

* registers are allocated per warp, ``registers * 32`` rounded up to 256; the register file
  is split into 4 sub-partitions of 16K registers, each holding whole warps, and a block fits
  only if ``regs_per_warp * roundup(warps, 4)`` registers do not exceed the 64K per block;
* shared memory per block is its static plus dynamic bytes plus 1 KB the driver reserves
  (compute capability 8.0 on), rounded up to 128 bytes, against the SM's shared memory at the
  largest carveout (the driver's default without a preference);
* at most 64 warps (2048 threads) and 32 blocks an SM on sm_90.

:func:`occupancy` (``kj.occupancy``) asks the driver on the cuda backend and answers from ptxas
and the calculator with H200 limits elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LaunchError

if TYPE_CHECKING:
    from .resources import Resources

DEVICE_MAX_THREADS_PER_BLOCK = 1024
WARP_SIZE = 32
REGS_PER_BLOCK = 65536  # also the register file of one SM, compute capability 5.0 to 12.x
REG_ALLOC_UNIT = 256  # registers are given to warps in units of 256
REG_SUB_PARTITIONS = 4  # the register file is split between 4 warp schedulers


@dataclass(frozen=True, slots=True)
class SmLimits:
    """What one SM of a device holds at once, and the device's SM count."""

    name: str
    sm_count: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int  # bytes at the largest carveout
    shared_per_block_optin: int  # the most one block may use (static + dynamic)
    reserved_shared_per_block: int = 1024
    shared_alloc_unit: int = 128
    regs_per_sm: int = REGS_PER_BLOCK
    regs_per_block: int = REGS_PER_BLOCK
    max_threads_per_block: int = DEVICE_MAX_THREADS_PER_BLOCK
    warp_size: int = WARP_SIZE

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


# The H200 (and H100 SXM): sm_90, 132 SMs, 228 KB of shared memory an SM, 227 KB a block.
H200 = SmLimits(name="H200 (sm_90)", sm_count=132, max_threads_per_sm=2048,
                max_blocks_per_sm=32, shared_per_sm=228 * 1024,
                shared_per_block_optin=227 * 1024)


@dataclass(frozen=True, slots=True)
class Occupancy:
    """The occupancy of one kernel launched with one block size and dynamic shared memory.

    ``limits`` gives, for each resource, the blocks an SM could hold if only that resource
    counted ("warps", "registers", "shared memory", "blocks"); ``limiting_factor`` is the
    one that gives ``active_blocks_per_sm``. ``suggested_block_size`` is the largest block
    size of highest occupancy (``cuOccupancyMaxPotentialBlockSize``), and ``min_grid_size``
    the blocks that fill the device at that size.
    """

    block_size: int
    active_blocks_per_sm: int
    occupancy_fraction: float
    limiting_factor: str
    suggested_block_size: int
    min_grid_size: int
    limits: tuple[tuple[str, int], ...]
    source: str  # "driver" or "calculator"

    @property
    def active_warps_per_sm(self) -> int:
        return self.active_blocks_per_sm * -(-self.block_size // WARP_SIZE)

    def __str__(self) -> str:
        return (f"{self.active_blocks_per_sm} blocks of {self.block_size} threads an SM "
                f"({self.occupancy_fraction:.0%} occupancy, limited by "
                f"{self.limiting_factor}); suggested block size {self.suggested_block_size}")


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def regs_per_warp(registers: int, limits: SmLimits = H200) -> int:
    return _round_up(registers * limits.warp_size, REG_ALLOC_UNIT)


def max_threads_for_registers(registers: int, limits: SmLimits = H200) -> int:
    """The largest block a kernel using ``registers`` per thread can launch with (what the
    driver reports as ``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` without ``.maxntid``)."""
    per_warp = regs_per_warp(registers, limits)
    if per_warp == 0:
        return limits.max_threads_per_block
    # a block's warps are spread over the sub-partitions: it needs regs for roundup(w, 4) warps
    warps = limits.regs_per_block // per_warp // REG_SUB_PARTITIONS * REG_SUB_PARTITIONS
    return min(warps * limits.warp_size, limits.max_threads_per_block)


def block_limits(resources: Resources, block_size: int, dynamic_shared: int = 0,
                 limits: SmLimits = H200) -> dict[str, int]:
    """Blocks an SM could hold per resource, for a block of ``block_size`` threads."""
    warps = -(-block_size // limits.warp_size)
    per_warp = regs_per_warp(resources.registers, limits)
    if per_warp:
        per_partition = limits.regs_per_sm // REG_SUB_PARTITIONS // per_warp
        by_regs = per_partition * REG_SUB_PARTITIONS // warps
        if per_warp * _round_up(warps, REG_SUB_PARTITIONS) > limits.regs_per_block:
            by_regs = 0
    else:
        by_regs = limits.max_blocks_per_sm
    shared = resources.shared_bytes + dynamic_shared
    per_block = _round_up(shared + limits.reserved_shared_per_block, limits.shared_alloc_unit)
    by_shared = limits.shared_per_sm // per_block if per_block else limits.max_blocks_per_sm
    return {
        "warps": limits.max_warps_per_sm // warps,
        "registers": by_regs,
        "shared memory": by_shared,
        "blocks": limits.max_blocks_per_sm,
    }


def check_block(resources: Resources, block_size: int, dynamic_shared: int,
                limits: SmLimits = H200) -> None:
    """:class:`LaunchError` for a block the kernel cannot be launched with at all."""
    if block_size < 1:
        raise LaunchError(f"a block has at least 1 thread, got {block_size}")
    most = min(limits.max_threads_per_block, resources.max_threads_per_block)
    if block_size > most:
        why = ("the device allows" if most == limits.max_threads_per_block
               else "this kernel's registers allow")
        raise LaunchError(f"a block of {block_size} threads: {why} at most {most}")
    if dynamic_shared < 0:
        raise LaunchError(f"shared memory must be >= 0 bytes, got {dynamic_shared}")
    total = resources.shared_bytes + dynamic_shared
    if total > limits.shared_per_block_optin:
        raise LaunchError(f"{dynamic_shared} bytes of dynamic shared memory + "
                          f"{resources.shared_bytes} static exceed the device's "
                          f"{limits.shared_per_block_optin} bytes per block")


def active_blocks(resources: Resources, block_size: int, dynamic_shared: int = 0,
                  limits: SmLimits = H200) -> tuple[int, str, dict[str, int]]:
    """``(blocks an SM holds, the limiting resource, blocks per resource)``."""
    per = block_limits(resources, block_size, dynamic_shared, limits)
    blocks = min(per.values())
    factor = next(name for name, n in per.items() if n == blocks)
    return blocks, factor, per


def suggest_block_size(resources: Resources, dynamic_shared: int = 0,
                       limits: SmLimits = H200) -> tuple[int, int]:
    """``(min_grid_size, block_size)``: the largest block size, in steps of a warp, that
    reaches the highest occupancy, as ``cuOccupancyMaxPotentialBlockSize`` chooses it."""
    limit = min(limits.max_threads_per_block, resources.max_threads_per_block)
    best_threads, best_block, best_blocks = 0, 0, 0
    size = _round_up(limit, limits.warp_size)
    while size > 0:
        block = min(size, limit)
        blocks = active_blocks(resources, block, dynamic_shared, limits)[0]
        if blocks * block > best_threads:
            best_threads, best_block, best_blocks = blocks * block, block, blocks
            if best_threads == limits.max_threads_per_sm:
                break
        size -= limits.warp_size
    return best_blocks * limits.sm_count, best_block


def calculate(resources: Resources, block: Any, dynamic_shared: int = 0,
              limits: SmLimits = H200) -> Occupancy:
    """The occupancy of a kernel with ``resources`` for ``block`` (an int or a tuple of up
    to 3 ints) and ``dynamic_shared`` bytes, by arithmetic alone."""
    size = block_size_of(block)
    check_block(resources, size, dynamic_shared, limits)
    blocks, factor, per = active_blocks(resources, size, dynamic_shared, limits)
    min_grid, suggested = suggest_block_size(resources, dynamic_shared, limits)
    return Occupancy(
        block_size=size, active_blocks_per_sm=blocks,
        occupancy_fraction=blocks * -(-size // limits.warp_size) / limits.max_warps_per_sm,
        limiting_factor=factor, suggested_block_size=suggested, min_grid_size=min_grid,
        limits=tuple(per.items()), source="calculator")


def block_size_of(block: Any) -> int:
    """The threads of a block given as an int or a tuple of 1 to 3 ints."""
    dims = tuple(block) if isinstance(block, (tuple, list)) else (block,)
    if not 1 <= len(dims) <= 3 or not all(
            hasattr(d, "__index__") and not isinstance(d, bool) for d in dims):
        raise LaunchError(f"block must be an int or a tuple of 1 to 3 ints, got {block!r}")
    size = 1
    for d in dims:
        size *= int(d)
    return size


# --- kj.occupancy -------------------------------------------------------------------------------
