"""The checked variant of the host target: the sanitizer's instrumentation (memcheck,
racecheck, initcheck, synccheck), compiled only for ``TargetSpec(kind="host", sanitize=True)``.

Every checked function reads its worker's *sanitizer state* (``SAN_*`` in ``kaiojit/target.py``,
a word of the context points to it). A block runs on one worker, its threads one after another
(the fast path) or statement run by statement run (block mode), so the state needs no atomics:

* **memcheck**: every index of every access is checked against the array's shape; a bad one is
  a finding, and the access then uses index 0 (the run goes on, its results not trusted).
* **racecheck**: each access is one word, ``epoch << 32 | thread << 21 | site``. The worker's
  epoch grows by one at every block start and every barrier (``syncthreads``, ``syncwarp``,
  a grid sync), so two accesses of one epoch by different threads are not ordered by a
  barrier. Shared memory has a shadow of three words per byte offset (the last write and two
  readers of different threads); global memory has a direct-mapped table keyed by address
  (lossy: a collision forgets an address, it never makes a finding up), which also keeps the
  writer's block, so that two blocks writing one address in a launch are a finding.
  Atomics neither check nor record (they do not race with each other).
* **initcheck**: a shared-memory read at an offset no thread of the block wrote (its last
  write is older than the block's first epoch). Kernels that fill shared memory by other means
  (TMA, ``cp.async``, wgmma, mbarriers, other blocks of the cluster, foreign code) are not
  initchecked; accesses of another block's shared memory (``kj.cluster.map_shared_rank``) are
  memchecked only.
* **synccheck**: a warp collective's mask against the lanes that call it (lowered in
  ``host_block.py``); divergent block barriers are reported by the block lowering already.

Where an access's memory space is known (a kernel's array parameter: global; ``kj.shared``;
``kj.local``; a constant array) it is decided here; elsewhere (a device function's array
parameter) at run time: the worker's shared buffer, or the stack between the access and the
driver's frame (a local array), or else global memory.
"""

from __future__ import annotations

from llvmlite import ir

from .. import kir
from .. import types as T
from ..kir import Expr
from ..kir.analysis import is_thread_index, written_params
from ..kir.intrinsics import lookup
from ..target import (
    CTX_CHECK,
    CTX_STACK_TOP,
    HAZARD_BLOCKS,
    HAZARD_RAW,
    HAZARD_WAR,
    HAZARD_WAW,
    SAN_BLOCK,
    SAN_BLOCK_EPOCH,
    SAN_COUNTS,
    SAN_DETAIL,
    SAN_EPOCH,
    SAN_FIRST_BLOCK,
    SAN_INDEX,
    SAN_KIND,
    SAN_KIND_BOUNDS,
    SAN_KIND_INIT,
    SAN_KIND_RACE,
    SAN_KIND_SYNC,
    SAN_LAUNCH_EPOCH,
    SAN_MAX_DIMS,
    SAN_NDIM,
    SAN_OTHER,
    SAN_OTHER_BLOCK,
    SAN_QUIET,
    SAN_SCRATCH,
    SAN_SHAPE,
    SAN_SHARED_BASE,
    SAN_SHARED_BYTES,
    SAN_SHARED_SHADOW,
    SAN_SITE,
    SAN_SITE_MASK,
    SAN_TABLE,
    SAN_TABLE_MASK,
    SAN_THREAD,
    SAN_THREAD_SHIFT,
)
from .llvmtypes import I1, I32, I64, PTR

UNINIT = 5  # a shadow lookup's status beside the HAZARD_* codes
ATOMIC_THREAD = 0x7FF  # the thread of an atomic's mark in a shared shadow (never a conflict)
READ, WRITE, ATOMIC = 0, 1, 2  # how an access uses its element
QUIET_READ_ONLY, QUIET_PRIVATE = 1, 2  # see quiet_params
SHARED_WORDS = 4   # shadow words per byte offset of shared memory
TABLE_WORDS = 8    # words per entry of the global-memory table
# intrinsics that write memory the shadow does not see: shared memory is then not initchecked
_UNTRACKED_WRITERS = ("tc.", "tma.", "wgmma.", "mbarrier.", "foreign.", "cluster.")

