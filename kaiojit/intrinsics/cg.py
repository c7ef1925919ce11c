"""Cooperative groups: ``g = kj.cg.this_grid()`` and ``g.sync()``, a barrier of every thread
of the grid (numba's ``cuda.cg.this_grid().sync()``).

A kernel that uses it is launched cooperatively (every block co-resident; the runtime checks
the grid against ``kernel.max_cooperative_grid_blocks(block)`` and raises ``kj.LaunchError``
beyond it, see ``kaiojit/runtime/cooperative.py``).

On the GPU the barrier is CUDA's own algorithm over a global counter that the runtime zeroes
before each launch (``kaiojit_grid_barrier``): the block barrier, then thread 0 of every block
adds 1 to the counter (block 0 adds ``0x80000000 - (blocks - 1)``) between GPU-scope fences, so
bit 31 of the counter flips once every block has arrived; thread 0 spins on a volatile load
until it sees the flip, then the block barrier again. On the host the same happens once per
block (the block-synchronous lowering runs a block as one call) on a word of the launch state,
the spin yielding the core; a recorded fault anywhere ends the wait.
"""

from __future__ import annotations

from llvmlite import ir

from .. import language as L
from .. import types as T
from .api import (ANY_TARGET, I8, I32, I64, PTR, Expr, Intrinsic, Operands, call_args, inline_asm,
                  register)

GRID_BARRIER_SYMBOL = "kaiojit_grid_barrier"
FLIP = 0x80000000


def _this_grid_typing(typer, node):
    call_args(typer, node, 0, 0, "kj.cg.this_grid")
    return typer.intrinsic("cg.this_grid", T.grid_group, (), node)


def _lower_this_grid(fl, e: Expr):
    return ir.Constant(I8, 0)


# --- the GPU -------------------------------------------------------------------------------------

def _barrier_counter(fl):
    mod = fl.mod
    gv = mod.globals_by_name.get(GRID_BARRIER_SYMBOL)
    if gv is None:
        gv = ir.GlobalVariable(mod.module, I32, GRID_BARRIER_SYMBOL, addrspace=1)
        gv.initializer = ir.Constant(I32, 0)
        gv.align = 4
        mod.globals_by_name[GRID_BARRIER_SYMBOL] = gv
    return gv


def _nvptx_grid_sync(fl, e: Expr):
    b = fl.builder
    barrier = fl.mod.declare("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32])
    b.call(barrier, [ir.Constant(I32, 0)])
    tid = [fl.target.sreg(fl, f"tid.{a}") for a in "xyz"]
    leader = b.icmp_unsigned("==", b.or_(b.or_(tid[0], tid[1]), tid[2]), ir.Constant(I32, 0))
    with b.if_then(leader):
        ctaid = [fl.target.sreg(fl, f"ctaid.{a}") for a in "xyz"]
        nctaid = [fl.target.sreg(fl, f"nctaid.{a}") for a in "xyz"]
        blocks = b.mul(b.mul(nctaid[0], nctaid[1]), nctaid[2])
        first = b.icmp_unsigned("==", b.or_(b.or_(ctaid[0], ctaid[1]), ctaid[2]),
                                ir.Constant(I32, 0))
        inc = b.select(first, b.sub(ir.Constant(I32, FLIP), b.sub(blocks, ir.Constant(I32, 1))),
                       ir.Constant(I32, 1))
        counter = _barrier_counter(fl)
        _fence_gpu(fl)
        old = b.atomic_rmw("add", counter, inc, "monotonic")
        spin = fl.llfunc.append_basic_block("grid.spin")
        done = fl.llfunc.append_basic_block("grid.done")
        b.branch(spin)
        b.position_at_end(spin)
        now = inline_asm(fl, I32, "ld.volatile.global.u32 $0, [$1];", "=r,l,~{memory}",
                         [counter], convergent=False)
        flipped = b.icmp_unsigned("!=", b.and_(b.xor(old, now), ir.Constant(I32, FLIP)),
                                  ir.Constant(I32, 0))
        b.cbranch(flipped, done, spin)
        b.position_at_end(done)
        _fence_gpu(fl)
    b.call(barrier, [ir.Constant(I32, 0)])


def _fence_gpu(fl):
    inline_asm(fl, ir.VoidType(), "fence.acq_rel.gpu;", "~{memory}", [], convergent=False)


# --- the host ------------------------------------------------------------------------------------

def _host_grid_sync(bl, target, e: Expr):
    from ..target import CTX_GRID, CTX_LAUNCH, LAUNCH_ERROR, LAUNCH_GRID_BARRIER
    from .api import block_linear, ctx_word, ctx_word_ptr

    bl.barrier(None, e)  # every thread of the block, as on the GPU
    b = bl.builder
    ctx = bl.ctx
    launch = b.inttoptr(ctx_word(b, ctx, CTX_LAUNCH), PTR)
    counter = ctx_word_ptr(b, launch, LAUNCH_GRID_BARRIER)
    blocks = b.mul(b.mul(ctx_word(b, ctx, CTX_GRID), ctx_word(b, ctx, CTX_GRID + 1)),
                   ctx_word(b, ctx, CTX_GRID + 2))
    first = b.icmp_unsigned("==", block_linear(b, ctx), ir.Constant(I64, 0))
    inc = b.select(first, b.sub(ir.Constant(I64, FLIP), b.sub(blocks, ir.Constant(I64, 1))),
                   ir.Constant(I64, 1))
    old = b.atomic_rmw("add", counter, inc, "seq_cst")
    spin = bl.llfunc.append_basic_block("grid.spin")
    wait = bl.llfunc.append_basic_block("grid.wait")
    done = bl.llfunc.append_basic_block("grid.done")
    b.branch(spin)
    b.position_at_end(spin)
    now = b.load_atomic(counter, "acquire", 8, typ=I64)
    flipped = b.icmp_unsigned("!=", b.and_(b.xor(old, now), ir.Constant(I64, FLIP)),
                              ir.Constant(I64, 0))
    failed = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), ir.Constant(I64, 0))
    b.cbranch(flipped, done, wait)
    b.position_at_end(wait)
    yield_ = bl.mod.declare("sched_yield", I32, [])
    b.call(yield_, [])
    b.cbranch(failed, bl.exit_bb, spin)
    b.position_at_end(done)
    bl.mod.add_site("grid_sync", e.loc, op="kj.cg.this_grid().sync")  # marks it cooperative


# --- declarations --------------------------------------------------------------------------------

register(Intrinsic(
    name="cg.this_grid", operands=Operands(result=T.grid_group),
    lowering={ANY_TARGET: _lower_this_grid}, calls={L.cg.this_grid: _this_grid_typing},
    pure=True))
register(Intrinsic(
    name="cg.grid_sync", operands=Operands(result=T.void),
    lowering={"nvptx": _nvptx_grid_sync, "host": _host_grid_sync},
    barrier=True, convergent=True, min_arch="sm_70", host_symbols=("sched_yield",)))
