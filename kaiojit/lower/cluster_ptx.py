"""The PTX of thread-block clusters (sm_90), as LLVM inline assembly: the cluster barrier,
``mapa`` (an address in another block's shared memory), the remote mbarrier arrive and the
multicast tensor copy.

Each function returns a :class:`kaiojit.lower.tma_ptx.InlinePtx` (template with LLVM's ``$N``
operands, outputs first, and its constraints); operands follow ``tma_ptx``'s conventions (a
shared address is the 32-bit ``r`` address in the block's shared window, a tensor map the
64-bit generic address of the parameter, coordinates innermost first). Every one is assembled by
ptxas for sm_90a in ``tests/runtime/test_cluster_ptx.py``.

The barrier is the non-``.aligned`` form: threads of a warp may reach it on different paths
(``.aligned`` would make that undefined behaviour). ``barrier.cluster.arrive`` has release and
``barrier.cluster.wait`` acquire semantics at cluster scope (PTX ISA 8.0, section 9.7.13.4);
``.relaxed`` drops the release, for an arrive that orders nothing.
"""

from __future__ import annotations

from .tma_ptx import MAX_RANK, InlinePtx

MIN_ARCH = 90
MIN_PTX = 80
MULTICAST_BITS = 16  # the CTA mask of a multicast copy is a 16-bit operand


def cluster_arrive() -> InlinePtx:
    """``()``: this thread arrives on the cluster barrier (release, cluster scope)."""
    return InlinePtx("barrier.cluster.arrive;", "~{memory}")


def cluster_arrive_relaxed() -> InlinePtx:
    """``()``: this thread arrives on the cluster barrier, ordering no memory access."""
    return InlinePtx("barrier.cluster.arrive.relaxed;", "~{memory}")


def cluster_wait() -> InlinePtx:
    """``()``: wait until every non-exited thread of the cluster has arrived (acquire)."""
    return InlinePtx("barrier.cluster.wait;", "~{memory}")


def cluster_sync() -> InlinePtx:
    """``()``: arrive, then wait: a barrier of every thread of the cluster."""
    return InlinePtx("barrier.cluster.arrive;\nbarrier.cluster.wait;", "~{memory}")


def map_shared_rank() -> InlinePtx:
    """``(address: i64 generic, rank: i32) -> i64 generic``: the address of the same shared
    memory location in the block of that rank in the cluster (loads and stores through a
    generic address reach it: distributed shared memory)."""
    return InlinePtx("mapa.u64 $0, $1, $2;", "=l,l,r")


def mbarrier_arrive_cluster() -> InlinePtx:
    """``(bar: i32 shared, rank: i32)``: arrive once on the mbarrier at the same place in the
    shared memory of the block of that rank (release, cluster scope)."""
    return InlinePtx(
        "{\n.reg .b32 %kj_r;\n"
        "mapa.shared::cluster.u32 %kj_r, $0, $1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%kj_r];\n}",
        "r,r,~{memory}")


def mbarrier_wait_parity_cluster() -> InlinePtx:
    """``(bar: i32 shared, parity: i32)``: wait until the phase of that parity has completed,
    acquiring at cluster scope (``tma_ptx.mbarrier_wait_parity`` acquires at CTA scope): what
    other blocks of the cluster wrote before arriving with release at cluster scope is then
    visible to this thread."""
    return InlinePtx(
        "{\n.reg .pred %kj_p;\n"
        "$$kj_wait:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %kj_p, [$0], $1;\n"
        "@!%kj_p bra $$kj_wait;\n}", "r,r,~{memory}")


def tma_load_multicast(rank: int) -> InlinePtx:
    """``(dst: i32 shared, tensormap: i64 generic, c0..c{rank-1}: i32, bar: i32 shared,
    mask: i16)``: copy the box at the coordinates into the shared memory of every block of the
    cluster whose rank has its bit set in ``mask``, at the same offset as ``dst``; each
    destination block's mbarrier at ``bar``'s offset completes the bytes it received."""
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"a tensor copy has 1 to {MAX_RANK} dimensions, got {rank}")
    coords = ", ".join(f"${2 + d}" for d in range(rank))
    return InlinePtx(
        f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        f".multicast::cluster [$0], [$1, {{{coords}}}], [${rank + 2}], ${rank + 3};",
        "r,l," + "r," * rank + "r,h,~{memory}")