SANITIZE_SITE = "sanitize"  # the site that marks a checked image (the runtime looks for it)
# warp collectives whose operand 0 is a lane mask (synccheck checks it)
MASKED_COLLECTIVES = frozenset(
    [f"warp.shfl_{k}" for k in ("idx", "up", "down", "xor")]
    + [f"warp.{k}" for k in ("all", "any", "ballot")] + ["sync.syncwarp"])
GLOBAL, SHARED, LOCAL, CONST, UNKNOWN = "global", "shared", "local", "const", "unknown"
# another block's shared memory (kj.cluster.map_shared_rank): its shadow is that block's, so
# accesses through it are memchecked only
CLUSTER_SHARED = "cluster shared"


# --- where an array lives ------------------------------------------------------------------------

def array_spaces(kfunc: kir.KFunction) -> dict[str, str]:
    """Each array variable's memory space (``GLOBAL`` ... ``UNKNOWN``): a kernel's array
    parameters are global, ``kj.shared``/``kj.local``/constant arrays are what they are, views
    keep their array's space, a variable assigned from several spaces is unknown."""
    params = dict(kfunc.params)
    assigned: dict[str, list[Expr]] = {}
    for s in kir.walk_stmts(kfunc.body):
        if isinstance(s, kir.Assign) and isinstance(s.value.type, T.ArrayType):
            assigned.setdefault(s.target, []).append(s.value)
    spaces: dict[str, str] = {}
    for name, t in params.items():
        if isinstance(t, T.ArrayType):
            spaces[name] = GLOBAL if kfunc.is_kernel else UNKNOWN
    for _ in range(4):  # chains of assignments settle in a few rounds
        for name, values in assigned.items():
            found = {space_of(v, spaces) for v in values}
            if name in params:
                found.add(spaces[name])
            spaces[name] = found.pop() if len(found) == 1 else UNKNOWN
    return spaces


def space_of(e: Expr, spaces: dict[str, str]) -> str:
    op = e.op
    if op == "shared":
        return SHARED
    if op == "local":
        return LOCAL
    if op == "constarray":
        return CONST
    if op in ("var", "param"):
        return spaces.get(e.attr, UNKNOWN)
    if op == "intrinsic" and e.attr == "cluster.map_shared_rank":
        return CLUSTER_SHARED
    if op == "intrinsic" and e.args and lookup(e.attr).view:
        return space_of(e.args[0], spaces)
    if op == "reuse":
        return space_of(e.args[0], spaces)
    if op == "select":
        a, b = space_of(e.args[1], spaces), space_of(e.args[2], spaces)
        return a if a == b else UNKNOWN
    return UNKNOWN


def quiet_params(kfunc: kir.KFunction) -> dict[str, int]:
    """A kernel's array parameters whose accesses need no racecheck when its arguments do not
    overlap (the runtime's ``SAN_QUIET`` bits say so per launch): ``QUIET_READ_ONLY`` for an
    array the kernel never writes, ``QUIET_PRIVATE`` for one it only indexes as ``a[i]`` with
    ``i`` the thread's index in a one-dimensional launch (``kj.grid(1)``): no two threads
    touch one element."""
    if not kfunc.is_kernel:
        return {}
    arrays = {n for n, t in kfunc.params if isinstance(t, T.ArrayType)}
    stmts = list(kir.walk_stmts(kfunc.body))
    values: dict[str, list[Expr]] = {}
    for st in stmts:
        if isinstance(st, kir.Assign):
            values.setdefault(st.target, []).append(st.value)
        elif isinstance(st, kir.ForRange):
            values.setdefault(st.var, []).append(Expr("const", T.int64, attr=0))
    arrays -= set(values)  # a parameter assigned another array: not followed
    index_vars = {v for v, vs in values.items() if all(is_thread_index(e) for e in vs)}
    uses = dict.fromkeys(arrays, 0)
    private = dict.fromkeys(arrays, 0)

    def at_thread(arr: Expr, indices) -> None:
        if arr.op == "var" and arr.attr in arrays and len(indices) == 1 and \
                indices[0].op == "var" and indices[0].attr in index_vars:
            private[arr.attr] += 1

    for st in stmts:
        if isinstance(st, kir.Store):
            at_thread(st.array, st.indices)
        for top in kir.stmt_exprs(st):
            for e in kir.walk_expr(top):
                if e.op == "var" and e.attr in arrays:
                    uses[e.attr] += 1
                elif e.op == "load":
                    at_thread(e.args[0], e.args[1:])
    written = written_params(kfunc)
    quiet = {}
    for name in arrays:
        bits = (QUIET_READ_ONLY if name not in written else 0) | \
            (QUIET_PRIVATE if uses[name] == private[name] else 0)
        if bits:
            quiet[name] = bits
    return quiet


