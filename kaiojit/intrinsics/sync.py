"""Synchronization: ``kj.syncthreads()`` and its reductions ``syncthreads_count/and/or(p)``
(block barriers), ``kj.syncwarp(mask)`` (a warp barrier) and the memory fences
``kj.threadfence()``, ``threadfence_block()``, ``threadfence_system()``.

On the GPU they are the PTX instructions of those names. On the host a barrier is a split
point of the block-synchronous lowering (``BlockLowering.barrier``); the threads of a warp are
already in step at every split point, so ``syncwarp`` needs nothing more, and a fence is an
LLVM fence.
"""

from __future__ import annotations

from llvmlite import ir

from .. import language as L
from .. import types as T
from .api import I32, Expr, Intrinsic, Operands, call_args, inline_asm, register


def _typing(name: str, nargs: int, returns: T.Type):
    def typing(typer, node):
        args = call_args(typer, node, nargs, nargs, f"kj.{name}")
        if nargs:
            args = [typer.truth(args[0], node.args[0])]
        return typer.intrinsic(f"sync.{name}", returns, args, node)
    return typing


def _syncwarp_typing(typer, node):
    args = call_args(typer, node, 0, 1, "kj.syncwarp")
    mask = typer.coerce(args[0], T.uint32, node) if args else \
        Expr("const", T.uint32, attr=0xFFFFFFFF)
    return typer.intrinsic("sync.syncwarp", T.void, [mask], node)


def _fence_typing(name: str):
    def typing(typer, node):
        call_args(typer, node, 0, 0, f"kj.{name}")
        return typer.intrinsic(f"fence.{name}", T.void, (), node)
    return typing


# --- the GPU -------------------------------------------------------------------------------------

def _nvptx_syncthreads(fl, e: Expr):
    fn = fl.mod.declare("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32])
    fl.builder.call(fn, [ir.Constant(I32, 0)])


def _nvptx_bar_red(kind: str):
    """bar.red: a barrier that also reduces a predicate over the block (popc, and, or)."""
    if kind == "popc":
        text = "{ .reg .pred p; setp.ne.u32 p, $1, 0; bar.red.popc.u32 $0, 0, p; }"
    else:
        text = ("{ .reg .pred p, q; setp.ne.u32 p, $1, 0; "
                f"bar.red.{kind}.pred q, 0, p; selp.u32 $0, 1, 0, q; }}")

    def lower(fl, e: Expr):
        pred = fl.builder.zext(fl.expr(e.args[0]), I32)
        return inline_asm(fl, I32, text, "=r,r,~{memory}", [pred], convergent=True)
    return lower


def _nvptx_syncwarp(fl, e: Expr):
    fn = fl.mod.declare("llvm.nvvm.bar.warp.sync", ir.VoidType(), [I32])
    fl.builder.call(fn, [fl.expr(e.args[0])])


def _nvptx_fence(level: str):
    def lower(fl, e: Expr):
        inline_asm(fl, ir.VoidType(), f"membar.{level};", "~{memory}", [], convergent=False)
    return lower


# --- the host ------------------------------------------------------------------------------------

def _host_barrier(combine=None):
    def lower(bl, target, e: Expr):
        bl.barrier(target, e, combine)
    return lower


def _count(b, count, arrived):
    return count


def _all(b, count, arrived):
    return b.zext(b.icmp_signed("==", count, arrived), I32)


def _any(b, count, arrived):
    return b.zext(b.icmp_signed("!=", count, ir.Constant(I32, 0)), I32)


def _host_syncwarp(bl, target, e: Expr):
    """Nothing: the threads of a warp are in step at every split point already."""


def _host_fence(fl, e: Expr):
    fl.builder.fence("seq_cst")


# --- declarations --------------------------------------------------------------------------------

register(Intrinsic(
    name="sync.syncthreads", operands=Operands(result=T.void),
    lowering={"nvptx": _nvptx_syncthreads, "host": _host_barrier()},
    calls={L.syncthreads: _typing("syncthreads", 0, T.void)}, barrier=True, convergent=True))
for _name, _kind, _combine in (("count", "popc", _count), ("and", "and", _all),
                               ("or", "or", _any)):
    register(Intrinsic(
        name=f"sync.syncthreads_{_name}", operands=Operands(T.bool_, result=T.int32),
        lowering={"nvptx": _nvptx_bar_red(_kind), "host": _host_barrier(_combine)},
        calls={getattr(L, f"syncthreads_{_name}"): _typing(f"syncthreads_{_name}", 1, T.int32)},
        barrier=True, convergent=True))
register(Intrinsic(
    name="sync.syncwarp", operands=Operands(T.uint32, result=T.void),
    lowering={"nvptx": _nvptx_syncwarp, "host": _host_syncwarp},
    calls={L.syncwarp: _syncwarp_typing}, warp=True, convergent=True))
for _name, _level in (("threadfence", "gl"), ("threadfence_block", "cta"),
                      ("threadfence_system", "sys")):
    register(Intrinsic(
        name=f"fence.{_name}", operands=Operands(result=T.void),
        lowering={"nvptx": _nvptx_fence(_level), "host": _host_fence},
        calls={getattr(L, _name): _fence_typing(_name)}))
