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
  (TMA, ``cp.async``, wgmma, mbarriers, foreign code) are not initchecked.
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
    INIT_GLOBAL,
    INIT_SHARED,
    SAN_BARRIER_EPOCH,
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
    SAN_MAX_THREADS,
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
    SAN_UNINIT,
    SAN_UNINIT_COUNT,
    SAN_WARP_SYNC,
)
from .llvmtypes import I1, I8, I32, I64, PTR

UNINIT = INIT_SHARED  # a shadow lookup's status beside the HAZARD_* codes
ATOMIC_THREAD = 0x7FF  # the thread of an atomic's mark in a shared shadow (never a conflict)
READ, WRITE, ATOMIC, SAME = 0, 1, 2, 3  # how an access uses its element (SAME: a write of the
# value the element already holds, which no order of the threads can tell from no write)
QUIET_READ_ONLY, QUIET_PRIVATE = 1, 2  # see quiet_params
QUIET_INTERVAL = 4  # a shared read no write shares a barrier interval with (initcheck only)
SHARED_WORDS = 4   # shadow words per byte offset of shared memory
TABLE_WORDS = 8    # words per entry of the global-memory table
# intrinsics that write memory the shadow does not see: shared memory is then not initchecked
_UNTRACKED_WRITERS = ("tc.", "tma.", "wgmma.", "mbarrier.", "foreign.")

SANITIZE_SITE = "sanitize"  # the site that marks a checked image (the runtime looks for it)
NATIVE_PREFIX = "kaiojit_san_"  # the shadow functions' symbols (compiled once, see below)
# warp collectives whose operand 0 is a lane mask (synccheck checks it)
MASKED_COLLECTIVES = frozenset(
    [f"warp.shfl_{k}" for k in ("idx", "up", "down", "xor")]
    + [f"warp.{k}" for k in ("all", "any", "ballot")] + ["sync.syncwarp"])
GLOBAL, SHARED, LOCAL, CONST, UNKNOWN = "global", "shared", "local", "const", "unknown"


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


def quiet_reads(kfunc: kir.KFunction, spaces: dict[str, str]) -> set[int]:
    """The ids of the kernel's shared-memory loads that need no racecheck
    (``host_sanitize_intervals``)."""
    from .host_sanitize_intervals import quiet_shared_reads

    return quiet_shared_reads(kfunc, spaces, space_of)


def access_quiet(fl, arr: Expr, load: Expr | None = None) -> int:
    """The quiet bits of an access of ``arr`` (by ``load``, for a load): its parameter's
    (``quiet_params``), and ``QUIET_INTERVAL`` for a read no write shares an interval with."""
    bits = fl.san_quiet.get(arr.attr, 0) if arr.op == "var" else 0
    if load is not None and id(load) in fl.san_quiet_reads:
        bits |= QUIET_INTERVAL
    return bits


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


