"""Typed kernel IR -> llvmlite.ir, for any target.

The lowering is one walk over the structured IR. Variables live in allocas (LLVM's mem2reg
makes registers of them); arrays are ``{ptr, [n x i64] shape, [n x i64] byte strides}``
values (``arrays.py``). Intrinsics are lowered as their declaration in the registry says for
the target at hand. What differs between the GPU and the host (special registers, shared
memory, math libraries, atomics, printing, the kernel's parameter list) goes through the
``Target`` hooks; how the host lowers variables, parameters, calls and loads differs more
deeply (hidden context arguments, one copy of a variable per thread), so the host's
``FunctionLowering`` subclass overrides those ``lower_<op>`` methods: each class dispatches
to its own methods (``FunctionLowering.expr_lowering``), never by matching op names.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from .. import kir
from .. import types as T
from ..errors import CompileError, UnsupportedError
from ..kir import Expr
from ..kir.analysis import (is_nonnegative, is_pure, nonnegative_vars, shared_array_vars,
                            streamed_arrays, written_params)
from ..kir.intrinsics import lookup
from . import arrays, narrowfloat, ops
from .debuginfo import DebugInfo
from .llvmtypes import I1, I8, I64, PTR, const, ll_mem_type, ll_type


def fp_flags(options) -> tuple[str, ...]:
    """LLVM's fast-math flags for floating-point operations: ``fast`` under ``fastmath=True``;
    else ``contract`` (a multiply and an add may fuse into an fma, as nvcc's ``--fmad=true``)
    unless ``contract=False`` asks for every operation rounded on its own."""
    if getattr(options, "fastmath", False):
        return ("fast",)
    return ("contract",) if getattr(options, "contract", True) else ()


class ModuleLowering:
    """One LLVM module: a kernel and the device functions it calls."""

    def __init__(self, target, options, name: str):
        self.target = target
        self.options = options
        self.module = ir.Module(name=name)
        self.module.triple = target.triple
        self.module.data_layout = target.data_layout
        self.functions: dict[int, ir.Function] = {}
        self.pending: list[kir.KFunction] = []
        self.globals_by_name: dict[str, ir.GlobalVariable] = {}
        self.needs_libdevice = False
        self.loop_ids = 0  # loops given a loop ID of their own (unroll_full_metadata)
        lines = getattr(options, "lineinfo", False) or getattr(options, "debug", False)
        self.debug_info = DebugInfo(self.module) if lines else None

    def lower_kernel(self, kfunc: kir.KFunction, symbol: str) -> ir.Function:
        written = written_params(kfunc)
        llfunc = self.target.define_kernel(self, kfunc, symbol, written)
        FunctionLowering(self, kfunc, llfunc, None).lower()
        self.lower_pending()
        return llfunc

    def lower_device_function(self, kfunc: kir.KFunction, symbol: str) -> ir.Function:
        """A device function on its own, visible outside the module under ``symbol`` (PTX
        ``.visible .func``): what ``compile_ptx(..., device=True)`` returns."""
        kfunc.mangled = symbol
        llfunc = self.function_for(kfunc)
        llfunc.linkage = ""  # external: the one symbol the module exports
        self.lower_pending()
        return llfunc

    def unroll_full_metadata(self):
        """A new loop ID asking LLVM to unroll its loop fully (``!{!self, !{"llvm.loop.unroll.
        full"}}``: a loop ID refers to itself)."""
        full = self.module.add_metadata([ir.MetaDataString(self.module, "llvm.loop.unroll.full")])
        self.loop_ids += 1
        # a placeholder makes each loop's node its own (llvmlite shares equal nodes)
        loop_id = self.module.add_metadata([full, ir.Constant(ir.IntType(32), self.loop_ids)])
        loop_id.operands = (loop_id, full)
        return loop_id

    def lower_pending(self) -> None:
        """Lower the device functions called so far, and those they call."""
        while self.pending:
            callee = self.pending.pop()
            fn = self.functions[id(callee)]
            FunctionLowering(self, callee, fn, list(fn.args)).lower()

    def function_type(self, kfunc: kir.KFunction) -> ir.FunctionType:
        """The LLVM type of a device function: its parameters and result as they are (a
        target with hidden arguments, the host, overrides this one hook)."""
        return ir.FunctionType(ll_type(kfunc.return_type), [ll_type(t) for _, t in kfunc.params])

    def function_for(self, kfunc: kir.KFunction) -> ir.Function:
        """The LLVM function of a device function, declared on first use and queued to be
        lowered (``lower_pending``)."""
        fn = self.functions.get(id(kfunc))
        if fn is None:
            fnty = self.function_type(kfunc)
            name = kfunc.mangled or f"{kfunc.name}_{len(self.functions)}"
            fn = ir.Function(self.module, fnty, name=name)
            fn.linkage = "internal"
            if kfunc.inline:  # @jit(inline="always" / "never", device=True)
                fn.attributes.add("alwaysinline" if kfunc.inline == "always" else "noinline")
            self.functions[id(kfunc)] = fn
            self.pending.append(kfunc)
        return fn

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type], var_arg=False) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)
        return fn


class FunctionLowering:
    """One function's body: statements and expressions lowered by the methods named after
    their class (``lower_ForRange``) or op (``lower_load``), looked up in tables made per
    class, so a subclass overrides a hook by defining the method."""

    expr_lowering: dict[str, Callable]  # op -> lower_<op> of this class
    stmt_lowering: dict[type, Callable]  # statement class -> lower_<class name> of this class

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _bind_lowerings(cls)

    def __init__(self, mod: ModuleLowering, kfunc: kir.KFunction, llfunc: ir.Function,
                 arg_values: list):
        self.mod = mod
        self.target = mod.target
        self.options = mod.options
        self.kfunc = kfunc
        self.llfunc = llfunc
        self.arg_values = arg_values
        self.entry = llfunc.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        self.vars: dict[str, ir.AllocaInstr] = {}
        self.loops: list[tuple[ir.Block, ir.Block]] = []
        self.exit_block: ir.Block | None = None
        self.subprogram = None  # set by lower() under lineinfo
        self.nonneg_vars = nonnegative_vars(kfunc)
        self.shared_vars = shared_array_vars(kfunc)
        self.ret_slot = None
        self.fastmath = fp_flags(self.options)
        self.reused: dict[int, ir.Value] = {}
        self.array_name = "?"  # the array being indexed, for a debug bounds check
        # streamed arrays not yet prefetched (the first load of each asks for later blocks')
        wanted = self.target.prefetches and getattr(self.options, "prefetch", False)
        self.streams = streamed_arrays(kfunc) if wanted else ()
        self.to_prefetch = set(self.streams)

    # --- structure --------------------------------------------------------------------------------

    def lower(self):
        b = self.builder
        self.subprogram = self.mod.debug_info.subprogram(self.llfunc, self.kfunc) \
            if self.mod.debug_info else None
        for name, t in self.kfunc.locals.items():
            self.vars[name] = b.alloca(ll_type(t), name=name.replace("$", "."))
        if self.kfunc.return_type != T.void:
            self.ret_slot = b.alloca(ll_type(self.kfunc.return_type), name="retval")
        if self.arg_values is None:
            self.arg_values = self.target.kernel_arguments(self)
        for (name, t), value in zip(self.kfunc.params, self.arg_values):
            local_t = self.kfunc.locals[name]
            if local_t != t:
                value = self.convert(value, t, local_t)
            b.store(value, self.vars[name])
        self.target.begin_function(self)
        body_bb = self.llfunc.append_basic_block("body")
        self.exit_block = self.llfunc.append_basic_block("exit")
        b.branch(body_bb)
        b.position_at_end(body_bb)
        self.block(self.kfunc.body)
        if not b.block.is_terminated:
            b.branch(self.exit_block)
        b.position_at_end(self.exit_block)
        self.target.end_function(self)
        if self.ret_slot is not None:
            b.ret(b.load(self.ret_slot))
        else:
            b.ret_void()

    def alloca(self, ty: ir.Type, count=None, name: str = ""):
        """An alloca in the entry block (so mem2reg and SROA see it)."""
        b = self.builder
        with b.goto_block(self.entry):
            if self.entry.instructions:
                b.position_before(self.entry.instructions[0])
            return b.alloca(ty, size=count, name=name)

    def block(self, stmts: list):
        for s in stmts:
            if self.builder.block.is_terminated:
                # code after break/continue/return: unreachable, emitted into a dead block
                self.builder.position_at_end(self.llfunc.append_basic_block("dead"))
            self.stmt(s)

    def stmt(self, s):
        if self.subprogram is not None and s.loc is not None:
            self.builder.debug_metadata = self.mod.debug_info.location(s.loc, self.subprogram)
        self.stmt_lowering[type(s)](self, s)

    def lower_Assign(self, s: kir.Assign):
        self.builder.store(self.expr(s.value), self.vars[s.target])

    def lower_Store(self, s: kir.Store):
        arr = self.expr(s.array)
        indices = [self.expr(i) for i in s.indices]
        self.array_name = str(s.array)  # what a debug bounds check names
        ptr = self.element_pointer(arr, s.array.type, indices, s.indices, s.loc,
                                   self.direct_base(s.array))
        value = self.expr(s.value)
        if s.array.type.dtype.is_bool:
            value = self.builder.zext(value, I8)
        self.target.store(self, ptr, value, s.array.type.dtype)

    def lower_ExprStmt(self, s: kir.ExprStmt):
        self.expr(s.expr)

    def lower_If(self, s: kir.If):
        b = self.builder
        cond = self.expr(s.cond)
        then_bb = self.llfunc.append_basic_block("if.then")
        merge_bb = self.llfunc.append_basic_block("if.end")
        else_bb = self.llfunc.append_basic_block("if.else") if s.orelse else merge_bb
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        self.block(s.body)
        if not b.block.is_terminated:
            b.branch(merge_bb)
        if s.orelse:
            b.position_at_end(else_bb)
            self.block(s.orelse)
            if not b.block.is_terminated:
                b.branch(merge_bb)
        b.position_at_end(merge_bb)

    def lower_While(self, s: kir.While):
        b = self.builder
        head = self.llfunc.append_basic_block("while.cond")
        body = self.llfunc.append_basic_block("while.body")
        end = self.llfunc.append_basic_block("while.end")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(self.expr(s.cond), body, end)
        b.position_at_end(body)
        self.loops.append((head, end))
        self.block(s.body)
        self.loops.pop()
        if not b.block.is_terminated:
            b.branch(head)
        b.position_at_end(end)

    def lower_ForRange(self, s: kir.ForRange):
        b = self.builder
        t = self.kfunc.locals[s.var]
        start, stop, step = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        counter = self.alloca(ll_type(t), name=f"{s.var}.counter")
        b.store(start, counter)
        head = self.llfunc.append_basic_block("for.cond")
        body = self.llfunc.append_basic_block("for.body")
        latch = self.llfunc.append_basic_block("for.inc")
        end = self.llfunc.append_basic_block("for.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        cond = for_condition(b, s, t, i, stop, step)
        b.cbranch(cond, body, end)
        b.position_at_end(body)
        b.store(i, self.vars[s.var])
        self.loops.append((latch, end))
        self.block(s.body)
        self.loops.pop()
        if not b.block.is_terminated:
            b.branch(latch)
        b.position_at_end(latch)
        nxt = b.add(b.load(counter), step, flags=("nsw",) if t.kind == "i" else ())
        b.store(nxt, counter)
        back = b.branch(head)
        if s.unrolled:  # a loop over a tuple's items: unrolled, as promised
            back.set_metadata("llvm.loop", self.mod.unroll_full_metadata())
        b.position_at_end(end)

    def lower_Break(self, s):
        self.builder.branch(self.loops[-1][1])

    def lower_Continue(self, s):
        self.builder.branch(self.loops[-1][0])

    def lower_Return(self, s: kir.Return):
        if s.value is not None:
            self.builder.store(self.expr(s.value), self.ret_slot)
        self.builder.branch(self.exit_block)

    # --- expressions ------------------------------------------------------------------------------

    def expr(self, e: Expr):
        return self.expr_lowering[e.op](self, e)

    def lower_const(self, e: Expr):
        if isinstance(e.type, T.StringType):
            return e.attr
        return const(e.type, e.attr)

    def lower_var(self, e: Expr):
        return self.builder.load(self.vars[e.attr], name=e.attr.replace("$", "."))

    lower_param = lower_var

    def lower_binop(self, e: Expr):
        a, b = self.expr(e.args[0]), self.expr(e.args[1])
        return ops.binop(self, e.attr, e.args[0].type, a, b, e.type)

    def lower_unop(self, e: Expr):
        v = self.expr(e.args[0])
        b = self.builder
        if e.attr == "-" and e.type.computes_in is not None:  # the sign bit flipped: exact
            return narrowfloat.negate(self, v, e.type)
        if e.attr == "-" and e.type.is_complex:
            return ops.complexops.neg(self, e.type, v)
        if e.attr == "-":
            return b.fneg(v, flags=self.fastmath) if e.type.is_float else b.neg(v)
        return b.not_(v)

    def lower_not(self, e: Expr):
        return self.builder.not_(self.expr(e.args[0]))

    def lower_cmp(self, e: Expr):
        a, b = self.expr(e.args[0]), self.expr(e.args[1])
        return ops.compare(self, e.attr, e.args[0].type, a, b)

    def lower_and(self, e: Expr):
        return self._short_circuit(e, is_and=True)

    def lower_or(self, e: Expr):
        return self._short_circuit(e, is_and=False)

    def _short_circuit(self, e: Expr, is_and: bool):
        b = self.builder
        lhs = self.expr(e.args[0])
        lhs_bb = b.block
        rhs_bb = self.llfunc.append_basic_block("and.rhs" if is_and else "or.rhs")
        end_bb = self.llfunc.append_basic_block("and.end" if is_and else "or.end")
        if is_and:
            b.cbranch(lhs, rhs_bb, end_bb)
        else:
            b.cbranch(lhs, end_bb, rhs_bb)
        b.position_at_end(rhs_bb)
        rhs = self.expr(e.args[1])
        rhs_end = b.block
        b.branch(end_bb)
        b.position_at_end(end_bb)
        phi = b.phi(I1)
        phi.add_incoming(ir.Constant(I1, 0 if is_and else 1), lhs_bb)
        phi.add_incoming(rhs, rhs_end)
        return phi

    def lower_select(self, e: Expr):
        c, a, b_ = e.args
        checked = getattr(self.options, "debug", False) or getattr(self.target, "sanitize", False)
        if _speculatable(a, checked) and _speculatable(b_, checked):
            return self.builder.select(self.expr(c), self.expr(a), self.expr(b_))
        b = self.builder
        cond = self.expr(c)
        then_bb = self.llfunc.append_basic_block("sel.then")
        else_bb = self.llfunc.append_basic_block("sel.else")
        end_bb = self.llfunc.append_basic_block("sel.end")
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        va = self.expr(a)
        then_end = b.block
        b.branch(end_bb)
        b.position_at_end(else_bb)
        vb = self.expr(b_)
        else_end = b.block
        b.branch(end_bb)
        b.position_at_end(end_bb)
        phi = b.phi(ll_type(e.type))
        phi.add_incoming(va, then_end)
        phi.add_incoming(vb, else_end)
        return phi

    def lower_cast(self, e: Expr):
        return self.convert(self.expr(e.args[0]), e.args[0].type, e.type)

    def convert(self, v, src: T.Type, dst: T.Type):
        if isinstance(src, T.ArrayType):
            return v  # layouts share one representation
        return ops.convert(self, v, src, dst)

    def lower_tuple(self, e: Expr):
        b = self.builder
        agg = ir.Constant(ll_type(e.type), ir.Undefined)
        for i, a in enumerate(e.args):
            agg = b.insert_value(agg, self.expr(a), i)
        return agg

    def lower_getitem(self, e: Expr):
        return self.builder.extract_value(self.expr(e.args[0]), e.attr)

    def lower_shape(self, e: Expr):
        return self.builder.extract_value(self.expr(e.args[0]), [1, e.attr])

    def lower_load(self, e: Expr):
        arr_e, idx_e = e.args[0], e.args[1:]
        arr = self.expr(arr_e)
        indices = [self.expr(i) for i in idx_e]
        self.array_name = str(arr_e)
        ptr = self.element_pointer(arr, arr_e.type, indices, idx_e, e.loc, self.direct_base(arr_e))
        v = self.target.load(self, ptr, arr_e.type.dtype)
        if arr_e.op == "var" and arr_e.attr in self.to_prefetch:
            self.to_prefetch.discard(arr_e.attr)
            index = indices[0] if idx_e[0].type == T.int64 else \
                ops.convert(self, indices[0], idx_e[0].type, T.int64)
            extent = self.builder.extract_value(arr, [1, 0])
            self.target.prefetch_ahead(self, ptr, index, extent, arr_e.type.dtype,
                                       len(self.streams))
        if arr_e.type.dtype.is_bool:
            v = self.builder.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        return v

    def lower_call(self, e: Expr):
        fn = self.mod.function_for(e.attr)
        args = [self.expr(a) for a in e.args]
        return self.builder.call(fn, args)

    def lower_reuse(self, e: Expr):
        # evaluated where first used; later uses are dominated by it (see kir's 'reuse')
        value = self.reused.get(id(e))
        if value is None:
            value = self.reused[id(e)] = self.expr(e.args[0])
        return value

    def lower_intrinsic(self, e: Expr):
        return self.intrinsic_lowering(e)(self, e)

    def intrinsic_lowering(self, e: Expr):
        """The lowering an intrinsic's declaration gives for this target (an arch too low for
        it or a target that lacks it is the user's located error; no lowering at all is ours)."""
        decl = lookup(e.attr)
        if decl.min_arch is not None:
            self.target.check_arch(decl, e.loc)
        lowering = decl.lowering_for(self.target.name)
        if lowering is None:
            reason = decl.absent.get(self.target.name)
            if reason is not None:
                raise UnsupportedError(f"{decl.user_name}() is not available on the "
                                       f"{self.target.name} target: {reason}", e.loc)
            raise CompileError(f"internal error: intrinsic {decl.name} has no lowering for "
                               f"the {self.target.name} target", e.loc)
        if decl.host_symbols:
            self.target.link_symbols(decl.host_symbols)
        return lowering

    def lower_shared(self, e: Expr):
        shape, dtype, name = e.attr[:3]
        ptr = self.target.shared_array(self, name, shape, dtype)
        if len(e.attr) > 3:  # kj.shared.array(..., alignment=n)
            self.target.align_shared(self, name, shape, e.attr[3])
        if not shape:
            # dynamic shared memory: one dimension, as long as the launch's bytes allow
            nbytes = self.target.dynamic_shared_bytes(self)
            n = self.builder.udiv(nbytes, ir.Constant(I64, dtype.itemsize))
            return self.make_array(ptr, [n], dtype, "C")
        return self.make_array(ptr, [ir.Constant(I64, d) for d in shape], dtype, "C")

    def lower_local(self, e: Expr):
        shape, dtype = e.attr
        count = 1
        for d in shape:
            count *= d
        ptr = self.target.local_array(self, ll_mem_type(dtype), count)
        return self.make_array(ptr, [ir.Constant(I64, d) for d in shape], dtype, "C")

    def lower_constarray(self, e: Expr):
        arr, name = e.attr
        ptr = self.target.const_array(self, name, arr)
        shape = arr.shape or (1,)
        return self.make_array(ptr, [ir.Constant(I64, d) for d in shape],
                               T.from_dtype(arr.dtype), "C")

    def lower_globalarray(self, e: Expr):
        address, shape, strides, _ = e.attr
        ptr = self.builder.inttoptr(ir.Constant(I64, address), PTR)
        return self.make_array(ptr, [ir.Constant(I64, d) for d in shape], e.type.dtype,
                               e.type.layout, [ir.Constant(I64, s) for s in strides])

    # --- arrays -------------------------------------------------------------------------------

    def make_array(self, ptr, shape: list, dtype: T.ScalarType, layout: str, strides=None):
        """An array value (see ``arrays.make_array``)."""
        return arrays.make_array(self.builder, ptr, shape, dtype, layout, strides)

    def nonnegative(self, e: Expr) -> bool:
        return is_nonnegative(e, self.nonneg_vars)

    def element_pointer(self, arr, at: T.ArrayType, indices: list, idx_exprs, loc, base=None):
        """The address of an element (see ``arrays.element_pointer``)."""
        return arrays.element_pointer(self, arr, at, indices, idx_exprs, loc, base)

    def direct_base(self, arr_e: Expr):
        """For a plain load or store through a variable that only holds one shared array: the
        array's own address in its address space (``Target.shared_base``), from which LLVM
        knows the alignment and so may merge neighbouring accesses into vector ones; else
        None (the generic pointer of the array value)."""
        if arr_e.op != "var" or arr_e.attr not in self.shared_vars:
            return None
        return self.target.shared_base(self, self.shared_vars[arr_e.attr])


def _speculatable(e: Expr, checked: bool) -> bool:
    """Whether a select may evaluate this arm whichever way its condition goes: pure,
    straight-line (and/or/select lower to branches of their own) and, where indexing is
    bounds-checked, without views (an index the condition guards must not be reported)."""
    return is_pure(e) and not any(
        x.op in ("and", "or", "select") or (checked and x.op == "intrinsic"
                                            and lookup(x.attr).view)
        for x in kir.walk_expr(e))


def for_condition(b: ir.IRBuilder, s: kir.ForRange, t: T.ScalarType, i, stop, step):
    """Whether ``for s.var in range(start, stop, step)`` runs again with the counter at ``i``:
    ``i < stop`` for a positive constant step, ``i > stop`` for a negative one, both tested
    at run time against the sign of a step that is not a constant (every lowering's loop)."""
    lt, gt = ops.icmp_for(t, "<"), ops.icmp_for(t, ">")
    if s.step.op == "const":
        if s.step.attr > 0:
            return lt(b, i, stop)
        if s.step.attr < 0:
            return gt(b, i, stop)
        return ir.Constant(I1, 0)
    zero = ir.Constant(step.type, 0)
    up = b.and_(gt(b, step, zero), lt(b, i, stop))
    down = b.and_(lt(b, step, zero), gt(b, i, stop))
    return b.or_(up, down)


def _bind_lowerings(cls: type[FunctionLowering]) -> None:
    """``cls``'s tables: its own ``lower_<op>`` for every expression op and
    ``lower_<Class>`` for every statement class (each must exist: a missing one fails here,
    when the class is made, not at the first kernel that uses it)."""
    cls.expr_lowering = {op: getattr(cls, f"lower_{op}") for op in kir.EXPR_OPS}
    cls.stmt_lowering = {kind: getattr(cls, f"lower_{kind.__name__}")
                         for kind in _STATEMENTS}


_STATEMENTS = (kir.Assign, kir.Store, kir.ExprStmt, kir.If, kir.While, kir.ForRange, kir.Break,
               kir.Continue, kir.Return)
_bind_lowerings(FunctionLowering)
