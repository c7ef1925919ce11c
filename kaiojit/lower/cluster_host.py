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
* The cluster barrier counts arrivals on the cluster's counter, once per block after every
  thread of the block arrived; the arrival that makes every block that has not returned
  arrived (``CLUSTER_LIVE``) completes the phase: it flips bit 63 and clears the count. A
  block that returns leaves the count of live blocks, and completes a phase the others all
  arrived on (``kaiojit/runtime/blockthreads.py``): as on the GPU, the barrier waits for the
  non-exited threads. A block's token (``CTX_CLUSTER_TOKEN``) is the phase it arrived on; its
  wait spins (yielding its core) until the phase differs. A fault recorded anywhere ends the
  wait, and a deadlock of the cluster's blocks is reported (:func:`blocked_wait`), not a hang.
"""

from __future__ import annotations

from llvmlite import ir

from ..target import (
    CLUSTER_BARRIER,
    CLUSTER_EPOCH,
    CLUSTER_FAILS,
    CLUSTER_LIVE,
    CLUSTER_SHARED,
    CTX_BLOCK_IDX,
    CTX_CLUSTER_DIM,
    CTX_CLUSTER_STATE,
    CTX_CLUSTER_TOKEN,
    CTX_GRID,
    CTX_LAUNCH,
    CTX_SHARED,
    ERR_CLUSTER_RANK,
    ERR_CLUSTER_STUCK,
    LAUNCH_ERROR,
)
from .host import ctx_word, ctx_word_ptr, record_error
from .llvmtypes import I32, I64, PTR

CLUSTER_SITE = "cluster"  # a host image's site kind: its blocks need their cluster's at once
PHASE = 1 << 63  # the cluster barrier counter's phase bit; the bits below count arrivals
HOST_SYMBOLS = ("sched_yield",)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def dims(b: ir.IRBuilder, ctx) -> list:
    """The cluster's shape in blocks (i64 x, y, z)."""
    return [cluster_dim(b, ctx, a) for a in range(3)]


def cluster_dim(b: ir.IRBuilder, ctx, axis: int):
    """The cluster's size in blocks along ``axis`` (``%cluster_nctaid``)."""
    return ctx_word(b, ctx, CTX_CLUSTER_DIM + axis)


def size(b: ir.IRBuilder, ctx):
    """The blocks in the cluster (i64)."""
    x, y, z = dims(b, ctx)
    return b.mul(b.mul(x, y), z)


def block_in_cluster(b: ir.IRBuilder, ctx, axis: int):
    """The block's index in its cluster along ``axis`` (``%cluster_ctaid``)."""
    return b.urem(ctx_word(b, ctx, CTX_BLOCK_IDX + axis), cluster_dim(b, ctx, axis))


def cluster_index(b: ir.IRBuilder, ctx, axis: int):
    """The cluster's index in the grid along ``axis`` (``%clusterid``)."""
    return b.udiv(ctx_word(b, ctx, CTX_BLOCK_IDX + axis), cluster_dim(b, ctx, axis))


def grid_in_clusters(b: ir.IRBuilder, ctx, axis: int):
    """The grid's size in clusters along ``axis`` (``%nclusterid``)."""
    return b.udiv(ctx_word(b, ctx, CTX_GRID + axis), cluster_dim(b, ctx, axis))


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
    """The block arrives on the cluster barrier (once, after all its threads did): the
    counter's phase (bit 63) before the arrival is its token; the arrival that makes every
    live block arrived completes the phase."""
    b = bl.builder
    counter = _counter(b, bl.ctx)
    old = b.atomic_rmw("add", counter, _i64(1), "seq_cst")
    complete_if_all_arrived(bl, counter, b.add(old, _i64(1)))
    b.store(b.and_(old, _i64(PHASE)), ctx_word_ptr(b, bl.ctx, CTX_CLUSTER_TOKEN))


def complete_if_all_arrived(bl, counter, word) -> None:
    """Complete the phase (flip bit 63, no arrival) if ``word``, the counter as this block
    left it, counts every live block; one attempt: a later change of the counter is another
    block's arrival, and that block completes it."""
    b = bl.builder
    state = b.inttoptr(ctx_word(b, bl.ctx, CTX_CLUSTER_STATE), PTR)
    live = b.load_atomic(ctx_word_ptr(b, state, CLUSTER_LIVE), "seq_cst", 8, typ=I64)
    arrived = b.and_(word, _i64(PHASE - 1))
    with b.if_then(b.icmp_unsigned(">=", arrived, live)):
        b.cmpxchg(counter, word, b.xor(b.and_(word, _i64(PHASE)), _i64(PHASE)), "seq_cst",
                  "seq_cst")


