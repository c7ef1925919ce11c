"""The host target: the same typed IR and lowering, compiled for this CPU (object code the cpu
backend loads).

Every host function takes a pointer to a per-worker *context* (``CTX_*`` in ``kaiojit/target.py``: grid and block
sizes, the block index, the worker's shared-memory buffer, the launch's shared state), so two
workers can run blocks at once. Native code is entered through one driver per kernel,
``<symbol>_run(slots, ctx, first_block, end_block)``: it reads the parameters from the runtime's
8-byte argument slots, then runs the blocks ``[first_block, end_block)`` one after another.

How a block runs depends on the kernel:

* No barrier, warp operation or ``activemask`` anywhere (device functions included): the fast
  path. The kernel body is a function of ``(ctx, tid.x, tid.y, tid.z, params...)`` and the
  driver calls it in a loop over the block's threads; LLVM inlines it into that loop.
* Otherwise the kernel is lowered *block-synchronously* (see ``host_block.py``): one call runs
  a whole block, every variable has one copy per thread, and the barrier-free statements
  between synchronization points become loops over the block's threads.

Faults are reported, never trapped: a debug bounds check or a divergent barrier records the
first error in the launch state and the driver stops after the current block; the runtime then
raises ``kj.KernelError``.
"""

from __future__ import annotations

from contextlib import contextmanager

from llvmlite import binding as llvm
from llvmlite import ir

from .. import kir
from .. import types as T
from ..kir import Expr
from ..kir.intrinsics import lookup
from . import host_sanitize
from .codegen import FunctionLowering
from ..target import (
    CTX_BLOCK, CTX_BLOCK_IDX, CTX_DYN_BYTES, CTX_GRID, CTX_LAUNCH, CTX_SHARED, ERR_BOUNDS,
    HIDDEN_FAST, LAUNCH_BLOCK, LAUNCH_ERROR, LAUNCH_EXTENT, LAUNCH_INDEX, LAUNCH_PRINT_BUF,
    LAUNCH_PRINT_CAP, LAUNCH_PRINT_USED, LAUNCH_SITE, LAUNCH_THREAD, PRINT_LINE_BYTES,
    host_target_machine,
)
from .llvmtypes import I8, I32, I64, PTR, VOID, ll_type
from .target import Target, atomic_rmw, string_constant

_LIBM_NAMES = {"gamma": "tgamma"}


# --- the host machine --------------------------------------------------------------------------

def ctx_word(b: ir.IRBuilder, base, index: int, name: str = ""):
    """Word ``index`` of an i64 array (the context or the launch state)."""
    return b.load(b.gep(base, [ir.Constant(I64, index)], source_etype=I64), typ=I64, name=name)


def ctx_word_ptr(b: ir.IRBuilder, base, index: int):
    return b.gep(base, [ir.Constant(I64, index)], source_etype=I64)


# --- the target hooks --------------------------------------------------------------------------

