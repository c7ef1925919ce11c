"""The checked variant of the host target: the sanitizer's instrumentation (memcheck,
racecheck, initcheck, synccheck), compiled only for ``TargetSpec(kind="host", sanitize=True)``.

Every checked function reads its worker's *sanitizer state* (``SAN_*`` in ``kaiojit/target.py``,
a word of the context points to it). A block runs on one worker, its threads one after another
(the fast path) or statement run by statement run (block mode), so the state needs no atomics:

* **memcheck**: every index of every access is checked against the array's shape; a bad one is
  a finding, and the access then uses index 0 (the run goes on, its results not trusted).
* **racecheck**: each access is one word, ``epoch << 32 | thread << 21 | site``. The worker's
  epoch grows by one at every block start, block barrier (``syncthreads``, a grid sync) and
  ``syncwarp``; two accesses race when both come after the last block barrier, by different
  threads, unless both threads (of one warp) took part in a ``syncwarp`` after the first.
  Shared memory has a shadow of three words per element granule (the last write and two
  readers of different threads); global memory has a direct-mapped table keyed by address
  (lossy: a collision forgets an address, it never makes a finding up), which also keeps the
  writer's block, so that two blocks writing one address in a launch are a finding.
  Atomics neither check nor record (they do not race with each other); a write of the value
  the element already holds is no hazard.
* **initcheck**: a shared-memory read at an offset no thread of the block wrote (its last
  write is older than the block's first epoch), and a read of ``kj.device_array`` memory that
  nothing wrote (the runtime's ``UnwrittenMemory``). Kernels that fill shared memory by other
  means (TMA, ``cp.async``, wgmma, mbarriers, other blocks of the cluster, foreign code) are
  not initchecked; accesses of another block's shared memory (``kj.cluster.map_shared_rank``)
  are memchecked only.
* **synccheck**: a warp collective's mask against the lanes that call it (lowered in
  ``host_block.py``); divergent block barriers are reported by the block lowering already.

Each lookup's common case is inline; the rest calls the shadow functions, compiled once per
process (``kaiojit/sanitizer_shadow.py``). What the compiler knows of the kernel
(``host_sanitize_analysis.py``, ``host_sanitize_intervals.py``) spares accesses that cannot
race their lookups, and ``host_sanitize_blocks.py`` runs the blocks that provably have no
finding unchecked.

Where an access's memory space is known (a kernel's array parameter: global; ``kj.shared``;
``kj.local``; a constant array) it is decided here; elsewhere (a device function's array
parameter) at run time: the worker's shared buffer, or the stack between the access and the
driver's frame (a local array), or else global memory.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..kir import Expr
from ..kir.intrinsics import lookup
from ..sanitizer_shadow import (
    ATOMIC,
    READ,
    SAME,
    UNINIT,
    WRITE,
    SanitizerHelpers,
    _epoch_of,
    _guarded,
    _guarded_call,
    _thread_of,
    _word,
    _word_ptr,
)
from ..target import (
    CTX_CHECK,
    CTX_STACK_TOP,
    SAN_BARRIER_EPOCH,
    SAN_BLOCK,
    SAN_BLOCK_EPOCH,
    SAN_EPOCH,
    SAN_KIND_BOUNDS,
    SAN_KIND_INIT,
    SAN_KIND_RACE,
    SAN_KIND_SYNC,
    SAN_LAUNCH_EPOCH,
    SAN_MAX_DIMS,
    SAN_QUIET,
    SAN_SHARED_BASE,
    SAN_SHARED_BYTES,
    SAN_SHARED_SHADOW,
    SAN_SITE_MASK,
    SAN_TABLE,
    SAN_TABLE_MASK,
    SAN_THREAD_SHIFT,
    SAN_UNINIT_COUNT,
    SAN_WARP_SYNC,
)
from .host_sanitize_analysis import (
    CONST,
    GLOBAL,
    LOCAL,
    MAX_CHECKED_ACCESSES,
    QUIET_INTERVAL,
    SHARED,
    UNKNOWN,
    access_count,
    access_quiet,
    array_spaces,
    quiet_params,
    quiet_reads,
    shadow_granule,
    shared_initcheck,
    space_of,
)
from .host_sanitize_blocks import unchecked_copy, versioned_threads
from .llvmtypes import I1, I32, I64, PTR

SANITIZE_SITE = "sanitize"  # the site that marks a checked image (the runtime looks for it)
# warp collectives whose operand 0 is a lane mask (synccheck checks it)
MASKED_COLLECTIVES = frozenset(
    [f"warp.shfl_{k}" for k in ("idx", "up", "down", "xor")]
    + [f"warp.{k}" for k in ("all", "any", "ballot")] + ["sync.syncwarp"])


# --- the instrumentation --------------------------------------------------------------------------

# the state's words that stay the same through a block: read once, at a function's entry
_BLOCK_WORDS = (SAN_BLOCK_EPOCH, SAN_LAUNCH_EPOCH, SAN_BLOCK, SAN_SHARED_BASE, SAN_SHARED_BYTES,
                SAN_SHARED_SHADOW, SAN_TABLE, SAN_TABLE_MASK, SAN_QUIET, SAN_UNINIT_COUNT)


def state_pointer(fl):
    """The worker's sanitizer state (loaded once, at the function's entry, with the words
    that stay the same through a block; the epoch and the last barrier's epoch are kept in
    locals that the barriers update, so that LLVM keeps them in registers)."""
    if fl.san_state is None:
        def emit(b):
            state = b.inttoptr(_word(b, fl.ctx, CTX_CHECK), PTR)
            fl.san_words = {k: _word(b, state, k) for k in _BLOCK_WORDS}
            for k in (SAN_EPOCH, SAN_BARRIER_EPOCH):
                slot = fl.san_words[k] = b.alloca(I64)
                b.store(_word(b, state, k), slot)
            return state
        fl.san_state = fl.at_entry(emit)
    return fl.san_state


def san_word(fl, k: int):
    """Word ``k`` of the state, as this function keeps it."""
    state_pointer(fl)
    value = fl.san_words[k]
    return fl.builder.load(value, typ=I64) if k in (SAN_EPOCH, SAN_BARRIER_EPOCH) else value


def reload_epochs(fl) -> None:
    """After a call of a function with barriers: the epochs it moved on."""
    b = fl.builder
    state = state_pointer(fl)
    for k in (SAN_EPOCH, SAN_BARRIER_EPOCH):
        b.store(_word(b, state, k), fl.san_words[k])


def _set_epoch(fl, k: int, value) -> None:
    b = fl.builder
    b.store(value, _word_ptr(b, state_pointer(fl), k))
    b.store(value, fl.san_words[k])


def report(fl, kind, site: int, detail, indices=(), shape=()) -> None:
    """Count a finding of ``kind`` (an int or an i64) at ``site`` by the current thread; the
    first also records the access's indices and the array's shape (one call: the cold path
    stays small)."""
    b = fl.builder
    n = min(len(indices), SAN_MAX_DIMS)
    if isinstance(kind, int):
        kind = ir.Constant(I64, kind)
    args = [state_pointer(fl), kind, ir.Constant(I64, site), fl.thread_linear(), detail,
            *indices[:n], *shape[:n]]
    b.call(fl.mod.san_helpers.report(n), args)


def checked_indices(fl, indices: list, shape: list, at: T.ArrayType, loc, given: list) -> list:
    """memcheck: every index (negative ones already counted from the end) against its
    dimension; a bad one is a finding (reported as ``given``, the user's indices) and index 0
    is used instead. Records the access for the shadow (``fl.san_access``)."""
    b = fl.builder
    site = fl.mod.add_site("access", loc, array=fl.array_name, type=str(at),
                           space=fl.array_space)
    bad_dim = None
    for d, (v, n) in enumerate(zip(indices, shape)):
        bad = b.icmp_unsigned(">=", v, n)
        dim = b.select(bad, ir.Constant(I64, d), bad_dim if bad_dim is not None
                       else ir.Constant(I64, -1))
        bad_dim = dim if bad_dim is None else b.select(
            b.icmp_signed(">=", bad_dim, ir.Constant(I64, 0)), bad_dim, dim)
    out = list(indices)
    any_bad = None
    if bad_dim is not None:
        any_bad = b.icmp_signed(">=", bad_dim, ir.Constant(I64, 0))
        with b.if_then(any_bad, likely=False):
            # the index after a negative one counted from the end, as debug=True reports it
            report(fl, SAN_KIND_BOUNDS, site, bad_dim, indices, shape)
        out = [b.select(any_bad, ir.Constant(I64, 0), v) for v in indices]
    size = getattr(at.dtype, "itemsize", 1) or 1
    fl.san_access = (site, given, shape, fl.array_space, any_bad, fl.array_quiet, size)
    return out


def track(fl, ptr, mode: int, value=None) -> None:
    """racecheck and initcheck of the access whose element pointer is ``ptr`` (the last one
    ``checked_indices`` saw), by its memory space; ``value`` is what a write stores. One
    report call per access, for whichever check found something."""
    access = fl.san_accesses.pop(ptr, None)
    if access is None:
        return
    site, indices, shape, space, bad, quiet, size = access
    results = []
    if space == GLOBAL:
        results.append(_global_checks(fl, ptr, mode, value, site, quiet, size))
    if space == UNKNOWN:
        results.append(_global_initcheck(fl, ptr, mode, size))
    if space in (SHARED, UNKNOWN):
        results.append(_racecheck(fl, ptr, mode, value, site, space, quiet))
    results = [r for r in results if r is not None]
    if results:
        b = fl.builder
        result = results[0]
        for other in results[1:]:
            result = b.select(b.icmp_unsigned("!=", result, ir.Constant(I64, 0)), result, other)
        _report_shadow(fl, result, site, indices, shape, bad)


def _global_checks(fl, ptr, mode: int, value, site, quiet: int, size: int):
    """A global access's initcheck and racecheck: one call (``kj.san.global_checks``),
    made only where the launch has unwritten memory or this array needs a racecheck."""
    b = fl.builder
    state = state_pointer(fl)
    tracked = b.icmp_unsigned("!=", san_word(fl, SAN_UNINIT_COUNT), ir.Constant(I64, 0))
    race = ir.Constant(I1, mode != ATOMIC)
    quiet &= ~QUIET_INTERVAL
    if quiet and mode != ATOMIC:
        allowed = b.and_(san_word(fl, SAN_QUIET), ir.Constant(I64, quiet))
        race = b.icmp_unsigned("==", allowed, ir.Constant(I64, 0))
    need = b.or_(tracked, race) if not isinstance(race, ir.Constant) else \
        (ir.Constant(I1, 1) if race.constant else tracked)

    def call():
        same = _unchanged(b, ptr, value) if mode == WRITE and value is not None else None
        w = ir.Constant(I64, mode) if same is None else \
            b.select(same, ir.Constant(I64, SAME), ir.Constant(I64, mode))
        return b.call(fl.mod.san_helpers.global_checks(), [
            state, b.ptrtoint(ptr, I64), _packed(fl, site), w, ir.Constant(I64, size), race])
    return _guarded(b, need, call)


def _racecheck(fl, ptr, mode: int, value, site, space, quiet: int):
    """The shadow lookup of an access (racecheck, and shared memory's initcheck): 0, a
    HAZARD_* or INIT_SHARED (an i64), or None where there is nothing to look up."""
    b = fl.builder
    state = state_pointer(fl)
    if quiet & QUIET_INTERVAL:
        if space == SHARED and mode == READ:
            return _init_only(fl, state, ptr, site)
        quiet &= ~QUIET_INTERVAL
    if quiet:  # no race is possible on this array in a launch that allows it
        allowed = b.and_(san_word(fl, SAN_QUIET), ir.Constant(I64, quiet))
        return _guarded(b, b.icmp_unsigned("==", allowed, ir.Constant(I64, 0)),
                        lambda: _track(fl, state, ptr, mode, value, site, space))
    return _track(fl, state, ptr, mode, value, site, space)


def _unchanged(b: ir.IRBuilder, ptr, value):
    """Whether storing ``value`` at ``ptr`` leaves the memory as it is (bit for bit)."""
    ty = value.type
    if isinstance(ty, (ir.HalfType, ir.FloatType, ir.DoubleType)):
        bits = ir.IntType({ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(ty)])
        return b.icmp_unsigned("==", b.load(ptr, typ=bits), b.bitcast(value, bits))
    if isinstance(ty, ir.IntType):
        return b.icmp_unsigned("==", b.load(ptr, typ=ty), value)
    return ir.Constant(I1, 0)


def _track(fl, state, ptr, mode, value, site, space):
    b = fl.builder
    addr = b.ptrtoint(ptr, I64)
    me = _packed(fl, site)
    same = _unchanged(b, ptr, value) if mode == WRITE and value is not None else None
    w = ir.Constant(I64, mode) if same is None else \
        b.select(same, ir.Constant(I64, SAME), ir.Constant(I64, mode))
    helpers = fl.mod.san_helpers
    offset = b.sub(addr, san_word(fl, SAN_SHARED_BASE))
    in_shared = b.icmp_unsigned("<", offset, san_word(fl, SAN_SHARED_BYTES))
    init = ir.Constant(I1, int(fl.mod.san_initcheck))
    if space == SHARED:
        return _guarded(b, in_shared, lambda: _inline_shared(fl, state, offset, me, mode, same))
    else:
        is_global = b.not_(in_shared)
        stack = b.ptrtoint(b.call(fl.mod.declare("llvm.stacksave.p0", PTR, []), []), I64)
        top = b.load(b.gep(fl.ctx, [ir.Constant(I64, CTX_STACK_TOP)], source_etype=I64),
                     typ=I64)
        local = b.and_(b.icmp_unsigned(">=", addr, stack), b.icmp_unsigned("<", addr, top))
        is_global = b.and_(is_global, b.not_(local))
        shared_result = _guarded_call(b, in_shared, helpers.shared(),
                                      [state, helpers.granule_of(b, offset), me, w, init])
        if mode == ATOMIC:
            is_global = ir.Constant(I1, 0)
        global_result = _guarded_call(b, is_global, helpers.global_(), [state, addr, me, w])
        return b.or_(shared_result, global_result)


def _init_only(fl, state, ptr, site):
    """A quiet shared read: only whether a thread of the block wrote the element."""
    if not fl.mod.san_initcheck:
        return None
    b = fl.builder
    helpers = fl.mod.san_helpers
    offset = b.sub(b.ptrtoint(ptr, I64), san_word(fl, SAN_SHARED_BASE))

    def lookup():
        entry = helpers.shared_entry(b, lambda k: san_word(fl, k), offset)
        written = b.icmp_unsigned(">=", _epoch_of(b, _word(b, entry, 0)),
                                  san_word(fl, SAN_BLOCK_EPOCH))
        return _fast_or_slow(b, written, lambda: None, lambda: b.call(helpers.shared(), [
            state, helpers.granule_of(b, offset), _packed(fl, site), ir.Constant(I64, READ),
            ir.Constant(I1, 1)]))
    return _guarded(b, b.icmp_unsigned("<", offset, san_word(fl, SAN_SHARED_BYTES)), lookup)


def _packed(fl, site: int):
    """This thread's access at ``site`` now, packed (epoch, thread, site)."""
    b = fl.builder
    return b.or_(b.shl(san_word(fl, SAN_EPOCH), ir.Constant(I64, 32)),
                 b.or_(b.shl(b.and_(fl.thread_linear(), ir.Constant(I64, 0x7FF)),
                             ir.Constant(I64, SAN_THREAD_SHIFT)),
                       ir.Constant(I64, site & SAN_SITE_MASK)))


def _global_initcheck(fl, ptr, mode: int, size: int):
    """initcheck of global memory: in a launch given ``kj.device_array`` memory that nothing
    wrote yet (``SAN_UNINIT_COUNT``), a read of an unwritten element is INIT_GLOBAL and a
    write marks it (``kj.san.unwritten``); else 0."""
    b = fl.builder
    state = state_pointer(fl)
    tracked = b.icmp_unsigned("!=", san_word(fl, SAN_UNINIT_COUNT), ir.Constant(I64, 0))
    return _guarded(b, tracked, lambda: b.call(fl.mod.san_helpers.unwritten(), [
        state, b.ptrtoint(ptr, I64), ir.Constant(I64, mode), ir.Constant(I64, size)]),
        likely=False)


def _free(b, other, bar, mt):
    """The inline test that ``other`` (packed) cannot race with this thread's access: it is
    older than the last barrier, or this thread's own."""
    return b.or_(b.icmp_unsigned("<", _epoch_of(b, other), bar),
                 b.icmp_unsigned("==", _thread_of(b, other), mt))


def _fast_or_slow(b: ir.IRBuilder, ok, fast, slow):
    """``fast()`` where ``ok`` (the common case, no call), else ``slow()``: an i64 result."""
    with b.if_else(ok, likely=True) as (then, otherwise):
        with then:
            fast()
            fast_block = b.block
        with otherwise:
            slow_value = slow()
            slow_block = b.block
    result = b.phi(I64)
    result.add_incoming(ir.Constant(I64, 0), fast_block)
    result.add_incoming(slow_value, slow_block)
    return result


def _record_reader(b, entry, r1, me, mt, bar, spare: int) -> None:
    """A read's record, without a branch: R1 if it is older than the last barrier, else R2 if
    R1 is another thread's, else the entry's spare word."""
    fresh = b.icmp_unsigned("<", _epoch_of(b, r1), bar)
    other = b.icmp_unsigned("!=", _thread_of(b, r1), mt)
    slot = b.select(fresh, ir.Constant(I64, 1),
                    b.select(other, ir.Constant(I64, 2), ir.Constant(I64, spare)))
    b.store(me, _word_ptr(b, entry, slot))


def _inline_shared(fl, state, offset, me, mode: int, same):
    """The shared shadow's common cases inline (a read of what an earlier interval or this
    thread wrote; a write no other thread's access of this interval precedes); the rest, and
    every atomic, in ``kj.san.shared``."""
    b = fl.builder
    helpers = fl.mod.san_helpers
    init = bool(fl.mod.san_initcheck)
    slow_mode = ir.Constant(I64, mode) if same is None else         b.select(same, ir.Constant(I64, SAME), ir.Constant(I64, mode))

    def slow():
        return b.call(helpers.shared(), [state, helpers.granule_of(b, offset), me, slow_mode,
                                         ir.Constant(I1, init)])

    if mode == ATOMIC:
        return slow()
    entry = helpers.shared_entry(b, lambda k: san_word(fl, k), offset)
    bar = san_word(fl, SAN_BARRIER_EPOCH)
    mt = _thread_of(b, me)
    w = _word(b, entry, 0)
    if mode == READ:
        r1 = _word(b, entry, 1)
        ok = _free(b, w, bar, mt)
        if init:
            ok = b.and_(ok, b.icmp_unsigned(">=", _epoch_of(b, w),
                                            san_word(fl, SAN_BLOCK_EPOCH)))
        return _fast_or_slow(b, ok, lambda: _record_reader(b, entry, r1, me, mt, bar, 3), slow)
    ok = b.and_(_free(b, w, bar, mt), b.and_(_free(b, _word(b, entry, 1), bar, mt),
                                              _free(b, _word(b, entry, 2), bar, mt)))
    if same is not None:
        ok = b.and_(ok, b.not_(same))  # an unchanged value: marked in the slow path
    return _fast_or_slow(b, ok, lambda: b.store(me, _word_ptr(b, entry, 0)), slow)


def _report_shadow(fl, result, site, indices, shape, bad) -> None:
    """Report a shadow lookup's finding (``result``: 0, a HAZARD_* or UNINIT)."""
    b = fl.builder
    if bad is not None:  # an access memcheck reported (it used index 0 instead)
        result = b.select(bad, ir.Constant(I64, 0), result)
    with b.if_then(b.icmp_unsigned("!=", result, ir.Constant(I64, 0)), likely=False):
        is_init = b.icmp_unsigned(">=", result, ir.Constant(I64, UNINIT))
        kind = b.select(is_init, ir.Constant(I64, SAN_KIND_INIT), ir.Constant(I64, SAN_KIND_RACE))
        report(fl, kind, site, result, indices, shape)


def check_warp_mask(bl, e: Expr) -> None:
    """synccheck of a warp collective ``(mask, ...)``: every lane its mask names (of those
    the block has) calls it, and so does the calling thread's own lane."""
    b = bl.builder
    c31, one = ir.Constant(I64, 31), ir.Constant(I32, 1)
    calling = bl.per_thread(I32)  # by warp: the lanes that call it

    def clear(t):
        with b.if_then(b.icmp_unsigned("==", b.and_(t, c31), ir.Constant(I64, 0))):
            b.store(ir.Constant(I32, 0), bl.at(calling, b.lshr(t, ir.Constant(I64, 5)),
                                                 I32))
    bl.thread_loop(clear, only_active=False)

    def gather(t):
        slot = bl.at(calling, b.lshr(t, ir.Constant(I64, 5)), I32)
        bit = b.shl(one, b.trunc(b.and_(t, c31), I32))
        b.store(b.or_(b.load(slot, typ=I32), bit), slot)
    bl.thread_loop(gather)
    site = bl.mod.add_site("warp", e.loc, op=lookup(e.attr).user_name)

    def check(t):
        mask = bl.expr(e.args[0])
        lane = b.and_(t, c31)
        base = b.sub(t, lane)
        left = b.sub(bl.n, base)  # lanes the block has in this warp
        exists = b.select(b.icmp_unsigned(">=", left, ir.Constant(I64, 32)),
                          ir.Constant(I32, -1),
                          b.sub(b.shl(one, b.trunc(left, I32)), one))
        here = b.load(bl.at(calling, b.lshr(t, ir.Constant(I64, 5)), I32), typ=I32)
        missing = b.and_(b.and_(mask, exists), b.not_(here))
        own = b.shl(one, b.trunc(lane, I32))
        missing = b.or_(missing, b.and_(own, b.not_(mask)))
        with b.if_then(b.icmp_unsigned("!=", missing, ir.Constant(I32, 0)), likely=False):
            detail = b.or_(b.zext(mask, I64), b.shl(b.zext(missing, I64),
                                                    ir.Constant(I64, 32)))
            report(bl, SAN_KIND_SYNC, site, detail)
    bl.thread_loop(check)


def bump_epoch(fl) -> None:
    """A block-level barrier: accesses after it are ordered after those before it."""
    b = fl.builder
    epoch = b.add(_word(b, state_pointer(fl), SAN_EPOCH), ir.Constant(I64, 1))
    _set_epoch(fl, SAN_EPOCH, epoch)
    _set_epoch(fl, SAN_BARRIER_EPOCH, epoch)


def warp_sync(bl) -> None:
    """A ``syncwarp`` (block lowering): a new epoch, which every thread that called it
    records as its last syncwarp; two accesses of one warp's threads are ordered when both
    threads took part in a syncwarp after the first (``SanitizerHelpers._conflict``)."""
    b = bl.builder
    state = state_pointer(bl)
    epoch = b.add(_word(b, state, SAN_EPOCH), ir.Constant(I64, 1))
    _set_epoch(bl, SAN_EPOCH, epoch)
    synced = b.inttoptr(_word(b, state, SAN_WARP_SYNC), PTR)
    bl.thread_loop(lambda t: b.store(epoch, _word_ptr(b, synced, t)))


def after_sync(bl, decl) -> None:
    """The epoch after a barrier or a syncwarp (``decl``, the intrinsic just lowered)."""
    if decl.barrier:
        bump_epoch(bl)
    elif decl.name == "sync.syncwarp":
        warp_sync(bl)


def begin_block(b: ir.IRBuilder, ctx, block_index) -> None:
    """The driver, before each block: a new epoch, which the block starts at."""
    state = b.inttoptr(_word(b, ctx, CTX_CHECK), PTR)
    ptr = _word_ptr(b, state, SAN_EPOCH)
    epoch = b.add(b.load(ptr, typ=I64), ir.Constant(I64, 1))
    b.store(epoch, ptr)
    b.store(epoch, _word_ptr(b, state, SAN_BLOCK_EPOCH))
    b.store(epoch, _word_ptr(b, state, SAN_BARRIER_EPOCH))
    b.store(block_index, _word_ptr(b, state, SAN_BLOCK))


def mark_stack_top(b: ir.IRBuilder, mod, ctx) -> None:
    """The driver's frame address: local arrays of the blocks it runs lie below it."""
    frame = b.call(mod.declare("llvm.frameaddress.p0", PTR, [I32]), [ir.Constant(I32, 0)])
    b.store(b.ptrtoint(frame, I64),
            b.gep(ctx, [ir.Constant(I64, CTX_STACK_TOP)], source_etype=I64))


__all__ = [
    "ATOMIC", "CONST", "GLOBAL", "LOCAL", "MASKED_COLLECTIVES", "MAX_CHECKED_ACCESSES", "READ",
    "SANITIZE_SITE", "SHARED", "UNKNOWN", "WRITE", "SanitizerHelpers", "access_count",
    "access_quiet", "after_sync", "array_spaces", "begin_block", "bump_epoch", "check_warp_mask",
    "checked_indices", "mark_stack_top", "quiet_params", "quiet_reads", "reload_epochs",
    "report", "san_word", "shadow_granule", "shared_initcheck", "space_of", "track",
    "unchecked_copy", "versioned_threads",
]
