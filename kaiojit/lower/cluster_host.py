"""Thread-block clusters on the host: what the cpu backend's generated code reads and does.

A block's context holds its cluster's shape (``CTX_CLUSTER_DIM``: 1, 1, 1 for a launch without
a cluster, as on the GPU, where every block is a cluster of one) and a pointer to the state its
cluster's blocks share (``CTX_CLUSTER_STATE``, ``CLUSTER_*`` words in ``kaiojit/target.py``):
the cluster barrier's counter and the shared memory of each block, by rank. The cpu backend
runs the blocks of a cluster at once, each on a thread of its own
(``kaiojit/runtime/clusters.py``), so they can wait for each other and reach each other's
shared memory.

* The special registers follow from the block index: the rank in the cluster is x-fastest
  (``%cluster_ctarank``), the cluster index is the block index divided by the shape.
* A shared address maps to another block's as ``address - own shared + that block's shared``:
  every block's shared memory holds the same variables at the same offsets.
* The cluster barrier is the grid barrier's algorithm (``kaiojit/intrinsics/cg.py``) on the
  cluster's counter, once per block after every thread of the block arrived: rank 0 adds
  ``0x80000000 - (size - 1)``, the others 1, so bit 31 flips once all arrived; the counter
  before the block's add is its token (``CTX_CLUSTER_TOKEN``), and a wait spins (yielding its
  core) until bit 31 differs from the token's. A fault recorded anywhere ends the wait.
"""

from __future__ import annotations

from llvmlite import ir

from ..target import (
    CLUSTER_BARRIER,
    CLUSTER_SHARED,
    CTX_BLOCK_IDX,
    CTX_CLUSTER_DIM,
    CTX_CLUSTER_STATE,
    CTX_CLUSTER_TOKEN,
    CTX_GRID,
    CTX_LAUNCH,
    CTX_SHARED,
    ERR_CLUSTER_RANK,
    LAUNCH_ERROR,
)
from .host import ctx_word, ctx_word_ptr, record_error
from .llvmtypes import I32, I64, PTR

CLUSTER_SITE = "cluster"  # a host image's site kind: its blocks need their cluster's at once
FLIP = 0x80000000
HOST_SYMBOLS = ("sched_yield",)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def dims(b: ir.IRBuilder, ctx) -> list:
    """The cluster's shape in blocks (i64 x, y, z)."""
    return [ctx_word(b, ctx, CTX_CLUSTER_DIM + a) for a in range(3)]


def size(b: ir.IRBuilder, ctx):
    """The blocks in the cluster (i64)."""
    x, y, z = dims(b, ctx)
    return b.mul(b.mul(x, y), z)


def block_in_cluster(b: ir.IRBuilder, ctx, axis: int):
    """The block's index in its cluster along ``axis`` (``%cluster_ctaid``)."""
    return b.urem(ctx_word(b, ctx, CTX_BLOCK_IDX + axis), ctx_word(b, ctx, CTX_CLUSTER_DIM + axis))


def cluster_index(b: ir.IRBuilder, ctx, axis: int):
    """The cluster's index in the grid along ``axis`` (``%clusterid``)."""
    return b.udiv(ctx_word(b, ctx, CTX_BLOCK_IDX + axis), ctx_word(b, ctx, CTX_CLUSTER_DIM + axis))


def grid_in_clusters(b: ir.IRBuilder, ctx, axis: int):
    """The grid's size in clusters along ``axis`` (``%nclusterid``)."""
    return b.udiv(ctx_word(b, ctx, CTX_GRID + axis), ctx_word(b, ctx, CTX_CLUSTER_DIM + axis))


def rank(b: ir.IRBuilder, ctx):
    """The block's rank in its cluster, x fastest (``%cluster_ctarank``, i64)."""
    dx, dy, _ = dims(b, ctx)
    x, y, z = (block_in_cluster(b, ctx, a) for a in range(3))
    return b.add(x, b.mul(dx, b.add(y, b.mul(dy, z))))


def mark(fl, e, op: str) -> int:
    """Mark the image as needing its clusters' blocks at once; the site names ``op``."""
    return fl.mod.add_site(CLUSTER_SITE, e.loc, op=op)


