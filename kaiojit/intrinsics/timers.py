"""Time inside kernels.

* ``kj.nanosleep(ns)``: suspends the thread for about ``ns`` nanoseconds (an unsigned 32-bit
  integer). On the GPU it is PTX ``nanosleep.u32`` (sm_70 and newer), which sleeps anywhere
  from 0 to 2 * ns and at most 1 ms; on the host a real ``nanosleep``, capped at 1 ms too.
* ``kj.globaltimer()``: a 64-bit clock in nanoseconds (uint64): PTX ``%globaltimer`` on the GPU,
  ``clock_gettime(CLOCK_MONOTONIC)`` on the host. Only differences of two readings mean
  something; reads in one thread never go backwards.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from .api import (I32, I64, PTR, Expr, Intrinsic, Operands, call_args, register, scalar_arg,
                  type_words)

MAX_SLEEP_NS = 1_000_000  # the PTX ISA's longest nanosleep
CLOCK_MONOTONIC = 1  # <time.h> on Linux
TIMESPEC = ir.ArrayType(I64, 2)  # struct timespec {tv_sec, tv_nsec} on 64-bit Linux


def _nanosleep_typing(typer, node):
    (ns,) = call_args(typer, node, 1, 1, "kj.nanosleep")
    t = scalar_arg(typer, ns, node.args[0], "kj.nanosleep()")
    if not t.is_int:
        typer.error(f"kj.nanosleep() takes whole nanoseconds (an integer), got {type_words(t)}",
                    node.args[0])
    if ns.op == "const" and not 0 <= ns.attr <= 0xFFFFFFFF:
        typer.error(f"kj.nanosleep() takes 0 to 4294967295 nanoseconds, got {ns.attr}",
                    node.args[0])
    return typer.intrinsic("timer.nanosleep", T.void, (typer.coerce(ns, T.uint32, node),), node)


def _globaltimer_typing(typer, node):
    call_args(typer, node, 0, 0, "kj.globaltimer")
    return typer.intrinsic("timer.globaltimer", T.uint64, (), node)


def _nvptx_nanosleep(fl, e: Expr):
    fn = fl.mod.declare("llvm.nvvm.nanosleep", ir.VoidType(), [I32])
    fl.builder.call(fn, [fl.expr(e.args[0])])


def _nvptx_globaltimer(fl, e: Expr):
    return fl.builder.call(fl.mod.declare("llvm.nvvm.read.ptx.sreg.globaltimer", I64, []), [])


def _field(b: ir.IRBuilder, timespec, index: int):
    return b.gep(timespec, [ir.Constant(I32, 0), ir.Constant(I32, index)])


def _host_nanosleep(fl, e: Expr):
    b = fl.builder
    ns = b.zext(fl.expr(e.args[0]), I64)
    cap = ir.Constant(I64, MAX_SLEEP_NS)
    ts = fl.alloca(TIMESPEC, name="timespec")
    b.store(ir.Constant(I64, 0), _field(b, ts, 0))
    b.store(b.select(b.icmp_unsigned(">", ns, cap), cap, ns), _field(b, ts, 1))
    sleep = fl.mod.declare("nanosleep", I32, [PTR, PTR])
    b.call(sleep, [ts, ir.Constant(PTR, None)])


def _host_globaltimer(fl, e: Expr):
    b = fl.builder
    ts = fl.alloca(TIMESPEC, name="timespec")
    clock = fl.mod.declare("clock_gettime", I32, [I32, PTR])
    b.call(clock, [ir.Constant(I32, CLOCK_MONOTONIC), ts])
    seconds = b.load(_field(b, ts, 0), typ=I64)
    nanoseconds = b.load(_field(b, ts, 1), typ=I64)
    return b.add(b.mul(seconds, ir.Constant(I64, 1_000_000_000)), nanoseconds)


register(Intrinsic(
    name="timer.nanosleep", operands=Operands(T.uint32, result=T.void),
    lowering={"nvptx": _nvptx_nanosleep, "host": _host_nanosleep},
    calls={"kj.nanosleep": _nanosleep_typing}, min_arch="sm_70", host_symbols=("nanosleep",)))
register(Intrinsic(
    name="timer.globaltimer", operands=Operands(result=T.uint64),
    lowering={"nvptx": _nvptx_globaltimer, "host": _host_globaltimer},
    calls={"kj.globaltimer": _globaltimer_typing}, host_symbols=("clock_gettime",)))