def shadow_granule(kfunc: kir.KFunction) -> int:
    """log2 of the bytes one shared-shadow entry covers: the largest power of two (up to 8)
    that divides the element size of every array the kernel and its device functions index,
    so that two elements never share an entry (a smaller shadow: fewer cache misses)."""
    granule = 3
    for f in kir.walk_functions(kfunc):
        arrays = [s.array for s in kir.walk_stmts(f.body) if isinstance(s, kir.Store)]
        arrays += [e.args[0] for e in kir.function_exprs(f)
                   if e.op == "load" or (e.op == "intrinsic" and e.args and
                                         isinstance(e.args[0].type, T.ArrayType))]
        for a in arrays:
            size = getattr(getattr(a.type, "dtype", None), "itemsize", 1) or 1
            while granule and size % (1 << granule):
                granule -= 1
    return granule


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
    """The shadow-memory functions (the slow path: each access first tries the inline test
    of ``_track`` and calls them only when that finds something to look at), and the report.

    They are the same for every kernel, so they are compiled once per process, into a module
    of their own (``native_module``, loaded by ``kaiojit.runtime.sanitizer``) whose symbols
    start with ``kaiojit_san_``; a kernel's module only declares the ones it calls (``native``
    False), which the loader resolves as it resolves libm's."""

    def __init__(self, mod, granule: int = 0, native: bool = False):
        self.mod = mod
        self.granule = granule  # shared shadow entries cover 1 << granule bytes
        self.native = native
        self._fns: dict[str, ir.Function] = {}

    def _define(self, name: str, ret, args: list, build) -> ir.Function:
        name = NATIVE_PREFIX + name
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = self.mod.declare(name, ret, args)
            if self.native:
                build(fn, ir.IRBuilder(fn.append_basic_block("entry")))
            else:
                self.mod.target.link_symbols([name])
        return fn

    def define_all(self) -> None:
        """Every function (the native module)."""
        self.shared(), self.global_checks(), self.claim()
        for ndim in range(SAN_MAX_DIMS + 1):
            self.report(ndim)

    @staticmethod
    def _conflict(b, state, other, me_thread):
        """Whether the other access (packed) races with this one: it is in the current
        barrier interval, by another thread, not an atomic's mark, and no syncwarp that both
        threads (of one warp) took part in lies between them."""
        eo = _epoch_of(b, other)
        current = b.icmp_unsigned(">=", eo, _word(b, state, SAN_BARRIER_EPOCH))
        t = _thread_of(b, other)
        other_thread = b.and_(b.icmp_unsigned("!=", t, me_thread),
                              b.icmp_unsigned("!=", t, ir.Constant(I64, ATOMIC_THREAD)))
        c5 = ir.Constant(I64, 5)
        same_warp = b.icmp_unsigned("==", b.lshr(t, c5), b.lshr(me_thread, c5))
        synced = b.inttoptr(_word(b, state, SAN_WARP_SYNC), PTR)
        last = ir.Constant(I64, SAN_MAX_THREADS - 1)
        ordered = b.and_(same_warp, b.and_(
            b.icmp_unsigned(">", _word(b, synced, b.and_(t, last)), eo),
            b.icmp_unsigned(">", _word(b, synced, b.and_(me_thread, last)), eo)))
        return b.and_(b.and_(current, other_thread), b.not_(ordered))

    def _access(self, b, fn, state, entry, me, mode, check_init, cross_block: bool):
        """The shared logic of both shadows: ``entry`` points at (W, R1, R2[, writer block])."""
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
        same = b.icmp_unsigned("==", mode, ir.Constant(I64, SAME))
        if cross_block:  # global memory: a write of the value already there is not recorded
            with b.if_then(same):
                b.ret(ir.Constant(I64, 0))
        else:  # an atomic: its read is initchecked, its write only marked (so is SAME)
            atomic = b.icmp_unsigned("==", mode, ir.Constant(I64, ATOMIC))
            with b.if_then(b.or_(atomic, same)):
                with b.if_then(b.and_(atomic, unwritten)):
                    found(UNINIT, ir.Constant(I64, 0))
                mark = b.or_(b.shl(_word(b, state, SAN_BLOCK_EPOCH), ir.Constant(I64, 32)),
                             ir.Constant(I64, ATOMIC_THREAD << SAN_THREAD_SHIFT))
                fresh = b.icmp_unsigned("<", _epoch_of(b, w),
                                        _word(b, state, SAN_BLOCK_EPOCH))
                with b.if_then(fresh):
                    b.store(mark, _word_ptr(b, entry, 0))
                b.ret(b.load(status, typ=I64))
        write = b.icmp_unsigned("==", mode, ir.Constant(I64, WRITE))
        bar = _word(b, state, SAN_BARRIER_EPOCH)
        with b.if_else(write) as (on_write, on_read):
            with on_write:
                waw = self._conflict(b, state, w, mt)
                war1 = self._conflict(b, state, r1, mt)
                war2 = self._conflict(b, state, r2, mt)
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
                with b.if_then(self._conflict(b, state, w, mt)):
                    found(HAZARD_RAW, w)
                with b.if_then(unwritten):
                    found(UNINIT, ir.Constant(I64, 0))
                fresh = b.icmp_unsigned("<", _epoch_of(b, r1), bar)
                with b.if_else(fresh) as (first_reader, later):
                    with first_reader:
                        b.store(me, _word_ptr(b, entry, 1))
                    with later, b.if_then(b.icmp_unsigned("!=", _thread_of(b, r1), mt)):
                        b.store(me, _word_ptr(b, entry, 2))
        b.ret(b.load(status, typ=I64))

    def granule_of(self, b, offset):
        """The shared shadow's entry index of a byte offset."""
        return b.lshr(offset, ir.Constant(I64, self.granule))

    def shared_entry(self, b, word, offset):
        """The shared shadow's entry of a byte offset (``word(SAN_*)``: the state's words)."""
        return self.entry_at(b, word, self.granule_of(b, offset))

    @staticmethod
    def entry_at(b, word, index):
        base = b.inttoptr(word(SAN_SHARED_SHADOW), PTR)
        return b.gep(base, [b.mul(index, ir.Constant(I64, SHARED_WORDS))], source_etype=I64)

    @staticmethod
    def table_entry(b, word, addr):
        """The global table's entry of an address (its word 4 says whose it is)."""
        table = b.inttoptr(word(SAN_TABLE), PTR)
        h = b.xor(b.lshr(addr, ir.Constant(I64, 2)), b.lshr(addr, ir.Constant(I64, 17)))
        idx = b.and_(h, word(SAN_TABLE_MASK))
        return b.gep(table, [b.mul(idx, ir.Constant(I64, TABLE_WORDS))], source_etype=I64)

    def shared(self) -> ir.Function:
        """``i64 (state, entry index, me, mode, check_init: i1)``: 0, a HAZARD_* or UNINIT."""
        def build(fn, b):
            state, index, me, mode, check_init = fn.args
            entry = self.entry_at(b, lambda k: _word(b, state, k), index)
            self._access(b, fn, state, entry, me, mode, check_init, cross_block=False)
        return self._define("shared", I64, [PTR, I64, I64, I64, I1], build)

    def global_(self) -> ir.Function:
        """``i64 (state, address, me, mode)``: 0 or a HAZARD_* (READ or WRITE only)."""
        def build(fn, b):
            state, addr, me, mode = fn.args
            entry = self.table_entry(b, lambda k: _word(b, state, k), addr)
            with b.if_then(b.icmp_unsigned("!=", _word(b, entry, 4), addr), likely=False):
                for k in range(4):  # a new address evicts the old one's record
                    b.store(ir.Constant(I64, 0), _word_ptr(b, entry, k))
                b.store(addr, _word_ptr(b, entry, 4))
            self._access(b, fn, state, entry, me, mode, ir.Constant(I1, 0), cross_block=True)
        return self._define("global", I64, [PTR, I64, I64, I64], build)

    def unwritten(self) -> ir.Function:
        """``i64 (state, address, mode, size)``: INIT_GLOBAL for a read (or an atomic) of
        an element of the launch's unwritten ranges (``SAN_UNINIT``) whose first byte is not
        written yet, else 0; a write (or an atomic) marks its ``size`` bytes written."""
        def build(fn, b):
            state, addr, mode, size = fn.args
            table = b.inttoptr(_word(b, state, SAN_UNINIT), PTR)
            count = _word(b, state, SAN_UNINIT_COUNT)
            entry = b.block
            head = fn.append_basic_block("range")
            body = fn.append_basic_block("test")
            found = fn.append_basic_block("found")
            nxt = fn.append_basic_block("next")
            done = fn.append_basic_block("done")
            b.branch(head)
            b.position_at_end(head)
            i = b.phi(I64)
            i.add_incoming(ir.Constant(I64, 0), entry)
            b.cbranch(b.icmp_unsigned("<", i, count), body, done)
            b.position_at_end(body)
            at = b.mul(i, ir.Constant(I64, 3))
            base = _word(b, table, at)
            end = _word(b, table, b.add(at, ir.Constant(I64, 1)))
            inside = b.and_(b.icmp_unsigned(">=", addr, base), b.icmp_unsigned("<", addr, end))
            b.cbranch(inside, found, nxt)
            b.position_at_end(nxt)
            i.add_incoming(b.add(i, ir.Constant(I64, 1)), nxt)
            b.branch(head)
            b.position_at_end(found)
            bits = b.inttoptr(_word(b, table, b.add(at, ir.Constant(I64, 2))), PTR)
            flag = b.gep(bits, [b.sub(addr, base)], source_etype=I8)
            reads = b.or_(b.icmp_unsigned("==", mode, ir.Constant(I64, READ)),
                          b.icmp_unsigned("==", mode, ir.Constant(I64, ATOMIC)))
            unset = b.icmp_unsigned("==", b.load(flag, typ=I8), ir.Constant(I8, 0))
            status = b.select(b.and_(reads, unset), ir.Constant(I64, INIT_GLOBAL),
                              ir.Constant(I64, 0))
            with b.if_then(b.icmp_unsigned("!=", mode, ir.Constant(I64, READ))):
                fill = self.mod.declare("llvm.memset.p0.i64", ir.VoidType(),
                                        [PTR, I8, I64, I1])
                b.call(fill, [flag, ir.Constant(I8, 1), size, ir.Constant(I1, 0)])
            b.ret(status)
            b.position_at_end(done)
            b.ret(ir.Constant(I64, 0))
        return self._define("unwritten", I64, [PTR, I64, I64, I64], build)

    def global_checks(self) -> ir.Function:
        """``i64 (state, address, me, mode, size, race: i1)``: a global access's initcheck
        (in a launch with unwritten memory) and, where ``race``, its racecheck, in one call:
        INIT_GLOBAL, a HAZARD_* or 0."""
        def build(fn, b):
            state, addr, me, mode, size, race = fn.args
            tracked = b.icmp_unsigned("!=", _word(b, state, SAN_UNINIT_COUNT),
                                      ir.Constant(I64, 0))
            init = _guarded(b, tracked, lambda: b.call(self.unwritten(),
                                                       [state, addr, mode, size]))
            raced = _guarded(b, race, lambda: b.call(self.global_(), [state, addr, me, mode]))
            b.ret(b.select(b.icmp_unsigned("!=", init, ir.Constant(I64, 0)), init, raced))
        return self._define("global_checks", I64, [PTR, I64, I64, I64, I64, I1], build)

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
        return self._define(f"report{ndim}", ir.VoidType(),
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
        return self._define("claim", I1, [PTR, I64, I64, I64, I64], build)


class _NativeModule:
    """What ``SanitizerHelpers`` needs of a module lowering, for the native module."""

    def __init__(self, module: ir.Module):
        self.module = module

    def declare(self, name: str, ret, args: list) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        return fn


def native_module(triple: str, data_layout: str) -> str:
    """The shadow functions' module (LLVM IR text), compiled once per process by the cpu
    backend's checked mode (``kaiojit.runtime.sanitizer``)."""
    module = ir.Module(name="kaiojit_sanitizer")
    module.triple, module.data_layout = triple, data_layout
    SanitizerHelpers(_NativeModule(module), native=True).define_all()
    return str(module)


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


def _guarded(b: ir.IRBuilder, cond, emit, likely=None):
    """``emit() if cond else 0`` (an i64; ``emit`` may return None for 0)."""
    if isinstance(cond, ir.Constant):
        value = emit() if cond.constant else None
        return ir.Constant(I64, 0) if value is None else value
    before = b.block
    with b.if_then(cond, likely=likely):
        value = emit()
        inside = b.block
    if value is None:
        return ir.Constant(I64, 0)
    phi = b.phi(I64)
    phi.add_incoming(ir.Constant(I64, 0), before)
    phi.add_incoming(value, inside)
    return phi


def _guarded_call(b: ir.IRBuilder, cond, fn, args):
    """``fn(*args) if cond else 0`` (an i64)."""
    return _guarded(b, cond, lambda: b.call(fn, args))


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


def unchecked_copy(mod, kfunc: kir.KFunction, symbol: str):
    """The kernel's per-thread body lowered without checks, for the blocks that
    ``host_sanitize_blocks`` proves cannot have findings (None where it proves none)."""
    from .host import HostFunctionLowering
    from .host_sanitize_blocks import plan_for

    plan = plan_for(kfunc, quiet_params(kfunc))
    if plan is None:
        return None
    fn = mod.target.define_kernel(mod, kfunc, f"{symbol}.unchecked", set())
    mod.target.sanitize = False
    try:
        HostFunctionLowering(mod, kfunc, fn, None).lower()
    finally:
        mod.target.sanitize = True
    mod.unchecked_plan = plan
    return fn


def versioned_threads(b: ir.IRBuilder, mod, kfunc, ctx, params, grid, block_idx, dims, body,
                      threads) -> None:
    """The driver's loops over a block's threads (``threads(fn)``): of the plain copy where
    the block's test passes, else of the checked ``body``."""
    from ..lower.target import Target
    from .host_sanitize_blocks import BlockBounds

    plain = mod.unchecked_body
    if plain is None:
        threads(body)
        return
    names = [name for name, _ in Target.flat_param_types(kfunc)]
    ok = BlockBounds(b, mod.unchecked_plan, ctx, dict(zip(names, params)), grid, block_idx,
                     dims).emit()
    with b.if_else(ok, likely=True) as (unchecked, checked):
        with unchecked:
            threads(plain)
        with checked:
            threads(body)


def mark_stack_top(b: ir.IRBuilder, mod, ctx) -> None:
    """The driver's frame address: local arrays of the blocks it runs lie below it."""
    frame = b.call(mod.declare("llvm.frameaddress.p0", PTR, [I32]), [ir.Constant(I32, 0)])
    b.store(b.ptrtoint(frame, I64),
            b.gep(ctx, [ir.Constant(I64, CTX_STACK_TOP)], source_etype=I64))


__all__ = [
    "SanitizerHelpers",
    "access_quiet",
    "after_sync",
    "array_spaces",
    "begin_block",
    "bump_epoch",
    "check_warp_mask",
    "checked_indices",
    "mark_stack_top",
    "quiet_reads",
    "reload_epochs",
    "report",
    "san_word",
    "shadow_granule",
    "shared_initcheck",
    "track",
    "unchecked_copy",
    "versioned_threads",
]