class HostTarget(Target):
    name = "host"

    def __init__(self, sanitize: bool = False):
        self.sanitize = sanitize  # the checked variant (host_sanitize.py)
        tm = host_target_machine()
        self.triple = llvm.get_process_triple()
        self.data_layout = str(tm.target_data)
        self.symbols: set[str] = set()  # C functions intrinsics' lowerings call

    def define_kernel(self, mod, kfunc, symbol, written):
        """The fast path's per-thread body: ``(ctx, tid.x, tid.y, tid.z, flat params...)``."""
        flat = self.flat_param_types(kfunc)
        fnty = ir.FunctionType(VOID, [PTR, I32, I32, I32] + [ty for _, ty in flat])
        fn = ir.Function(mod.module, fnty, name=f"{symbol}.thread")
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.args[0].attributes.add("noalias")
        for arg, (name, _) in zip(fn.args[HIDDEN_FAST:], flat):
            arg.name = name
        return fn

    def kernel_arguments(self, fl) -> list:
        args = iter(fl.llfunc.args[fl.n_hidden:])
        return [self.argument_value(fl, t, args) for _, t in fl.kfunc.params]

    def sreg(self, fl, name):
        b = fl.builder
        kind, _, axis = name.partition(".")
        if kind == "laneid":
            return b.trunc(b.and_(fl.thread_linear(), ir.Constant(I64, 31)), I32)
        a = "xyz".index(axis)
        if kind == "tid":
            return fl.tid[a]
        word = {"ntid": CTX_BLOCK, "nctaid": CTX_GRID, "ctaid": CTX_BLOCK_IDX}[kind] + a
        return b.trunc(ctx_word(b, fl.ctx, word), I32)

    def dynamic_shared_bytes(self, fl):
        return ctx_word(fl.builder, fl.ctx, CTX_DYN_BYTES)

    def shared_array(self, fl, name, shape, dtype):
        b = fl.builder
        base = b.inttoptr(ctx_word(b, fl.ctx, CTX_SHARED), PTR)
        offset = fl.mod.shared_offsets[name] if shape else fl.mod.static_shared_bytes
        return b.gep(base, [ir.Constant(I64, offset)], source_etype=I8)

    def const_array(self, fl, name, array):
        mod = fl.mod
        gv = mod.globals_by_name.get(name)
        if gv is None:
            data = bytearray(array.tobytes())
            ty = ir.ArrayType(I8, len(data))
            gv = ir.GlobalVariable(mod.module, ty, name)
            gv.initializer = ir.Constant(ty, data)
            gv.global_constant = True
            gv.linkage = "internal"
            gv.align = 16
            mod.globals_by_name[name] = gv
        return gv

    def local_array(self, fl, llty, count):
        if getattr(fl, "block_mode", False):
            return fl.per_thread_array(llty, count)
        return fl.alloca(ir.ArrayType(llty, count), name="local")

    def math(self, fl, name, t, args):
        if name == "fmod":
            # LLVM's frem is C's fmod. A call to libm's fmod by name is rewritten by LLVM 22
            # into `frem nnan` where it proves x finite and y nonzero, though x can still be NaN
            # (0 / 0): the NaN then becomes poison and folds away (the fuzzer's seed 36905215184)
            return fl.builder.frem(*args)
        base = _LIBM_NAMES.get(name, name)
        if t == T.float32:
            sym = base + "f"
        elif t == T.float64:
            sym = base
        else:
            raise AssertionError(f"math.{name} on {t}")
        lt = ll_type(t)
        return fl.builder.call(fl.mod.declare(sym, lt, [lt] * len(args)), args)

    def atomic(self, fl, op, dtype, ptr, vals):
        if self.sanitize:
            host_sanitize.track(fl, ptr, host_sanitize.ATOMIC)
        return atomic_rmw(fl, op, dtype, ptr, vals)

    def load(self, fl, ptr, dtype):
        if self.sanitize:
            host_sanitize.track(fl, ptr, host_sanitize.READ)
        return super().load(fl, ptr, dtype)

    def store(self, fl, ptr, value, dtype):
        if self.sanitize:
            host_sanitize.track(fl, ptr, host_sanitize.WRITE, value)
        super().store(fl, ptr, value, dtype)

    def checked_indices(self, fl, indices, shape, at, loc, given):
        """The checked variant's memcheck (see ``host_sanitize.checked_indices``)."""
        return host_sanitize.checked_indices(fl, indices, shape, at, loc, given)

    def print(self, fl, fmt, values):
        """snprintf one line, then append it to the launch's print buffer (shown afterwards)."""
        b = fl.builder
        mod = fl.mod
        snprintf = mod.declare("snprintf", I32, [PTR, I64, PTR], var_arg=True)
        line = fl.alloca(ir.ArrayType(I8, PRINT_LINE_BYTES), name="print.line")
        fmt_ptr = string_constant(mod, fmt)
        n = b.call(snprintf, [line, ir.Constant(I64, PRINT_LINE_BYTES), fmt_ptr, *values])
        n = b.sext(n, I64)
        top = ir.Constant(I64, PRINT_LINE_BYTES - 1)
        n = b.select(b.icmp_signed(">", n, top), top, n)
        n = b.select(b.icmp_signed("<", n, ir.Constant(I64, 0)), ir.Constant(I64, 0), n)
        launch = b.inttoptr(ctx_word(b, fl.ctx, CTX_LAUNCH), PTR)
        old = b.atomic_rmw("add", ctx_word_ptr(b, launch, LAUNCH_PRINT_USED), n, "monotonic")
        cap = ctx_word(b, launch, LAUNCH_PRINT_CAP)
        fits = b.icmp_unsigned("<=", b.add(old, n), cap)
        with b.if_then(fits):
            buf = b.inttoptr(ctx_word(b, launch, LAUNCH_PRINT_BUF), PTR)
            dst = b.gep(buf, [old], source_etype=I8)
            memcpy = mod.declare("llvm.memcpy.p0.p0.i64", VOID, [PTR, PTR, I64, ir.IntType(1)])
            b.call(memcpy, [dst, line, n, ir.Constant(ir.IntType(1), 0)])

    def link_symbols(self, names):
        """Recorded, for the HostImage: the loader makes them resolvable (hostjit)."""
        self.symbols.update(names)

    def bounds_check(self, fl, index, extent, at, dim, loc):
        """Record the first out-of-bounds index; the access then reads element 0 instead."""
        b = fl.builder
        bad = b.icmp_unsigned(">=", index, extent)
        site = fl.mod.add_site("bounds", loc, array=fl.array_name, dim=dim, type=str(at))
        with b.if_then(bad, likely=False):
            record_error(fl, ERR_BOUNDS, site, index, extent, fl.thread_linear())
        return b.select(bad, ir.Constant(I64, 0), index)