MAX_CHECKED_ACCESSES = 1000  # a kernel with more (unrolled) array accesses runs unchecked


def access_count(kfunc: kir.KFunction) -> int:
    """The array loads and stores of a kernel and the device functions it calls."""
    n = 0
    for f in kir.walk_functions(kfunc):
        n += sum(isinstance(s, kir.Store) for s in kir.walk_stmts(f.body))
        n += sum(e.op == "load" for e in kir.function_exprs(f))
    return n


def shared_initcheck(kfunc: kir.KFunction) -> bool:
    """Whether every write of shared memory goes through a plain store or an atomic (else a
    read of what a tensor copy wrote would look uninitialized)."""
    return not any(e.op == "intrinsic" and e.attr.startswith(_UNTRACKED_WRITERS)
                   for f in kir.walk_functions(kfunc) for e in kir.function_exprs(f))


# --- the module's helpers --------------------------------------------------------------------------

def _word_ptr(b: ir.IRBuilder, base, index):
    if isinstance(index, int):
        index = ir.Constant(I64, index)
    return b.gep(base, [index], source_etype=I64)


def _word(b: ir.IRBuilder, base, index):
    return b.load(_word_ptr(b, base, index), typ=I64)


def _thread_of(b: ir.IRBuilder, packed):
    return b.and_(b.lshr(packed, ir.Constant(I64, SAN_THREAD_SHIFT)), ir.Constant(I64, 0x7FF))


def _epoch_of(b: ir.IRBuilder, packed):
    return b.lshr(packed, ir.Constant(I64, 32))


