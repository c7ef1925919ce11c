"""The cpu backend's checked mode: its shadow functions (the slow path of racecheck and
initcheck) and the finding report, compiled once per process by the runtime
(``native_module``, ``kaiojit.runtime.sanitizer``) and declared by every checked kernel that
calls them (``SanitizerHelpers``, used by ``kaiojit/lower/host_sanitize.py``, which describes
the scheme). A base module, as ``tma_host`` is: both the compiler and the runtime need it."""

from __future__ import annotations

from llvmlite import ir

from .target import (
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
    SAN_FIRST_BLOCK,
    SAN_INDEX,
    SAN_KIND,
    SAN_LAUNCH_EPOCH,
    SAN_MAX_DIMS,
    SAN_MAX_THREADS,
    SAN_NDIM,
    SAN_OTHER,
    SAN_OTHER_BLOCK,
    SAN_SCRATCH,
    SAN_SHAPE,
    SAN_SHARED_SHADOW,
    SAN_SITE,
    SAN_TABLE,
    SAN_TABLE_MASK,
    SAN_THREAD,
    SAN_THREAD_SHIFT,
    SAN_UNINIT,
    SAN_UNINIT_COUNT,
    SAN_WARP_SYNC,
)

I1, I8, I64, PTR = ir.IntType(1), ir.IntType(8), ir.IntType(64), ir.PointerType()

UNINIT = INIT_SHARED  # a shadow lookup's status beside the HAZARD_* codes
ATOMIC_THREAD = 0x7FF  # the thread of an atomic's mark in a shared shadow (never a conflict)
READ, WRITE, ATOMIC, SAME = 0, 1, 2, 3  # how an access uses its element (SAME: a write of the
# value the element already holds, which no order of the threads can tell from no write)
SHARED_WORDS = 4   # shadow words per element granule of shared memory
TABLE_WORDS = 8    # words per entry of the global-memory table
NATIVE_PREFIX = "kaiojit_san_"  # the shadow functions' symbols


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


__all__ = ["ATOMIC", "ATOMIC_THREAD", "NATIVE_PREFIX", "READ", "SAME", "SHARED_WORDS",
           "TABLE_WORDS", "UNINIT", "WRITE", "SanitizerHelpers", "native_module"]