def record_error(fl, kind: int, site: int, index, extent, thread) -> None:
    """Claim the launch's error record (the first error wins) and fill it in."""
    b = fl.builder
    launch = b.inttoptr(ctx_word(b, fl.ctx, CTX_LAUNCH), PTR)
    pair = b.cmpxchg(ctx_word_ptr(b, launch, LAUNCH_ERROR), ir.Constant(I64, 0),
                     ir.Constant(I64, kind), "monotonic", "monotonic")
    with b.if_then(b.extract_value(pair, 1)):
        b.store(ir.Constant(I64, site), ctx_word_ptr(b, launch, LAUNCH_SITE))
        b.store(index, ctx_word_ptr(b, launch, LAUNCH_INDEX))
        b.store(extent, ctx_word_ptr(b, launch, LAUNCH_EXTENT))
        b.store(block_linear(b, fl.ctx), ctx_word_ptr(b, launch, LAUNCH_BLOCK))
        b.store(thread, ctx_word_ptr(b, launch, LAUNCH_THREAD))


def block_linear(b: ir.IRBuilder, ctx):
    gx, gy = ctx_word(b, ctx, CTX_GRID), ctx_word(b, ctx, CTX_GRID + 1)
    x, y, z = (ctx_word(b, ctx, CTX_BLOCK_IDX + a) for a in range(3))
    return b.add(x, b.mul(gx, b.add(y, b.mul(gy, z))))


# --- functions -----------------------------------------------------------------------------------

