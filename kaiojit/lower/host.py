"""The host target: the same typed IR and lowering, compiled for this CPU and JIT-ed by MCJIT.

Every host function takes a pointer to a per-worker *context* (``CTX_*`` below: grid and block
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

import ctypes
import functools
import threading
import time
from dataclasses import dataclass, field

from llvmlite import binding as llvm
from llvmlite import ir

from .. import kir
from .. import types as T
from ..errors import CompileError, UnsupportedError
from ..kir import Expr
from ..kir.analysis import is_split_point, shared_layout, uses_sync
from ..kir.intrinsics import lookup
from .codegen import FunctionLowering, ModuleLowering
from ..target import (
    CTX_BLOCK, CTX_BLOCK_IDX, CTX_DYN_BYTES, CTX_GRID, CTX_LAUNCH, CTX_SHARED, ERR_BOUNDS,
    HIDDEN_FAST, LAUNCH_BLOCK, LAUNCH_ERROR, LAUNCH_EXTENT, LAUNCH_INDEX, LAUNCH_PRINT_BUF,
    LAUNCH_PRINT_CAP, LAUNCH_PRINT_USED, LAUNCH_SITE, LAUNCH_THREAD, PRINT_LINE_BYTES,
    host_target_machine, register_host_symbols,
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

    def __init__(self):
        tm = host_target_machine()
        self.triple = llvm.get_process_triple()
        self.data_layout = str(tm.target_data)

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
        return atomic_rmw(fl, op, dtype, ptr, vals)

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
        link_c_functions(tuple(names))

    def bounds_check(self, fl, index, extent, at, dim, loc):
        """Record the first out-of-bounds index; the access then reads element 0 instead."""
        b = fl.builder
        bad = b.icmp_unsigned(">=", index, extent)
        site = fl.mod.add_site("bounds", loc, array=fl.array_name, dim=dim, type=str(at))
        with b.if_then(bad, likely=False):
            record_error(fl, ERR_BOUNDS, site, index, extent, fl.thread_linear())
        return b.select(bad, ir.Constant(I64, 0), index)


@functools.lru_cache(maxsize=None)
def link_c_functions(names: tuple[str, ...]) -> None:
    """Make C functions of the process (libc, libm) known to MCJIT by address."""
    libs = (ctypes.CDLL(None), ctypes.CDLL("libm.so.6"))
    for name in names:
        for lib in libs:
            fn = getattr(lib, name, None)
            if fn is not None:
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
                break
        else:
            raise CompileError(f"internal error: the C function {name} is not in this process")


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

    def thread_linear(self):
        if self.t is not None:
            return self.t
        b = self.builder
        tx, ty, tz = (b.zext(v, I64) for v in self.tid)
        bx, by = ctx_word(b, self.ctx, CTX_BLOCK), ctx_word(b, self.ctx, CTX_BLOCK + 1)
        return b.add(tx, b.mul(bx, b.add(ty, b.mul(by, tz))))

    def expr(self, e: Expr):
        op = e.op
        if op in ("var", "param"):
            return self.builder.load(self.vars[e.attr], typ=self.var_ll[e.attr],
                                     name=e.attr.replace("$", "."))
        assert not is_split_point(e, self.mod.needs_block), \
            "barriers, warp operations and calls of functions with them are split points"
        if op == "call":
            fn = self.mod.function_for(e.attr)
            hidden = [self.ctx, *self.tid]
            return self.builder.call(fn, hidden + [self.expr(a) for a in e.args])
        if op == "load" or (op == "intrinsic" and _indexes_operand0(e)):
            saved, self.array_name = self.array_name, str(e.args[0])
            try:
                return super().expr(e)
            finally:
                self.array_name = saved
        return super().expr(e)

    def stmt(self, s):
        if isinstance(s, kir.Store):
            saved, self.array_name = self.array_name, str(s.array)
            try:
                return super().stmt(s)
            finally:
                self.array_name = saved
        return super().stmt(s)


def _indexes_operand0(e: Expr) -> bool:
    """An intrinsic that indexes its array operand 0 (an atomic, a view): its bounds check
    names that array."""
    decl = lookup(e.attr)
    return bool(decl.writes or decl.view)


# --- the module ------------------------------------------------------------------------------------

class HostModule(ModuleLowering):
    """A kernel, its device functions and its driver, for the host."""

    def __init__(self, target, options, name, kfunc):
        super().__init__(target, options, name)
        self.sites: list[dict] = []
        self._needs_block: dict[int, bool] = {}
        layout = shared_layout(kfunc)
        self.shared_offsets, self.static_shared_bytes = layout.offsets, layout.size

    def add_site(self, kind: str, loc, **info) -> int:
        self.sites.append(dict(kind=kind, loc=loc, **info))
        return len(self.sites) - 1

    def needs_block(self, kfunc: kir.KFunction) -> bool:
        """Whether a function has barriers or warp operations, itself or in what it calls
        (``uses_sync``, once per function)."""
        found = self._needs_block.get(id(kfunc))
        if found is None:
            found = self._needs_block[id(kfunc)] = uses_sync(kfunc)
        return found

    def function_for(self, kfunc: kir.KFunction) -> ir.Function:
        fn = self.functions.get(id(kfunc))
        if fn is None:
            if self.needs_block(kfunc):
                from .host_block import block_function_type
                fnty = block_function_type(kfunc)
            else:
                fnty = ir.FunctionType(ll_type(kfunc.return_type), [PTR, I32, I32, I32] +
                                       [ll_type(t) for _, t in kfunc.params])
            name = kfunc.mangled or f"{kfunc.name}_{len(self.functions)}"
            fn = ir.Function(self.module, fnty, name=name)
            fn.linkage = "internal"
            self.functions[id(kfunc)] = fn
            self.pending.append(kfunc)
        return fn

    def lower_kernel(self, kfunc: kir.KFunction, symbol: str) -> ir.Function:
        from .host_block import BlockLowering, define_block_kernel

        block = self.needs_block(kfunc)
        if block:
            body = define_block_kernel(self, kfunc, symbol)
            BlockLowering(self, kfunc, body).lower()
        else:
            body = self.target.define_kernel(self, kfunc, symbol, set())
            HostFunctionLowering(self, kfunc, body, None).lower()
        while self.pending:
            callee = self.pending.pop()
            fn = self.functions[id(callee)]
            if self.needs_block(callee):
                BlockLowering(self, callee, fn).lower()
            else:
                HostFunctionLowering(self, callee, fn, list(fn.args)[HIDDEN_FAST:]).lower()
        return emit_driver(self, kfunc, symbol, body, block)


# --- the driver ------------------------------------------------------------------------------------

def emit_driver(mod: HostModule, kfunc, symbol: str, body: ir.Function, block: bool):
    """``void <symbol>_run(slots, ctx, first, end)``: parameters from slots, then the blocks."""
    fnty = ir.FunctionType(VOID, [PTR, PTR, I64, I64])
    fn = ir.Function(mod.module, fnty, name=f"{symbol}_run")
    slots, ctx, first, end = fn.args
    ctx.attributes.add("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    params = []
    for i, (_, ty) in enumerate(Target.flat_param_types(kfunc)):
        ptr = b.gep(slots, [ir.Constant(I64, 8 * i)], source_etype=I8)
        params.append(b.load(ptr, typ=ty))
    grid = [ctx_word(b, ctx, CTX_GRID + a) for a in range(3)]
    dims = [ctx_word(b, ctx, CTX_BLOCK + a) for a in range(3)]
    launch = b.inttoptr(ctx_word(b, ctx, CTX_LAUNCH), PTR)
    check_errors = block or mod.options.debug

    with counted_loop(b, first, end) as lb:
        gxy = b.mul(grid[0], grid[1])
        idx = [b.urem(lb, grid[0]), b.urem(b.udiv(lb, grid[0]), grid[1]), b.udiv(lb, gxy)]
        for a in range(3):
            b.store(idx[a], ctx_word_ptr(b, ctx, CTX_BLOCK_IDX + a))
        if block:
            b.call(body, [ctx, *params])
        else:
            zero = ir.Constant(I64, 0)
            with counted_loop(b, zero, dims[2]) as tz, counted_loop(b, zero, dims[1]) as ty, \
                    counted_loop(b, zero, dims[0]) as tx:
                tid = [b.trunc(v, I32) for v in (tx, ty, tz)]
                b.call(body, [ctx, *tid, *params])
        if check_errors:
            failed = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), ir.Constant(I64, 0))
            with b.if_then(failed, likely=False):
                b.ret_void()
    b.ret_void()
    return fn


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


# --- compiling ---------------------------------------------------------------------------------------

@dataclass
class HostKernel:
    """A kernel compiled for the host: the MCJIT engine (kept alive), the driver's address."""

    name: str
    symbol: str
    engine: object
    address: int
    run: object  # ctypes function (slots, ctx, first, end)
    uses_block_mode: bool
    static_shared_bytes: int
    sites: list = field(default_factory=list)