def checked_rank(fl, value, site: int, thread):
    """``value`` (an integer rank) as i64, or, when it is not a rank of the cluster, the
    launch's error (``ERR_CLUSTER_RANK``) and the block's own rank (so what follows stays in
    memory the block owns)."""
    b = fl.builder
    r = b.zext(value, I64) if value.type.width < 64 else value
    n = size(b, fl.ctx)
    bad = b.icmp_unsigned(">=", r, n)
    with b.if_then(bad, likely=False):
        record_error(fl, ERR_CLUSTER_RANK, site, r, n, thread)
    return b.select(bad, rank(b, fl.ctx), r)


def map_address(fl, address, to_rank):
    """The address (i64) of the same shared memory location in the block of rank ``to_rank``
    (i64, a rank of the cluster)."""
    b = fl.builder
    state = b.inttoptr(ctx_word(b, fl.ctx, CTX_CLUSTER_STATE), PTR)
    there = b.load(b.gep(state, [b.add(to_rank, _i64(CLUSTER_SHARED))], source_etype=I64),
                   typ=I64)
    return b.add(b.sub(address, ctx_word(b, fl.ctx, CTX_SHARED)), there)


def map_pointer(fl, ptr, to_rank):
    """:func:`map_address` of a pointer, as a pointer."""
    b = fl.builder
    return b.inttoptr(map_address(fl, b.ptrtoint(ptr, I64), to_rank), PTR)


def _counter(b: ir.IRBuilder, ctx):
    state = b.inttoptr(ctx_word(b, ctx, CTX_CLUSTER_STATE), PTR)
    return ctx_word_ptr(b, state, CLUSTER_BARRIER)


def barrier_arrive(bl) -> None:
    """The block arrives on the cluster barrier (once, after all its threads did)."""
    b = bl.builder
    n = b.trunc(size(b, bl.ctx), I32)
    first = b.icmp_unsigned("==", rank(b, bl.ctx), _i64(0))
    inc = b.select(first, b.sub(ir.Constant(I32, FLIP), b.sub(n, ir.Constant(I32, 1))),
                   ir.Constant(I32, 1))
    old = b.atomic_rmw("add", _counter(b, bl.ctx), inc, "seq_cst")
    b.store(b.zext(old, I64), ctx_word_ptr(b, bl.ctx, CTX_CLUSTER_TOKEN))


def barrier_wait(bl) -> None:
    """The block waits until every block of the cluster arrived after its own arrival."""
    b = bl.builder
    token = b.trunc(ctx_word(b, bl.ctx, CTX_CLUSTER_TOKEN), I32)
    counter = _counter(b, bl.ctx)
    launch = b.inttoptr(ctx_word(b, bl.ctx, CTX_LAUNCH), PTR)
    spin = bl.llfunc.append_basic_block("cluster.spin")
    wait = bl.llfunc.append_basic_block("cluster.wait")
    done = bl.llfunc.append_basic_block("cluster.done")
    b.branch(spin)
    b.position_at_end(spin)
    now = b.load_atomic(counter, "seq_cst", 4, typ=I32)
    flipped = b.icmp_unsigned("!=", b.and_(b.xor(token, now), ir.Constant(I32, FLIP)),
                              ir.Constant(I32, 0))
    b.cbranch(flipped, done, wait)
    b.position_at_end(wait)
    yield_core(bl, launch)
    b.branch(spin)
    b.position_at_end(done)


def yield_core(bl, launch) -> None:
    """Leave the block if the launch recorded a fault, else give up the core once (a wait on
    another block of the cluster, which runs on another thread)."""
    b = bl.builder
    failed = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), _i64(0))
    go_on = bl.llfunc.append_basic_block("cluster.yield")
    b.cbranch(failed, bl.exit_bb, go_on)
    b.position_at_end(go_on)
    b.call(bl.mod.declare("sched_yield", I32, []), [])


__all__ = ["CLUSTER_SITE", "HOST_SYMBOLS", "barrier_arrive", "barrier_wait", "block_in_cluster",
           "checked_rank", "cluster_index", "dims", "grid_in_clusters", "map_address",
           "map_pointer", "mark", "rank", "size", "yield_core"]