class SanitizerHelpers:
    """The module's shadow-memory functions, defined on first use (internal; LLVM inlines
    them into the accesses)."""

    def __init__(self, mod):
        self.mod = mod
        self._fns: dict[str, ir.Function] = {}

    def _define(self, name: str, ret, args: list, build) -> ir.Function:
        fn = self._fns.get(name)
        if fn is None:
            fn = ir.Function(self.mod.module, ir.FunctionType(ret, args), name=name)
            fn.linkage = "internal"
            fn.attributes.add("noinline")  # one copy: compiles fast, and the call is cheap
            self._fns[name] = fn
            build(fn, ir.IRBuilder(fn.append_basic_block("entry")))
        return fn

    # a conflict test: the other access (packed) of this epoch by another thread
    @staticmethod
    def _conflict(b, other, cur, me_thread):
        same_epoch = b.icmp_unsigned("==", _epoch_of(b, other), cur)
        t = _thread_of(b, other)
        other_thread = b.and_(b.icmp_unsigned("!=", t, me_thread),
                              b.icmp_unsigned("!=", t, ir.Constant(I64, ATOMIC_THREAD)))
        return b.and_(same_epoch, other_thread)

    def _access(self, b, fn, state, entry, me, mode, check_init, cross_block: bool):
        """The shared logic of both shadows: ``entry`` points at (W, R1, R2[, writer block])."""
        cur = _word(b, state, SAN_EPOCH)
        mt = _thread_of(b, me)
        w = _word(b, entry, 0)
        r1 = _word(b, entry, 1)
        r2 = _word(b, entry, 2)
        status = b.alloca(I64)
        b.store(ir.Constant(I64, 0), status)

        def found(code, other, other_block=None):
            b.store(ir.Constant(I64, code), status)
            b.store(other, _word_ptr(b, state, SAN_SCRATCH))
            blk = other_block if other_block is not None else _word(b, state, SAN_BLOCK)
            b.store(blk, _word_ptr(b, state, SAN_SCRATCH + 1))

        unwritten = b.and_(check_init, b.icmp_unsigned(
            "<", _epoch_of(b, w), _word(b, state, SAN_BLOCK_EPOCH)))
        if not cross_block:  # an atomic: its read is initchecked, its write only marked
            atomic = b.icmp_unsigned("==", mode, ir.Constant(I64, ATOMIC))
            with b.if_then(atomic):
                with b.if_then(unwritten):
                    found(UNINIT, ir.Constant(I64, 0))
                mark = b.or_(b.shl(_word(b, state, SAN_BLOCK_EPOCH), ir.Constant(I64, 32)),
                             ir.Constant(I64, ATOMIC_THREAD << SAN_THREAD_SHIFT))
                fresh = b.icmp_unsigned("<", _epoch_of(b, w),
                                        _word(b, state, SAN_BLOCK_EPOCH))
                with b.if_then(fresh):
                    b.store(mark, _word_ptr(b, entry, 0))
                b.ret(b.load(status, typ=I64))
        write = b.icmp_unsigned("==", mode, ir.Constant(I64, WRITE))
        with b.if_else(write) as (on_write, on_read):
            with on_write:
                waw = self._conflict(b, w, cur, mt)
                war1 = self._conflict(b, r1, cur, mt)
                war2 = self._conflict(b, r2, cur, mt)
                with b.if_then(war2):
                    found(HAZARD_WAR, r2)
                with b.if_then(war1):
                    found(HAZARD_WAR, r1)
                with b.if_then(waw):
                    found(HAZARD_WAW, w)
                if cross_block:
                    we = _epoch_of(b, w)
                    earlier = b.and_(
                        b.icmp_unsigned(">=", we, _word(b, state, SAN_LAUNCH_EPOCH)),
                        b.icmp_unsigned("<", we, _word(b, state, SAN_BLOCK_EPOCH)))
                    with b.if_then(earlier):
                        found(HAZARD_BLOCKS, w, _word(b, entry, 3))
                    b.store(_word(b, state, SAN_BLOCK), _word_ptr(b, entry, 3))
                b.store(me, _word_ptr(b, entry, 0))
            with on_read:
                with b.if_then(self._conflict(b, w, cur, mt)):
                    found(HAZARD_RAW, w)
                with b.if_then(unwritten):
                    found(UNINIT, ir.Constant(I64, 0))
                fresh = b.icmp_unsigned("!=", _epoch_of(b, r1), cur)
                with b.if_else(fresh) as (first_reader, later):
                    with first_reader:
                        b.store(me, _word_ptr(b, entry, 1))
                    with later, b.if_then(b.icmp_unsigned("!=", _thread_of(b, r1), mt)):
                        b.store(me, _word_ptr(b, entry, 2))
        b.ret(b.load(status, typ=I64))

    def shared(self) -> ir.Function:
        """``i64 (state, offset, me, mode, check_init: i1)``: 0, a HAZARD_* or UNINIT."""
        def build(fn, b):
            state, offset, me, mode, check_init = fn.args
            base = b.inttoptr(_word(b, state, SAN_SHARED_SHADOW), PTR)
            entry = b.gep(base, [b.mul(offset, ir.Constant(I64, SHARED_WORDS))],
                          source_etype=I64)
            self._access(b, fn, state, entry, me, mode, check_init, cross_block=False)
        return self._define("kj.san.shared", I64, [PTR, I64, I64, I64, I1], build)

    def global_(self) -> ir.Function:
        """``i64 (state, address, me, mode)``: 0 or a HAZARD_* (READ or WRITE only)."""
        def build(fn, b):
            state, addr, me, mode = fn.args
            table = b.inttoptr(_word(b, state, SAN_TABLE), PTR)
            h = b.xor(b.lshr(addr, ir.Constant(I64, 2)), b.lshr(addr, ir.Constant(I64, 17)))
            idx = b.and_(h, _word(b, state, SAN_TABLE_MASK))
            entry = b.gep(table, [b.mul(idx, ir.Constant(I64, TABLE_WORDS))], source_etype=I64)
            with b.if_then(b.icmp_unsigned("!=", _word(b, entry, 4), addr), likely=False):
                for k in range(4):  # a new address evicts the old one's record
                    b.store(ir.Constant(I64, 0), _word_ptr(b, entry, k))
                b.store(addr, _word_ptr(b, entry, 4))
            self._access(b, fn, state, entry, me, mode, ir.Constant(I1, 0), cross_block=True)
        return self._define("kj.san.global", I64, [PTR, I64, I64, I64], build)

    def report(self, ndim: int) -> ir.Function:
        """``void (state, kind, site, thread, detail, indices[ndim]..., shape[ndim]...)``:
        ``claim``, and the first finding's indices and shape."""
        def build(fn, b):
            state, kind, site, thread, detail = fn.args[:5]
            first = b.call(self.claim(), [state, kind, site, thread, detail])
            with b.if_then(first):
                b.store(ir.Constant(I64, ndim), _word_ptr(b, state, SAN_NDIM))
                for d in range(ndim):
                    b.store(fn.args[5 + d], _word_ptr(b, state, SAN_INDEX + d))
                    b.store(fn.args[5 + ndim + d], _word_ptr(b, state, SAN_SHAPE + d))
            b.ret_void()
        return self._define(f"kj.san.report{ndim}", ir.VoidType(),
                            [PTR, I64, I64, I64, I64] + [I64] * (2 * ndim), build)

    def claim(self) -> ir.Function:
        """``i1 (state, kind, site, thread, detail)``: count a finding; true if it is the
        worker's first (whose details are then recorded; the caller adds indices)."""
        def build(fn, b):
            state, kind, site, thread, detail = fn.args
            counter = b.gep(state, [b.add(kind, ir.Constant(I64, SAN_COUNTS - 1))],
                            source_etype=I64)
            b.store(b.add(b.load(counter, typ=I64), ir.Constant(I64, 1)), counter)
            first = b.icmp_unsigned("==", _word(b, state, SAN_KIND), ir.Constant(I64, 0))
            with b.if_then(first):
                for word, value in ((SAN_KIND, kind), (SAN_SITE, site), (SAN_THREAD, thread),
                                    (SAN_FIRST_BLOCK, _word(b, state, SAN_BLOCK)),
                                    (SAN_DETAIL, detail),
                                    (SAN_OTHER, _word(b, state, SAN_SCRATCH)),
                                    (SAN_OTHER_BLOCK, _word(b, state, SAN_SCRATCH + 1)),
                                    (SAN_NDIM, ir.Constant(I64, 0))):
                    b.store(value, _word_ptr(b, state, word))
            b.ret(first)
        return self._define("kj.san.claim", I1, [PTR, I64, I64, I64, I64], build)


