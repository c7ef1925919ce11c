"""Block-synchronous lowering for the host: barriers and warp operations without OS threads.

A function with barriers or warp operations (itself or in what it calls) runs a whole block per
call. The kernel IR is structured, so the block's threads can advance together statement by
statement:

* Every variable has one copy per thread (``alloca T, n``; parameters that are never assigned
  keep one copy). A thread has a status byte: running, continuing, breaking, returned.
* First, barriers, warp operations and calls of block-mode functions are hoisted out of
  expressions into statements of their own (``Hoister``): these are the *split points*.
  (A split inside ``and``/``or``/``x if c else y`` is then evaluated unconditionally.)
* A run of statements without split points becomes one loop over the block's threads; each
  active thread runs the run to its end. ``break``/``continue``/``return`` set the thread's
  status and go on to the next thread.
* An ``if``/``while``/``for`` containing a split point evaluates its condition for every
  active thread into a per-thread mask byte, and runs its body with that mask (a loop runs while
  any thread is still in it). Bodies no thread enters are skipped.
* ``syncthreads`` (and ``_count/_and/_or``) checks that either no thread reached it or every
  thread that has not returned from the kernel did; otherwise the launch records a divergent
  barrier (kernel, block, the first missing thread) and the block stops.
* A warp operation runs in two phases: every active thread writes its operand to an exchange
  buffer, then every active thread reads its partner's (lanes that are not active, or not in
  the block, give the thread its own value, as the GPU does for out-of-range lanes). Votes and
  ``activemask`` count the active lanes of the warp.
* A call of a block-mode device function passes per-thread argument and result buffers and the
  caller's active mask; the callee runs the block the same way.
"""

from __future__ import annotations

from llvmlite import ir

from .. import kir
from .. import types as T
from ..kir import Expr
from ..kir.analysis import is_split_point
from ..kir.intrinsics import lookup
from ..target import (
    CTX_BLOCK, CTX_EXITED, CTX_LAUNCH, CTX_NAMED_BARRIERS, ERR_DIVERGENT_BARRIER, LAUNCH_ERROR,
    NAMED_BARRIERS, STATUS_RETURNED,
)
from .host import (
    HostFunctionLowering,
    counted_loop,
    ctx_word,
    ctx_word_ptr,
    record_error,
)
from . import host_sanitize
from .codegen import for_condition
from .host_hoist import Hoister
from .llvmtypes import I1, I8, I32, I64, PTR, VOID, ll_type
from .target import Target

RUNNING, CONTINUING, BREAKING = 0, 1, 2


def block_function_type(kfunc: kir.KFunction) -> ir.FunctionType:
    """A block-mode device function: ``(ctx, active mask, per-thread args..., [result])``."""
    params = [PTR, PTR] + [PTR] * len(kfunc.params)
    if kfunc.return_type != T.void:
        params.append(PTR)
    return ir.FunctionType(VOID, params)


def define_block_kernel(mod, kfunc: kir.KFunction, symbol: str) -> ir.Function:
    """The block-mode kernel: ``(ctx, flat params...)``, one call per block."""
    flat = Target.flat_param_types(kfunc)
    fn = ir.Function(mod.module, ir.FunctionType(VOID, [PTR] + [ty for _, ty in flat]),
                     name=f"{symbol}.block")
    fn.linkage = "internal"
    fn.args[0].attributes.add("noalias")
    for arg, (name, _) in zip(fn.args[1:], flat):
        arg.name = name
    return fn


# --- the lowering -----------------------------------------------------------------------------------

class _ThreadVars:
    """``fl.vars`` in block mode: a variable's address for the current thread."""

    def __init__(self, fl):
        self.fl = fl

    def __getitem__(self, name: str):
        fl = self.fl
        ptr, uniform = fl.storage[name]
        if uniform:
            return ptr
        return fl.builder.gep(ptr, [fl.t], source_etype=fl.var_ll[name])