def barrier_wait(bl, site: int) -> None:
    """The block waits until the phase it arrived on has completed."""
    b = bl.builder
    token = ctx_word(b, bl.ctx, CTX_CLUSTER_TOKEN)
    counter = _counter(b, bl.ctx)

    def complete():
        now = b.load_atomic(counter, "seq_cst", 8, typ=I64)
        return b.icmp_unsigned("!=", b.and_(now, _i64(PHASE)), token)
    blocked_wait(bl, complete, ERR_CLUSTER_STUCK, site, _i64(0), _i64(0))


def blocked_wait(bl, complete, kind: int, site: int, detail, thread) -> None:
    """Spin until ``complete()`` (emitted at each check: an i1) holds, yielding the core
    between checks; a fault recorded anywhere leaves the block, and a deadlock is the launch's
    error ``kind`` (``detail``, ``thread``: its index and thread).

    A deadlock: every block of the cluster that has not returned waits, and each has seen its
    wait incomplete in one *epoch* of the cluster (the state's count of blocks starting or
    stopping a wait, or returning). A block changes what another waits for only while it runs,
    before it starts waiting or after it stopped, so once all live blocks saw no progress in
    the current epoch, none ever will. In a cluster of one that is the first incomplete check.
    """
    b = bl.builder
    state = b.inttoptr(ctx_word(b, bl.ctx, CTX_CLUSTER_STATE), PTR)
    epoch = ctx_word_ptr(b, state, CLUSTER_EPOCH)
    fails = ctx_word_ptr(b, state, CLUSTER_FAILS)
    launch = b.inttoptr(ctx_word(b, bl.ctx, CTX_LAUNCH), PTR)
    counted = bl.alloca(I64, name="cluster.counted")  # the epoch this block last counted in
    b.store(_i64(-1), counted)
    b.atomic_rmw("add", epoch, _i64(1), "seq_cst")
    fn = bl.llfunc
    check, leave, failed, count, go_on, done = (fn.append_basic_block(f"cluster.{n}") for n in (
        "check", "leave", "failed", "count", "yield", "done"))
    b.branch(check)
    b.position_at_end(check)
    seen = b.load_atomic(epoch, "seq_cst", 8, typ=I64)
    b.cbranch(complete(), leave, failed)
    b.position_at_end(leave)
    b.atomic_rmw("add", epoch, _i64(1), "seq_cst")
    b.branch(done)
    b.position_at_end(failed)
    faulted = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), _i64(0))
    with b.if_then(faulted, likely=False):
        b.branch(bl.exit_bb)
    b.cbranch(b.icmp_unsigned("==", b.load(counted, typ=I64), seen), go_on, count)
    b.position_at_end(count)
    b.store(seen, counted)
    mark = b.shl(seen, _i64(32))
    old = b.load_atomic(fails, "seq_cst", 8, typ=I64)
    cas = fn.append_basic_block("cluster.cas")
    b.branch(cas)
    b.position_at_end(cas)
    before = b.phi(I64)
    before.add_incoming(old, count)
    counted_epoch = b.lshr(before, _i64(32))
    same = b.icmp_unsigned("==", counted_epoch, seen)
    after = b.select(same, b.add(before, _i64(1)), b.or_(mark, _i64(1)))
    # a check of an epoch already past counts for nothing (the count moves forward only)
    after = b.select(b.icmp_unsigned(">", counted_epoch, seen), before, after)
    pair = b.cmpxchg(fails, before, after, "seq_cst", "seq_cst")
    before.add_incoming(b.extract_value(pair, 0), cas)
    counted_in = fn.append_basic_block("cluster.counted")
    b.cbranch(b.extract_value(pair, 1), counted_in, cas)
    b.position_at_end(counted_in)
    waiting = b.and_(after, _i64(0xFFFFFFFF))
    live = b.load_atomic(ctx_word_ptr(b, state, CLUSTER_LIVE), "seq_cst", 8, typ=I64)
    still = b.icmp_unsigned("==", b.load_atomic(epoch, "seq_cst", 8, typ=I64), seen)
    stuck = b.and_(still, b.icmp_unsigned(">=", waiting, live))
    with b.if_then(stuck, likely=False):
        record_error(bl, kind, site, detail, live, thread)
        b.branch(bl.exit_bb)
    b.branch(go_on)
    b.position_at_end(go_on)
    b.call(bl.mod.declare("sched_yield", I32, []), [])
    b.branch(check)
    b.position_at_end(done)


__all__ = ["CLUSTER_SITE", "HOST_SYMBOLS", "barrier_arrive", "barrier_wait", "block_in_cluster",
           "blocked_wait", "checked_rank", "cluster_dim", "cluster_index", "dims",
           "grid_in_clusters", "map_address", "map_pointer", "mark", "rank", "size"]
