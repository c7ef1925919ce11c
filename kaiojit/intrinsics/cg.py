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
block (the block-synchronous lowering runs a block as one call) on a word of the launch state;
the waiters sleep on a futex that the last block to arrive wakes (a thousand blocks on two
cores cost no spinning), and a recorded fault anywhere ends the wait.
"""

from __future__ import annotations

from llvmlite import ir

from .. import language as L
from .. import types as T
from ..target import FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE, SYS_FUTEX
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

# futex(2) (kaiojit.target.SYS_FUTEX): the launch-state word of the barrier holds the counter
# in its low half and a wake sequence in its high half. The block that completes a barrier
# bumps the sequence and wakes every waiter; a waiter sleeps on the sequence it read before
# checking the counter, so no wake is lost. A block's thread that ends while the launch records
# a fault bumps and wakes too (kaiojit/runtime/blockthreads.py), and the waiters then see the
# fault and stop. Where futex(2) is not known, the waiters yield their core instead.


def _host_grid_sync(bl, target, e: Expr):
    from ..target import CTX_GRID, CTX_LAUNCH, LAUNCH_ERROR, LAUNCH_GRID_BARRIER
    from .api import block_linear, ctx_word, ctx_word_ptr

    bl.barrier(None, e)  # every thread of the block, as on the GPU
    b = bl.builder
    ctx = bl.ctx
    launch = b.inttoptr(ctx_word(b, ctx, CTX_LAUNCH), PTR)
    word = ctx_word_ptr(b, launch, LAUNCH_GRID_BARRIER)
    counter = word  # the low half (little-endian hosts)
    sequence = b.gep(word, [ir.Constant(I64, 4)], source_etype=I8)
    blocks = b.trunc(b.mul(b.mul(ctx_word(b, ctx, CTX_GRID), ctx_word(b, ctx, CTX_GRID + 1)),
                           ctx_word(b, ctx, CTX_GRID + 2)), I32)
    first = b.icmp_unsigned("==", block_linear(b, ctx), ir.Constant(I64, 0))
    inc = b.select(first, b.sub(ir.Constant(I32, FLIP), b.sub(blocks, ir.Constant(I32, 1))),
                   ir.Constant(I32, 1))
    old = b.atomic_rmw("add", counter, inc, "seq_cst")
    spin = bl.llfunc.append_basic_block("grid.spin")
    wait = bl.llfunc.append_basic_block("grid.wait")
    done = bl.llfunc.append_basic_block("grid.done")
    if SYS_FUTEX is not None:  # the last block to arrive flips bit 31 and wakes the others
        wake = bl.llfunc.append_basic_block("grid.wake")
        b.cbranch(_flip_bit(b, old, b.add(old, inc)), wake, spin)
        b.position_at_end(wake)
        b.atomic_rmw("add", sequence, ir.Constant(I32, 1), "seq_cst")
        _futex(bl, sequence, FUTEX_WAKE_PRIVATE, ir.Constant(I32, 0x7FFFFFFF))
        b.branch(done)
    else:
        b.branch(spin)
    b.position_at_end(spin)
    seen = b.load_atomic(sequence, "seq_cst", 4, typ=I32)
    now = b.load_atomic(counter, "seq_cst", 4, typ=I32)
    b.cbranch(_flip_bit(b, old, now), done, wait)
    b.position_at_end(wait)
    failed = b.icmp_unsigned("!=", ctx_word(b, launch, LAUNCH_ERROR), ir.Constant(I64, 0))
    sleep = bl.llfunc.append_basic_block("grid.sleep")
    b.cbranch(failed, bl.exit_bb, sleep)
    b.position_at_end(sleep)
    if SYS_FUTEX is not None:
        _futex(bl, sequence, FUTEX_WAIT_PRIVATE, seen)
    else:
        b.call(bl.mod.declare("sched_yield", I32, []), [])
    b.branch(spin)
    b.position_at_end(done)
    bl.mod.add_site("grid_sync", e.loc, op="kj.cg.this_grid().sync")  # marks it cooperative


def _flip_bit(b, before, after):
    """Whether bit 31 differs between two values of the barrier's counter."""
    return b.icmp_unsigned("!=", b.and_(b.xor(before, after), ir.Constant(I32, FLIP)),
                           ir.Constant(I32, 0))


def _futex(bl, word, op: int, value):
    """``syscall(SYS_futex, word, op, value, NULL)``."""
    syscall = bl.mod.declare("syscall", I64, [I64], var_arg=True)
    bl.builder.call(syscall, [ir.Constant(I64, SYS_FUTEX), word, ir.Constant(I32, op), value,
                              ir.Constant(PTR, None)])


# --- declarations --------------------------------------------------------------------------------

register(Intrinsic(
    name="cg.this_grid", operands=Operands(result=T.grid_group),
    lowering={ANY_TARGET: _lower_this_grid}, calls={L.cg.this_grid: _this_grid_typing},
    pure=True))
register(Intrinsic(
    name="cg.grid_sync", operands=Operands(result=T.void),
    lowering={"nvptx": _nvptx_grid_sync, "host": _host_grid_sync},
    barrier=True, convergent=True, min_arch="sm_70", host_symbols=("syscall", "sched_yield")))
