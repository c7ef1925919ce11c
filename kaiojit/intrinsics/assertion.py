"""``assert cond`` and ``assert cond, "message"`` in kernels (numba's ``debug=True`` asserts).

The condition is always typed (a typing error in it is reported), but the check is compiled
only under ``debug=True``; without it the statement disappears, as numba removes asserts. A
failed assert is a fault as a debug bounds check is: on the cpu backend the first one is
recorded and the launch raises ``kj.KernelError`` naming the kernel, the Python line, the
block, the thread and the message; on the GPU the thread prints the same words and traps
(the launch's error, a ``kj.CudaError``, comes at the next synchronize).

The frontend (``Typer.visit_Assert``) makes the node. The message, a string literal, rides in the intrinsic's name after the colon
(``debug.assert:message``), so the node has one operand, the condition.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..kir import Expr
from ..kir.intrinsics import Intrinsic, Operands, register
from ..lower.llvmtypes import I64


def _message(e: Expr) -> str:
    return e.attr.partition(":")[2]


def _enabled(fl) -> bool:
    return bool(getattr(fl.options, "debug", False))


def _nvptx_assert(fl, e: Expr):
    if not _enabled(fl):
        return
    b = fl.builder
    failed = b.not_(fl.expr(e.args[0]))
    with b.if_then(failed, likely=False):
        loc = e.loc
        where = f"{loc.filename}:{loc.line}" if loc else "?"
        text = f": {_message(e)}" if _message(e) else ""
        sreg = [b.zext(fl.target.sreg(fl, f"{r}.{a}"), I64) for r in ("ctaid", "tid")
                for a in "xyz"]
        fl.target.print(fl, f"kaiojit: assertion failed in kernel {fl.kfunc.qualname} at "
                            f"{where}, block (%lld, %lld, %lld), thread (%lld, %lld, %lld)"
                            f"{text}\n", sreg)
        b.call(fl.mod.declare("llvm.trap", ir.VoidType(), []), [])


def _host_assert(fl, e: Expr):
    if not _enabled(fl):
        return
    from ..lower.host import record_error
    from ..target import ERR_ASSERT

    b = fl.builder
    failed = b.not_(fl.expr(e.args[0]))
    site = fl.mod.add_site("assert", e.loc, message=_message(e))
    with b.if_then(failed, likely=False):
        zero = ir.Constant(I64, 0)
        record_error(fl, ERR_ASSERT, site, zero, zero, fl.thread_linear())


register(Intrinsic(
    name="debug.assert", operands=Operands(T.bool_, result=T.void),
    lowering={"nvptx": _nvptx_assert, "host": _host_assert}))