# --- the instrumentation --------------------------------------------------------------------------

def state_pointer(fl):
    """The worker's sanitizer state (loaded once, at the function's entry)."""
    if fl.san_state is None:
        fl.san_state = fl.at_entry(lambda b: b.inttoptr(_word(b, fl.ctx, CTX_CHECK), PTR))
    return fl.san_state


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
    fl.san_access = (site, given, shape, fl.array_space, any_bad, fl.array_quiet)
    return out


def track(fl, ptr, mode: int) -> None:
    """racecheck and initcheck of the access whose element pointer is ``ptr`` (the last one
    ``checked_indices`` saw), by its memory space."""
    access = fl.san_accesses.pop(ptr, None)
    if access is None:
        return
    site, indices, shape, space, bad, quiet = access
    if space in (LOCAL, CONST, CLUSTER_SHARED) or (mode == ATOMIC and space == GLOBAL):
        return
    b = fl.builder
    state = state_pointer(fl)
    if quiet:  # no race is possible on this array in a launch that allows it
        allowed = b.and_(_word(b, state, SAN_QUIET), ir.Constant(I64, quiet))
        with b.if_then(b.icmp_unsigned("==", allowed, ir.Constant(I64, 0))):
            _track(fl, state, ptr, mode, site, indices, shape, space, bad)
        return
    _track(fl, state, ptr, mode, site, indices, shape, space, bad)