_RUN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int64)
_JIT_LOCK = threading.Lock()


def compile_host(pyfunc, kfunc, signature, symbol, options, spec, timings):
    """Lower, optimize (O3 on the host machine) and JIT one kernel; a CompiledKernel."""
    from ..compiler import CONFIG, CompiledKernel, dump_stages, static_shared_bytes, uses_sync

    t1 = time.perf_counter()
    for _, t in kfunc.params:
        if isinstance(t, T.TensorMapType):
            raise UnsupportedError("tensor maps need a GPU: the cpu backend cannot run "
                                   f"{pyfunc.__qualname__}", kfunc.loc)
    target = HostTarget()
    mod = HostModule(target, options, symbol, kfunc)
    mod.lower_kernel(kfunc, symbol)
    llvm_text = str(mod.module)
    t2 = time.perf_counter()
    timings["llvm"] = t2 - t1
    register_host_symbols()
    tm = host_target_machine()
    try:
        ref = llvm.parse_assembly(llvm_text)
        ref.verify()
    except RuntimeError as e:
        raise CompileError(f"internal error: kaiojit produced invalid LLVM IR for "
                           f"{pyfunc.__qualname__} (host): {e}") from None
    run_name = f"{symbol}_run"
    for fn in ref.functions:
        if not fn.is_declaration and fn.name != run_name:
            fn.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=min(options.opt, 3))
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(ref, pb)
    optimized = str(ref)
    t3 = time.perf_counter()
    timings["opt"] = t3 - t2
    with _JIT_LOCK:
        engine = llvm.create_mcjit_compiler(ref, tm)
        engine.finalize_object()
        address = engine.get_function_address(run_name)
    timings["jit"] = time.perf_counter() - t3
    host = HostKernel(
        name=pyfunc.__name__, symbol=symbol, engine=engine, address=address,
        run=_RUN_TYPE(address), uses_block_mode=mod.needs_block(kfunc),
        static_shared_bytes=mod.static_shared_bytes, sites=mod.sites)
    ck = CompiledKernel(
        name=symbol, py_name=pyfunc.__name__, signature=signature,
        arg_names=tuple(n for n, _ in kfunc.params), kir=str(kfunc), llvm=optimized,
        llvm_unoptimized=llvm_text, ptx="", static_shared_bytes=static_shared_bytes(kfunc),
        uses_sync=uses_sync(kfunc), options=options, target=spec, kfunc=kfunc, host=host,
        timings=timings)
    if CONFIG.dump:
        dump_stages(ck)
    return ck


__all__ = ["HostKernel", "HostTarget", "compile_host", "host_target_machine"]