class HostFunctionLowering(FunctionLowering):
    """codegen's FunctionLowering with the host's hidden arguments: the context and thread."""

    block_mode = False

    def __init__(self, mod, kfunc, llfunc, arg_values, n_hidden: int = HIDDEN_FAST):
        super().__init__(mod, kfunc, llfunc, arg_values)
        self.n_hidden = n_hidden
        self.ctx = llfunc.args[0]
        self.tid = tuple(llfunc.args[1:4]) if n_hidden == HIDDEN_FAST else (None,) * 3
        self.t = None  # the linear thread index (i64), where a thread loop provides it
        self.array_name = "?"
        self.var_ll = {name: ll_type(t) for name, t in kfunc.locals.items()}
        # the checked variant: each array variable's memory space, the access being lowered
        self.san_spaces = host_sanitize.array_spaces(kfunc) if mod.target.sanitize else {}
        self.array_space = host_sanitize.UNKNOWN
        self.san_quiet = host_sanitize.quiet_params(kfunc) if mod.target.sanitize else {}
        self.san_quiet_reads = host_sanitize.quiet_reads(kfunc, self.san_spaces) \
            if mod.target.sanitize else set()
        self.array_quiet = 0
        self.san_access = None  # the access checked_indices last saw
        self.san_accesses: dict = {}  # element pointer -> its access, until tracked
        self._entry_thread = None
        self.san_state = None  # the sanitizer state's pointer, loaded at the entry
        self.san_words: dict = {}  # its words as the function keeps them (host_sanitize)

    def thread_linear(self):
        if self.t is not None:
            return self.t
        if self.mod.target.sanitize:  # asked at every access: computed once, at the entry
            if self._entry_thread is None:
                self._entry_thread = self.at_entry(self._thread_linear)
            return self._entry_thread
        return self._thread_linear(self.builder)

    def _thread_linear(self, b: ir.IRBuilder):
        tx, ty, tz = (b.zext(v, I64) for v in self.tid)
        bx, by = ctx_word(b, self.ctx, CTX_BLOCK), ctx_word(b, self.ctx, CTX_BLOCK + 1)
        return b.add(tx, b.mul(bx, b.add(ty, b.mul(by, tz))))

    def at_entry(self, emit):
        """``emit(builder)`` at the top of the function's entry block (its operands must be
        the function's arguments or constants): a value every later block may use."""
        b = self.builder
        with b.goto_block(self.entry):
            if self.entry.instructions:
                b.position_before(self.entry.instructions[0])
            return emit(b)

    # --- the hooks the host overrides -----------------------------------------------------------

    def lower_var(self, e: Expr):
        """A variable's value: loaded with its type given, as a block-mode variable's address
        is a per-thread element pointer (``_ThreadVars``), not a typed alloca."""
        return self.builder.load(self.vars[e.attr], typ=self.var_ll[e.attr],
                                 name=e.attr.replace("$", "."))

    lower_param = lower_var

    def lower_call(self, e: Expr):
        """A device function's call passes the context and the thread first."""
        assert not self.mod.needs_block(e.attr), \
            "calls of functions with barriers or warp operations are split points"
        fn = self.mod.function_for(e.attr)
        hidden = [self.ctx, *self.tid]
        return self.builder.call(fn, hidden + [self.expr(a) for a in e.args])

    def lower_load(self, e: Expr):
        with self.accessing(e.args[0], e):
            return super().lower_load(e)

    def lower_intrinsic(self, e: Expr):
        assert not lookup(e.attr).split_point, \
            "barriers and warp operations are split points"
        if not _indexes_operand0(e):
            return super().lower_intrinsic(e)
        with self.accessing(e.args[0]):
            return super().lower_intrinsic(e)

    def lower_Store(self, s: kir.Store):
        with self.accessing(s.array):
            super().lower_Store(s)

    @contextmanager
    def accessing(self, array: Expr, load: Expr | None = None):
        """While an access of ``array`` (by ``load``, for a load) is lowered: the name a
        bounds check reports, and the checked variant's memory space and quiet flags."""
        saved = self.array_name, self.array_space, self.array_quiet
        self.array_name = str(array)
        self.array_space = host_sanitize.space_of(array, self.san_spaces)
        self.array_quiet = host_sanitize.access_quiet(self, array, load)
        try:
            yield
        finally:
            self.array_name, self.array_space, self.array_quiet = saved


def _indexes_operand0(e: Expr) -> bool:
    """An intrinsic that indexes its array operand 0 (an atomic, a view): its bounds check
    names that array."""
    decl = lookup(e.attr)
    return bool(decl.writes or decl.view)


class counted_loop:
    """``with counted_loop(builder, start, stop) as i:`` emits ``for i in range(start, stop)``
    (i64, step 1); the body is what the ``with`` block emits."""

    def __init__(self, b: ir.IRBuilder, start, stop):
        self.b, self.start, self.stop = b, start, stop

    def __enter__(self):
        b = self.b
        fn = b.function
        self.pre = b.block
        self.head = fn.append_basic_block("loop.head")
        self.body = fn.append_basic_block("loop.body")
        self.latch = fn.append_basic_block("loop.latch")
        self.end = fn.append_basic_block("loop.end")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.i = b.phi(I64)
        self.i.add_incoming(self.start, self.pre)
        b.cbranch(b.icmp_signed("<", self.i, self.stop), self.body, self.end)
        b.position_at_end(self.body)
        return self.i

    def __exit__(self, *exc):
        if exc[0] is not None:
            return False
        b = self.b
        if not b.block.is_terminated:
            b.branch(self.latch)
        b.position_at_end(self.latch)
        nxt = b.add(self.i, ir.Constant(I64, 1))
        self.i.add_incoming(nxt, self.latch)
        b.branch(self.head)
        b.position_at_end(self.end)
        return False


__all__ = ["HostFunctionLowering", "HostTarget", "counted_loop"]