class BlockLowering(HostFunctionLowering):
    """Lowers one function block-synchronously (see the module docstring)."""

    block_mode = True

    def __init__(self, mod, kfunc: kir.KFunction, llfunc: ir.Function):
        super().__init__(mod, kfunc, llfunc, [], n_hidden=1 if kfunc.is_kernel else 2)
        self.storage: dict[str, tuple[object, bool]] = {}
        self.pathmask = None
        self.loop_depth = 0
        self.next_thread = None

    # --- structure ---------------------------------------------------------------------------------

    def lower(self):
        b = self.builder
        kf = self.kfunc
        self.subprogram = None  # no line tables for block-mode functions
        hoister = Hoister(self.mod.needs_block)
        body = hoister.block(kf.body)
        for name, t in hoister.temps.items():
            self.var_ll[name] = ll_type(t)
        self.dims = [ctx_word(b, self.ctx, CTX_BLOCK + a) for a in range(3)]
        self.n = b.mul(b.mul(self.dims[0], self.dims[1]), self.dims[2], name="nthreads")
        self.alloca_bb = self.llfunc.append_basic_block("allocas")
        main = self.llfunc.append_basic_block("main")
        self.exit_bb = self.llfunc.append_basic_block("exit")
        b.branch(self.alloca_bb)
        b.position_at_end(main)
        self.status = self.per_thread(I8)
        self.memset(self.status, 0)
        if kf.is_kernel:
            b.store(b.ptrtoint(self.status, I64), ctx_word_ptr(b, self.ctx, CTX_EXITED))
            self.named_barriers()
        else:
            self.pathmask = (self.llfunc.args[1], 1)
        self.exited = b.inttoptr(ctx_word(b, self.ctx, CTX_EXITED), PTR)
        self.xval = self.per_thread(I64)
        self.xarg = self.per_thread(I32)
        self.bind_variables(body, hoister.temps)
        self.bm_block(body)
        if not b.block.is_terminated:
            b.branch(self.exit_bb)
        b.position_at_end(self.exit_bb)
        b.ret_void()
        b.position_at_end(self.alloca_bb)
        b.branch(main)

    def bind_variables(self, body: list, temps: dict):
        b = self.builder
        kf = self.kfunc
        assigned = {s.target for s in kir.walk_stmts(body) if isinstance(s, kir.Assign)}
        assigned |= {s.var for s in kir.walk_stmts(body) if isinstance(s, kir.ForRange)}
        params = dict(kf.params)
        if kf.is_kernel:
            flat = iter(self.llfunc.args[1:])
            values = {name: self.target.argument_value(self, t, flat) for name, t in kf.params}
        else:
            values = {}
            for k, (name, t) in enumerate(kf.params):
                if kf.locals.get(name, t) == t:
                    self.storage[name] = (self.llfunc.args[2 + k], False)
                else:
                    values[name] = (self.llfunc.args[2 + k], t)
        for name, t in {**kf.locals, **temps}.items():
            if name in self.storage:
                continue
            lt = self.var_ll[name]
            if kf.is_kernel and name in params and name not in assigned:
                slot = self.alloca(lt, name=name.replace("$", "."))
                self.storage[name] = (slot, True)
                b.store(self.convert(values[name], params[name], t), slot)
            else:
                self.storage[name] = (self.per_thread(lt), False)
        self.ret_store = self.llfunc.args[-1] if kf.return_type != T.void and \
            not kf.is_kernel else None
        copies = [(n, v) for n, v in values.items() if not self.storage[n][1]]
        if copies:
            def init(t):
                for name, v in copies:
                    if kf.is_kernel:
                        b.store(self.convert(v, params[name], kf.locals[name]), self.vars[name])
                    else:
                        ptr, pt = v
                        val = b.load(b.gep(ptr, [t], source_etype=ll_type(pt)), typ=ll_type(pt))
                        b.store(self.convert(val, pt, kf.locals[name]), self.vars[name])
            self.thread_loop(init)

    def named_barriers(self):
        """The block's named barriers (``kj.named_barrier``): their arrival counts, zero at the
        block's start, where every function of the block finds them (``CTX_NAMED_BARRIERS``)."""
        b = self.builder
        with b.goto_block(self.alloca_bb):
            counts = b.alloca(I64, size=NAMED_BARRIERS)
        fn = self.mod.declare("llvm.memset.p0.i64", VOID, [PTR, I8, I64, I1])
        b.call(fn, [counts, ir.Constant(I8, 0), ir.Constant(I64, 8 * NAMED_BARRIERS),
                    ir.Constant(I1, 0)])
        b.store(b.ptrtoint(counts, I64), ctx_word_ptr(b, self.ctx, CTX_NAMED_BARRIERS))

    def per_thread(self, llty: ir.Type, count: int = 1):
        """``count`` values of ``llty`` per thread of the block (an alloca before the body)."""
        b = self.builder
        with b.goto_block(self.alloca_bb):
            size = self.n if count == 1 else b.mul(self.n, ir.Constant(I64, count))
            return b.alloca(llty, size=size)

    def per_thread_array(self, llty: ir.Type, count: int):
        """A local array: this thread's part of a per-block allocation."""
        base = self.per_thread(llty, count)
        return self.builder.gep(base, [self.builder.mul(self.t, ir.Constant(I64, count))],
                                source_etype=llty)

    def memset(self, ptr, byte: int):
        fn = self.mod.declare("llvm.memset.p0.i64", VOID, [PTR, I8, I64, I1])
        self.builder.call(fn, [ptr, ir.Constant(I8, byte), self.n, ir.Constant(I1, 0)])

    def at(self, base, t, llty):
        return self.builder.gep(base, [t], source_etype=llty)

    def load_at(self, base, t, llty):
        return self.builder.load(self.at(base, t, llty), typ=llty)

    def active(self, t, pathmask=None):
        b = self.builder
        mask = pathmask or self.pathmask
        act = b.icmp_unsigned("==", self.load_at(self.status, t, I8), ir.Constant(I8, RUNNING))
        if mask is not None:
            ptr, k = mask
            act = b.and_(act, b.icmp_unsigned("==", self.load_at(ptr, t, I8), ir.Constant(I8, k)))
        return act

    def bind_thread(self, t):
        b = self.builder
        self.t = t
        bx, by = self.dims[0], self.dims[1]
        rest = b.udiv(t, bx)
        self.tid = (b.trunc(b.urem(t, bx), I32), b.trunc(b.urem(rest, by), I32),
                    b.trunc(b.udiv(rest, by), I32))
        self.vars = _ThreadVars(self)
        if self.ret_store is not None:
            self.ret_slot = self.at(self.ret_store, t, ll_type(self.kfunc.return_type))

    def thread_loop(self, body, only_active: bool = True):
        """``for t in range(nthreads)`` (only the active threads unless told otherwise)."""
        b = self.builder
        loop = counted_loop(b, ir.Constant(I64, 0), self.n)
        with loop as t:
            self.bind_thread(t)
            self.next_thread = loop.latch
            if only_active:
                work = self.llfunc.append_basic_block("thread")
                b.cbranch(self.active(t), work, loop.latch)
                b.position_at_end(work)
            body(t)
        self.t = None

    def set_status(self, t, value: int):
        self.builder.store(ir.Constant(I8, value), self.at(self.status, t, I8))

    def flag_or(self, slot, bit):
        b = self.builder
        b.store(b.or_(b.load(slot, typ=I8), b.zext(bit, I8)), slot)

    # --- statements ----------------------------------------------------------------------------------

    def is_split(self, s) -> bool:
        return any(is_split_point(x, self.mod.needs_block)
                   for st in kir.walk_stmts([s]) for top in kir.stmt_exprs(st)
                   for x in kir.walk_expr(top))

    def bm_block(self, stmts: list):
        run: list = []
        for s in stmts:
            if self.is_split(s):
                self.bm_run(run)
                run = []
                self.bm_stmt(s)
            else:
                run.append(s)
        self.bm_run(run)

    def bm_run(self, run: list):
        if not run:
            return
        b = self.builder

        def body(t):
            def handler(status: int, name: str):
                bb = self.llfunc.append_basic_block(name)
                with b.goto_block(bb):
                    self.set_status(t, status)
                    b.branch(self.next_thread)
                return bb
            saved = self.loops, self.exit_block
            self.exit_block = handler(STATUS_RETURNED, "thread.return")
            self.loops = [(handler(CONTINUING, "thread.continue"),
                           handler(BREAKING, "thread.break"))] if self.loop_depth else []
            self.block(run)
            self.loops, self.exit_block = saved
        self.thread_loop(body)

    def bm_stmt(self, s):
        if isinstance(s, kir.If):
            self.bm_if(s)
        elif isinstance(s, kir.While):
            self.bm_loop(s.cond, s.body, None)
        elif isinstance(s, kir.ForRange):
            self.bm_loop(None, s.body, s)
        elif isinstance(s, kir.Assign):
            self.bm_split(s.target, s.value)
        elif isinstance(s, kir.ExprStmt):
            self.bm_split(None, s.expr)
        else:
            raise AssertionError(f"no block-mode lowering for {type(s).__name__}")

    def bm_if(self, s: kir.If):
        b = self.builder
        m = self.per_thread(I8)
        self.memset(m, 0)
        any_then, any_else = self.alloca(I8, name="if.any_then"), self.alloca(I8, name="if.any_else")
        b.store(ir.Constant(I8, 0), any_then)
        b.store(ir.Constant(I8, 0), any_else)

        def cond(t):
            c = self.expr(s.cond)
            b.store(b.select(c, ir.Constant(I8, 1), ir.Constant(I8, 2)), self.at(m, t, I8))
            self.flag_or(any_then, c)
            self.flag_or(any_else, b.not_(c))
        self.thread_loop(cond)
        saved = self.pathmask
        for k, stmts, flag in ((1, s.body, any_then), (2, s.orelse, any_else)):
            if stmts:
                with b.if_then(b.icmp_unsigned("!=", b.load(flag, typ=I8), ir.Constant(I8, 0))):
                    self.pathmask = (m, k)
                    self.bm_block(stmts)
        self.pathmask = saved

    def bm_loop(self, cond: Expr | None, body: list, for_stmt: kir.ForRange | None):
        """``while cond`` or ``for var in range(...)`` containing split points."""
        b = self.builder
        m = self.per_thread(I8)
        self.memset(m, 0)
        if for_stmt is not None:
            lt = self.var_ll[for_stmt.var]
            vt = self.kfunc.locals[for_stmt.var]
            counter, stop, step = (self.per_thread(lt) for _ in range(3))

            def start(t):
                for slot, e in ((counter, for_stmt.start), (stop, for_stmt.stop),
                                (step, for_stmt.step)):
                    b.store(self.expr(e), self.at(slot, t, lt))
                b.store(ir.Constant(I8, 1), self.at(m, t, I8))
        else:
            def start(t):
                b.store(ir.Constant(I8, 1), self.at(m, t, I8))
        self.thread_loop(start)
        any_in = self.alloca(I8, name="loop.any")
        head = self.llfunc.append_basic_block("bloop.head")
        body_bb = self.llfunc.append_basic_block("bloop.body")
        end = self.llfunc.append_basic_block("bloop.end")
        b.branch(head)
        b.position_at_end(head)
        b.store(ir.Constant(I8, 0), any_in)

        def test(t):
            mptr = self.at(m, t, I8)
            work = self.llfunc.append_basic_block("bloop.thread")
            in_loop = b.icmp_unsigned("!=", b.load(mptr, typ=I8), ir.Constant(I8, 0))
            b.cbranch(in_loop, work, self.next_thread)
            b.position_at_end(work)
            st = self.load_at(self.status, t, I8)
            st = b.select(b.icmp_unsigned("==", st, ir.Constant(I8, CONTINUING)),
                          ir.Constant(I8, RUNNING), st)
            b.store(st, self.at(self.status, t, I8))
            with b.if_then(b.icmp_unsigned("!=", st, ir.Constant(I8, RUNNING))):
                # broke out (resumes after the loop) or returned: leaves the loop
                b.store(ir.Constant(I8, 0), mptr)
                left = b.select(b.icmp_unsigned("==", st, ir.Constant(I8, BREAKING)),
                                ir.Constant(I8, RUNNING), st)
                b.store(left, self.at(self.status, t, I8))
                b.branch(self.next_thread)
            if for_stmt is None:
                c = self.expr(cond)
            else:
                i = self.load_at(counter, t, lt)
                c = for_condition(b, for_stmt, vt, i, self.load_at(stop, t, lt),
                                  self.load_at(step, t, lt))
                with b.if_then(c):
                    b.store(i, self.vars[for_stmt.var])
                    b.store(b.add(i, self.load_at(step, t, lt)), self.at(counter, t, lt))
            b.store(b.zext(c, I8), mptr)
            self.flag_or(any_in, c)
        self.thread_loop(test, only_active=False)
        b.cbranch(b.icmp_unsigned("!=", b.load(any_in, typ=I8), ir.Constant(I8, 0)), body_bb, end)
        b.position_at_end(body_bb)
        saved = self.pathmask
        self.pathmask = (m, 1)
        self.loop_depth += 1
        self.bm_block(body)
        self.loop_depth -= 1
        self.pathmask = saved
        if not b.block.is_terminated:
            b.branch(head)
        b.position_at_end(end)

    # --- split points -----------------------------------------------------------------------------------

    def bm_split(self, target: str | None, e: Expr):
        """A split point: a call of a block-mode function, or a barrier or warp intrinsic,
        lowered as its declaration says for the host (block-synchronously: with this
        lowering, the variable to assign or None, and the node)."""
        if e.op == "call":
            return self.bm_call(target, e)
        decl = lookup(e.attr)
        checked = self.target.sanitize
        if checked and decl.name in host_sanitize.MASKED_COLLECTIVES:
            host_sanitize.check_warp_mask(self, e)
        self.intrinsic_lowering(e)(self, target, e)
        if checked:
            host_sanitize.after_sync(self, decl)
        return None

    def assign_each(self, target: str | None, result) -> None:
        """Every active thread assigns ``result()`` (its value for the bound thread) to
        ``target``, if there is one."""
        if target is not None:
            self.thread_loop(lambda t: self.builder.store(result(), self.vars[target]))

    def barrier(self, target: str | None, e: Expr, combine=None) -> None:
        """A block-level barrier: either no thread reached it, or every thread that has not
        returned did (else the launch records a divergent barrier and the block stops). With a
        predicate operand, ``combine(builder, count, arrived)`` is every thread's result from
        how many arriving threads had it true (i32s)."""
        b = self.builder
        pred = e.args[0] if e.args else None
        count, arrived = self.alloca(I32, name="bar.count"), self.alloca(I32, name="bar.arrived")
        missing = self.alloca(I64, name="bar.missing")
        b.store(ir.Constant(I32, 0), count)
        b.store(ir.Constant(I32, 0), arrived)
        b.store(ir.Constant(I64, -1), missing)
        one = ir.Constant(I32, 1)

        def visit(t):
            with b.if_else(self.active(t)) as (here, absent):
                with here:
                    b.store(b.add(b.load(arrived, typ=I32), one), arrived)
                    if pred is not None:
                        p = b.zext(self.expr(pred), I32)
                        b.store(b.add(b.load(count, typ=I32), p), count)
                with absent:
                    exited = b.icmp_unsigned("==", self.load_at(self.exited, t, I8),
                                             ir.Constant(I8, STATUS_RETURNED))
                    first = b.and_(b.not_(exited),
                                   b.icmp_signed("<", b.load(missing, typ=I64),
                                                 ir.Constant(I64, 0)))
                    b.store(b.select(first, t, b.load(missing, typ=I64)), missing)
        self.thread_loop(visit, only_active=False)
        miss = b.load(missing, typ=I64)
        n_arrived = b.load(arrived, typ=I32)
        bad = b.and_(b.icmp_signed(">", n_arrived, ir.Constant(I32, 0)),
                     b.icmp_signed(">=", miss, ir.Constant(I64, 0)))
        site = self.mod.add_site("barrier", e.loc, op=lookup(e.attr).user_name.removeprefix("kj."))
        with b.if_then(bad, likely=False):
            zero = ir.Constant(I64, 0)
            record_error(self, ERR_DIVERGENT_BARRIER, site, zero, zero, miss)
            b.branch(self.exit_bb)
        if combine is not None:
            total = b.load(count, typ=I32)
            self.assign_each(target, lambda: combine(b, total, n_arrived))

    def shuffle(self, target: str | None, e: Expr, source) -> None:
        """A warp shuffle ``(mask, value, lane operand)``: every active thread publishes its
        value, then reads lane ``j`` of its warp, where ``source(builder, lane, operand)`` gives
        ``(j, valid)`` (i64, i1); an invalid, inactive or missing lane gives the thread's own
        value, as the GPU does."""
        b = self.builder
        _, value_e, lane_e = e.args
        vt = ll_type(value_e.type)

        def publish(t):
            b.store(_to_bits(b, self.expr(value_e)), self.at(self.xval, t, I64))
            b.store(self.expr(lane_e), self.at(self.xarg, t, I32))
        self.thread_loop(publish)
        if target is None:
            return

        def read(t):
            c31 = ir.Constant(I64, 31)
            lane = b.and_(t, c31)
            bval = b.and_(b.zext(self.load_at(self.xarg, t, I32), I64), c31)
            j, valid = source(b, lane, bval)
            src = b.add(b.sub(t, lane), j)
            valid = b.and_(valid, b.icmp_unsigned("<", src, self.n))
            src = b.select(valid, src, t)
            valid = b.and_(valid, self.active(src))
            src = b.select(valid, src, t)
            bits = self.load_at(self.xval, src, I64)
            b.store(_from_bits(b, bits, vt), self.vars[target])
        self.thread_loop(read)

    def vote(self, target: str | None, e: Expr, combine) -> None:
        """A vote over the active lanes of each thread's warp: with operands ``(mask, pred)``
        the lanes in the mask; without, every active lane (``activemask``).
        ``combine(builder, bits, members)`` gives the i32 result from the lanes whose
        predicate is true and the lanes that took part (a bool result keeps its low bit)."""
        b = self.builder
        voting = bool(e.args)
        if voting:
            mask_e, pred_e = e.args

            def publish(t):
                b.store(b.zext(self.expr(pred_e), I64), self.at(self.xval, t, I64))
                b.store(self.expr(mask_e), self.at(self.xarg, t, I32))
            self.thread_loop(publish)
        bits, members = self.alloca(I32, name="vote.bits"), self.alloca(I32, name="vote.members")
        results = self.per_thread(I32)

        def gather(t):
            b.store(ir.Constant(I32, 0), bits)
            b.store(ir.Constant(I32, 0), members)
            base = b.sub(t, b.and_(t, ir.Constant(I64, 31)))
            mask = self.load_at(self.xarg, t, I32) if voting else None
            with counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, 32)) as i:
                src = b.add(base, i)
                with b.if_then(b.icmp_unsigned("<", src, self.n)):
                    bit = b.shl(ir.Constant(I32, 1), b.trunc(i, I32))
                    take = self.active(src)
                    if mask is not None:
                        take = b.and_(take, b.icmp_unsigned("!=", b.and_(mask, bit),
                                                            ir.Constant(I32, 0)))
                    with b.if_then(take):
                        b.store(b.or_(b.load(members, typ=I32), bit), members)
                        if voting:
                            p = b.trunc(self.load_at(self.xval, src, I64), I32)
                            b.store(b.or_(b.load(bits, typ=I32), b.mul(p, bit)), bits)
            got, memb = b.load(bits, typ=I32), b.load(members, typ=I32)
            b.store(combine(b, got, memb), self.at(results, t, I32))
        self.thread_loop(gather)

        def result():
            v = self.load_at(results, self.t, I32)
            return b.trunc(v, I1) if e.type == T.bool_ else v
        self.assign_each(target, result)

    def bm_call(self, target: str | None, e: Expr):
        b = self.builder
        callee: kir.KFunction = e.attr
        fn = self.mod.function_for(callee)
        arg_ty = [ll_type(pt) for _, pt in callee.params]
        buffers = [self.per_thread(lt) for lt in arg_ty]
        rt = ll_type(callee.return_type) if callee.return_type != T.void else None
        result = self.per_thread(rt) if rt is not None else None
        mask = self.per_thread(I8)
        self.memset(mask, 0)

        def publish(t):
            for a, buf, lt in zip(e.args, buffers, arg_ty):
                b.store(self.expr(a), self.at(buf, t, lt))
            b.store(ir.Constant(I8, 1), self.at(mask, t, I8))
        self.thread_loop(publish)
        b.call(fn, [self.ctx, mask, *buffers] + ([result] if result is not None else []))
        if self.target.sanitize:
            host_sanitize.reload_epochs(self)  # its barriers moved the epochs on
        launch = b.inttoptr(ctx_word(b, self.ctx, CTX_LAUNCH), PTR)
        failed = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), ir.Constant(I64, 0))
        with b.if_then(failed, likely=False):
            b.branch(self.exit_bb)
        if target is not None and result is not None:
            self.thread_loop(lambda t: b.store(self.load_at(result, t, rt), self.vars[target]))


def _to_bits(b: ir.IRBuilder, v):
    ty = v.type
    if isinstance(ty, ir.FloatType):
        return b.zext(b.bitcast(v, I32), I64)
    if isinstance(ty, ir.DoubleType):
        return b.bitcast(v, I64)
    return b.zext(v, I64) if ty.width < 64 else v


def _from_bits(b: ir.IRBuilder, bits, ty: ir.Type):
    if isinstance(ty, ir.FloatType):
        return b.bitcast(b.trunc(bits, I32), ty)
    if isinstance(ty, ir.DoubleType):
        return b.bitcast(bits, ty)
    return b.trunc(bits, ty) if ty.width < 64 else bits
