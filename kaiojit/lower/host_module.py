"""A host kernel's module: the kernel, the device functions it calls (each lowered with the
fast per-thread lowering or block-synchronously, see ``host.py``), and the driver
``<symbol>_run(slots, ctx, first_block, end_block)`` that the cpu backend calls."""

from __future__ import annotations

from llvmlite import ir

from .. import kir
from .. import types as T
from ..abi import SLOT_BYTES, slot_offsets
from ..kir.analysis import shared_layout, uses_sync
from ..target import (
    CTX_BLOCK, CTX_BLOCK_IDX, CTX_GRID, CTX_LAUNCH, HIDDEN_FAST, LAUNCH_ERROR,
)
from . import host_sanitize, narrowfloat
from .codegen import ModuleLowering
from .host import HostFunctionLowering, counted_loop, ctx_word, ctx_word_ptr
from .host_block import BlockLowering, block_function_type, define_block_kernel
from .llvmtypes import I8, I32, I64, PTR, VOID, ll_type
from .target import Target


# --- the module ------------------------------------------------------------------------------------

class HostModule(ModuleLowering):
    """A kernel, its device functions and its driver, for the host."""

    def __init__(self, target, options, name, kfunc):
        super().__init__(target, options, name)
        self.sites: list[dict] = []
        self._needs_block: dict[int, bool] = {}
        self.unchecked_body = None  # the checked variant's plain copy of the kernel, if any
        layout = shared_layout(kfunc)
        self.shared_offsets, self.static_shared_bytes = layout.offsets, layout.size
        if target.sanitize:
            self.san_helpers = host_sanitize.SanitizerHelpers(
                self, host_sanitize.shadow_granule(kfunc))
            self.san_initcheck = host_sanitize.shared_initcheck(kfunc)
            # marks the image as checked, and says whether it sees every write of global memory
            self.add_site(host_sanitize.SANITIZE_SITE, None, writes_seen=self.san_initcheck)

    def add_site(self, kind: str, loc, **info) -> int:
        """Record where a fault can come from: a plain dict the cpu backend names it with."""
        self.sites.append(dict(
            kind=kind, filename=loc.filename if loc else None, line=loc.line if loc else 0,
            col=loc.col if loc else 0, source_line=loc.source_line if loc else "", **info))
        return len(self.sites) - 1

    def needs_block(self, kfunc: kir.KFunction) -> bool:
        """Whether a function has barriers or warp operations, itself or in what it calls
        (``uses_sync``, once per function)."""
        found = self._needs_block.get(id(kfunc))
        if found is None:
            found = self._needs_block[id(kfunc)] = uses_sync(kfunc)
        return found

    def function_type(self, kfunc: kir.KFunction) -> ir.FunctionType:
        """A device function on the host: ``(ctx, tid.x, tid.y, tid.z, params...)``, or a
        block-mode one's type (``block_function_type``)."""
        if self.needs_block(kfunc):
            return block_function_type(kfunc)
        return ir.FunctionType(ll_type(kfunc.return_type),
                               [PTR, I32, I32, I32] + [ll_type(t) for _, t in kfunc.params])

    def lower_kernel(self, kfunc: kir.KFunction, symbol: str) -> ir.Function:
        narrowfloat.define_host_truncation(self.module)
        block = self.needs_block(kfunc)
        if block:
            body = define_block_kernel(self, kfunc, symbol)
            BlockLowering(self, kfunc, body).lower()
        else:
            body = self.target.define_kernel(self, kfunc, symbol, set())
            HostFunctionLowering(self, kfunc, body, None).lower()
            if self.target.sanitize:
                self.unchecked_body = host_sanitize.unchecked_copy(
                    self, kfunc, symbol, HostFunctionLowering)
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
    for slot, part, ty in _slot_parts(kfunc):
        ptr = b.gep(slots, [ir.Constant(I64, SLOT_BYTES * slot)], source_etype=I8)
        # a tensor map is its 128 bytes in the slots: the kernel gets their address
        params.append(ptr if part == T.PARAM_TENSORMAP else b.load(ptr, typ=ty))
    grid = [ctx_word(b, ctx, CTX_GRID + a) for a in range(3)]
    dims = [ctx_word(b, ctx, CTX_BLOCK + a) for a in range(3)]
    launch = b.inttoptr(ctx_word(b, ctx, CTX_LAUNCH), PTR)
    check_errors = block or mod.options.debug
    sanitize = mod.target.sanitize
    if sanitize:
        host_sanitize.mark_stack_top(b, mod, ctx)

    with counted_loop(b, first, end) as lb:
        gxy = b.mul(grid[0], grid[1])
        idx = [b.urem(lb, grid[0]), b.urem(b.udiv(lb, grid[0]), grid[1]), b.udiv(lb, gxy)]
        for a in range(3):
            b.store(idx[a], ctx_word_ptr(b, ctx, CTX_BLOCK_IDX + a))
        if sanitize:
            host_sanitize.begin_block(b, ctx, lb)
        if block:
            b.call(body, [ctx, *params])
        else:
            def threads(fn):
                zero = ir.Constant(I64, 0)
                with counted_loop(b, zero, dims[2]) as tz, \
                        counted_loop(b, zero, dims[1]) as ty, \
                        counted_loop(b, zero, dims[0]) as tx:
                    tid = [b.trunc(v, I32) for v in (tx, ty, tz)]
                    b.call(fn, [ctx, *tid, *params])
            if sanitize:  # blocks that no check can find anything in run unchecked
                host_sanitize.versioned_threads(b, mod, kfunc, ctx, params, grid, idx, dims,
                                                body, threads)
            else:
                threads(body)
        if check_errors:
            failed = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), ir.Constant(I64, 0))
            with b.if_then(failed, likely=False):
                b.ret_void()
    b.ret_void()
    return fn


def _slot_parts(kfunc) -> list[tuple[int, str, ir.Type]]:
    """(first slot, part kind, LLVM type) of each flat parameter, where the runtime writes
    them (the one layout rule, :func:`kaiojit.abi.slot_offsets`)."""
    flat = Target.flat_param_types(kfunc)
    parts = [part for _, t in kfunc.params for part in T.param_parts(t)]
    first, _ = slot_offsets(parts)
    return [(slot, part, ty) for slot, part, (_, ty) in zip(first, parts, flat)]


__all__ = ["HostModule", "emit_driver"]