def _track(fl, state, ptr, mode, site, indices, shape, space, bad) -> None:
    b = fl.builder
    addr = b.ptrtoint(ptr, I64)
    thread = fl.thread_linear()
    epoch = _word(b, state, SAN_EPOCH)
    me = b.or_(b.shl(epoch, ir.Constant(I64, 32)),
               b.or_(b.shl(b.and_(thread, ir.Constant(I64, 0x7FF)),
                           ir.Constant(I64, SAN_THREAD_SHIFT)),
                     ir.Constant(I64, site & SAN_SITE_MASK)))
    w = ir.Constant(I64, mode)
    if space == GLOBAL:
        result = b.call(fl.mod.san_helpers.global_(), [state, addr, me, ir.Constant(I64, mode)])
        _report_shadow(fl, result, site, indices, shape, bad)
        return
    offset = b.sub(addr, _word(b, state, SAN_SHARED_BASE))
    in_shared = b.icmp_unsigned("<", offset, _word(b, state, SAN_SHARED_BYTES))
    helpers = fl.mod.san_helpers
    init = ir.Constant(I1, int(fl.mod.san_initcheck))
    if space == SHARED:
        result = _guarded_call(b, in_shared, helpers.shared(), [state, offset, me, w, init])
    else:
        is_global = b.not_(in_shared)
        if space == UNKNOWN:
            stack = b.ptrtoint(b.call(fl.mod.declare("llvm.stacksave.p0", PTR, []), []), I64)
            top = b.load(b.gep(fl.ctx, [ir.Constant(I64, CTX_STACK_TOP)], source_etype=I64),
                         typ=I64)
            local = b.and_(b.icmp_unsigned(">=", addr, stack), b.icmp_unsigned("<", addr, top))
            is_global = b.and_(is_global, b.not_(local))
            shared_result = _guarded_call(b, in_shared, helpers.shared(),
                                          [state, offset, me, w, init])
            if mode == ATOMIC:
                is_global = ir.Constant(I1, 0)
            global_result = _guarded_call(b, is_global, helpers.global_(), [state, addr, me, w])
            result = b.or_(shared_result, global_result)
        else:
            result = _guarded_call(b, ir.Constant(I1, 1), helpers.global_(),
                                   [state, addr, me, w])
    _report_shadow(fl, result, site, indices, shape, bad)


def _report_shadow(fl, result, site, indices, shape, bad) -> None:
    """Report a shadow lookup's finding (``result``: 0, a HAZARD_* or UNINIT)."""
    b = fl.builder
    if bad is not None:  # an access memcheck reported (it used index 0 instead)
        result = b.select(bad, ir.Constant(I64, 0), result)
    with b.if_then(b.icmp_unsigned("!=", result, ir.Constant(I64, 0)), likely=False):
        is_init = b.icmp_unsigned("==", result, ir.Constant(I64, UNINIT))
        kind = b.select(is_init, ir.Constant(I64, SAN_KIND_INIT), ir.Constant(I64, SAN_KIND_RACE))
        report(fl, kind, site, result, indices, shape)


def _guarded_call(b: ir.IRBuilder, cond, fn, args):
    """``fn(*args) if cond else 0`` (an i64)."""
    if isinstance(cond, ir.Constant):
        return b.call(fn, args) if cond.constant else ir.Constant(I64, 0)
    before = b.block
    with b.if_then(cond):
        value = b.call(fn, args)
        inside = b.block
    phi = b.phi(I64)
    phi.add_incoming(ir.Constant(I64, 0), before)
    phi.add_incoming(value, inside)
    return phi


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
    """A barrier: accesses after it are ordered after those before it."""
    b = fl.builder
    ptr = _word_ptr(b, state_pointer(fl), SAN_EPOCH)
    b.store(b.add(b.load(ptr, typ=I64), ir.Constant(I64, 1)), ptr)


def begin_block(b: ir.IRBuilder, ctx, block_index) -> None:
    """The driver, before each block: a new epoch, which the block starts at."""
    state = b.inttoptr(_word(b, ctx, CTX_CHECK), PTR)
    ptr = _word_ptr(b, state, SAN_EPOCH)
    epoch = b.add(b.load(ptr, typ=I64), ir.Constant(I64, 1))
    b.store(epoch, ptr)
    b.store(epoch, _word_ptr(b, state, SAN_BLOCK_EPOCH))
    b.store(block_index, _word_ptr(b, state, SAN_BLOCK))


def mark_stack_top(b: ir.IRBuilder, mod, ctx) -> None:
    """The driver's frame address: local arrays of the blocks it runs lie below it."""
    frame = b.call(mod.declare("llvm.frameaddress.p0", PTR, [I32]), [ir.Constant(I32, 0)])
    b.store(b.ptrtoint(frame, I64),
            b.gep(ctx, [ir.Constant(I64, CTX_STACK_TOP)], source_etype=I64))


__all__ = ["SanitizerHelpers", "array_spaces", "begin_block", "bump_epoch", "check_warp_mask",
           "checked_indices",
           "mark_stack_top", "report", "shared_initcheck", "track"]
