"""The PTX of the bulk tensor copy engine (TMA) and its mbarriers, as LLVM inline assembly.

Each function returns an :class:`InlinePtx`: the template (LLVM's ``$N`` operands, outputs
first) and the constraint string, ready for ``llvmlite.ir.InlineAsm``; the docstring of each
says what its operands are. Every one is assembled by ptxas for sm_90 in
``tests/runtime/test_tma_ptx.py`` and run on a GPU in ``tests/runtime/test_tma_gpu.py``.

Operand conventions:

* A shared memory address (a box in shared memory, an mbarrier) is a 32-bit ``r`` operand: the
  address within the CTA's shared window, i.e. ``ptrtoint`` of the ``addrspace(3)`` pointer
  truncated to i32 (what ``__cvta_generic_to_shared`` gives in CUDA C++).
* A tensor map is a 64-bit ``l`` operand holding its *generic* address. For a kernel parameter
  ``ptr byval([16 x i64]) align 64 "nvvm.grid_constant"`` that is the parameter itself: LLVM
  takes the parameter's address with ``mov.b64 %rd, name_param_N; cvta.param.u64 %rd, %rd``.
* Coordinates are signed 32-bit ``r`` operands, innermost dimension first (PTX's order).

Everything here needs PTX ISA 8.0 (``MIN_PTX``) and sm_90 (``MIN_ARCH``), except the plain
mbarrier init and arrive, which sm_80 has too (``ARCH_NEEDED`` gives each function's).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_ARCH = 90
MIN_PTX = 80
MAX_RANK = 5
ARCH_NEEDED = {"mbarrier_init": 80, "mbarrier_arrive": 80}  # every other function: MIN_ARCH
MAX_WAIT_GROUP = 63  # cp.async.bulk.wait_group takes an immediate; PTX does not bound it lower


@dataclass(frozen=True, slots=True)
class InlinePtx:
    """An inline-assembly template and its LLVM constraints (outputs, inputs, clobbers)."""

    text: str
    constraints: str


def mbarrier_init() -> InlinePtx:
    """``(bar: i32 shared, count: i32)``: initialize the mbarrier for ``count`` arrivals."""
    return InlinePtx("mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}")


def fence_mbarrier_init() -> InlinePtx:
    """``()``: make initialized mbarriers visible to the other CTAs of the cluster."""
    return InlinePtx("fence.mbarrier_init.release.cluster;", "~{memory}")


def mbarrier_arrive() -> InlinePtx:
    """``(bar) -> state: i64``: arrive once (release, CTA scope)."""
    return InlinePtx("mbarrier.arrive.shared::cta.b64 $0, [$1];", "=l,r,~{memory}")


def mbarrier_arrive_expect_tx() -> InlinePtx:
    """``(bar, bytes: i32) -> state: i64``: expect ``bytes`` more transaction bytes, then
    arrive once."""
    return InlinePtx("mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], $2;",
                     "=l,r,r,~{memory}")


def mbarrier_expect_tx() -> InlinePtx:
    """``(bar, bytes: i32)``: expect ``bytes`` more transaction bytes, without arriving."""
    return InlinePtx("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;",
                     "r,r,~{memory}")


def mbarrier_try_wait_parity() -> InlinePtx:
    """``(bar, parity: i32) -> i32``: 1 once the phase of that parity has completed, else 0
    (after a time the hardware chooses: a bounded wait, for loops that do something else)."""
    return InlinePtx(
        "{\n.reg .pred %kj_p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 %kj_p, [$1], $2;\n"
        "selp.u32 $0, 1, 0, %kj_p;\n}", "=r,r,r,~{memory}")


def mbarrier_wait_parity() -> InlinePtx:
    """``(bar, parity: i32)``: wait until the phase of that parity has completed.

    The loop lives inside a ``{ }`` scope, so its label may appear many times in a kernel."""
    return InlinePtx(
        "{\n.reg .pred %kj_p;\n"
        "$$kj_wait:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 %kj_p, [$0], $1;\n"
        "@!%kj_p bra $$kj_wait;\n}", "r,r,~{memory}")


def _coords(first: int, rank: int) -> str:
    return ", ".join(f"${first + d}" for d in range(rank))


def _check_rank(rank: int) -> None:
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"a tensor copy has 1 to {MAX_RANK} dimensions, got {rank}")


def tma_load(rank: int) -> InlinePtx:
    """``(dst: i32 shared, tensormap: i64 generic, c0..c{rank-1}: i32, bar: i32 shared)``:
    copy the box at the coordinates into shared memory; its bytes complete on ``bar``."""
    _check_rank(rank)
    return InlinePtx(
        f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        f" [$0], [$1, {{{_coords(2, rank)}}}], [${rank + 2}];",
        "r,l," + "r," * rank + "r,~{memory}")


def tma_store(rank: int) -> InlinePtx:
    """``(tensormap: i64 generic, c0..c{rank-1}: i32, src: i32 shared)``: copy the box in shared
    memory to the tensor at the coordinates (in the current bulk async-group)."""
    _check_rank(rank)
    return InlinePtx(
        f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group"
        f" [$0, {{{_coords(1, rank)}}}], [${rank + 1}];",
        "l," + "r," * rank + "r,~{memory}")


def tma_reduce_add(rank: int) -> InlinePtx:
    """``(tensormap: i64 generic, c0..c{rank-1}: i32, src: i32 shared)``: add the box in shared
    memory to the tensor at the coordinates, element by element (each add atomic; the type is
    the map's: f32, f16, bf16, s32, u32 or u64), in the current bulk async-group."""
    _check_rank(rank)
    return InlinePtx(
        f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.add.tile.bulk_group"
        f" [$0, {{{_coords(1, rank)}}}], [${rank + 1}];",
        "l," + "r," * rank + "r,~{memory}")


def bulk_commit_group() -> InlinePtx:
    """``()``: close the current bulk async-group (the stores and reduce-adds issued since the
    last one)."""
    return InlinePtx("cp.async.bulk.commit_group;", "~{memory}")


def bulk_wait_group_read(pending: int) -> InlinePtx:
    """``()``: wait until at most ``pending`` bulk async-groups still *read* shared memory
    (their source boxes may then be overwritten)."""
    return InlinePtx(f"cp.async.bulk.wait_group.read {_pending(pending)};", "~{memory}")


def bulk_wait_group(pending: int) -> InlinePtx:
    """``()``: wait until at most ``pending`` bulk async-groups are still incomplete (their
    writes to global memory done)."""
    return InlinePtx(f"cp.async.bulk.wait_group {_pending(pending)};", "~{memory}")


def _pending(n: int) -> int:
    if not isinstance(n, int) or not 0 <= n <= MAX_WAIT_GROUP:
        raise ValueError(f"a bulk wait_group count is an integer 0 to {MAX_WAIT_GROUP}, "
                         f"got {n!r}")
    return n


def fence_proxy_async() -> InlinePtx:
    """``()``: order this thread's generic-proxy shared memory accesses with the async proxy
    (before a TMA store reads what threads wrote, after an mbarrier's init)."""
    return InlinePtx("fence.proxy.async.shared::cta;", "~{memory}")


def prefetch_tensormap() -> InlinePtx:
    """``(tensormap: i64 generic)``: fetch the tensor map into the cache ahead of its use."""
    return InlinePtx("prefetch.tensormap [$0];", "l,~{memory}")


def elect_sync() -> InlinePtx:
    """``(membermask: i32) -> i32``: 1 in exactly one thread of the warp's threads in the mask
    (the lowest active lane), 0 in the others. All threads of the mask must execute it."""
    return InlinePtx(
        "{\n.reg .pred %kj_p;\n"
        "elect.sync _|%kj_p, $1;\n"
        "selp.u32 $0, 1, 0, %kj_p;\n}", "=r,r")
