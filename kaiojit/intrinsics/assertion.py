"""``assert cond`` and ``assert cond, "message"`` in kernels (numba's ``debug=True`` asserts).

The condition is always typed (a typing error in it is reported), but the check is compiled
only under ``debug=True``; without it the statement disappears, condition included, as numba
removes asserts (and as ``python -O`` does). A failed assert is a fault as a debug bounds
check is, reported as ``kj.KernelError`` naming the kernel, the Python line, the block, the
thread and the message (``kaiojit.runtime.faults.assert_message``). On the cpu backend the
first one is recorded and the launch raises. On the GPU the failing thread writes the
module's fault record (``kaiojit/lower/gpu_faults.py``; the first fault of a launch wins) and
exits; the other threads run on, and the error is raised at the next synchronization. Nothing
traps, so the CUDA context stays usable.

The frontend (``Typer.visit_Assert``) makes the node. The message, a string literal, rides in
the intrinsic's name after the colon (``debug.assert:message``), so the node has one operand,
the condition.
"""

from __future__ import annotations

import json

from llvmlite import ir

from .. import types as T
from .api import I64, SCALAR, Expr, Intrinsic, Operands, Same, register


def _message(e: Expr) -> str:
    return e.param


def _enabled(fl) -> bool:
    return bool(getattr(fl.options, "debug", False))


def _nvptx_assert(fl, e: Expr):
    if not _enabled(fl):
        return
    from .api import add_site, fail_assert

    site = add_site(fl.target.sites, e.loc, kind="assert", message=_message(e))
    fail_assert(fl, fl.builder.not_(fl.expr(e.args[0])), site)


def _host_assert(fl, e: Expr):
    if not _enabled(fl):
        return
    from ..target import ERR_ASSERT
    from .api import record_error

    b = fl.builder
    failed = b.not_(fl.expr(e.args[0]))
    site = fl.mod.add_site("assert", e.loc, message=_message(e))
    with b.if_then(failed, likely=False):
        zero = ir.Constant(I64, 0)
        record_error(fl, ERR_ASSERT, site, zero, zero, fl.thread_linear())


register(Intrinsic(
    name="debug.assert", operands=Operands(T.bool_, result=T.void),
    lowering={"nvptx": _nvptx_assert, "host": _host_assert}, param=str))  # the message


# --- raise (kaiojit/frontend/raising.py): the exception named by the node's param ------------

def _raised(e: Expr) -> dict:
    key, args = json.loads(e.param)
    return {"exception": key, "args": args}


def _nvptx_raise(fl, e: Expr):
    if not _enabled(fl):
        return
    from ..target import ERR_RAISE
    from .api import add_site, record_fault

    site = add_site(fl.target.sites, e.loc, kind="raise", **_raised(e))
    zero = ir.Constant(I64, 0)
    record_fault(fl, ERR_RAISE, site, zero, zero)


def _host_raise(fl, e: Expr):
    if not _enabled(fl):
        return
    from ..target import ERR_RAISE
    from .api import record_error

    site = fl.mod.add_site("raise", e.loc, **_raised(e))
    zero = ir.Constant(I64, 0)
    record_error(fl, ERR_RAISE, site, zero, zero, fl.thread_linear())


def _check_fails(fl, e: Expr, value):
    """The i1 that is true where a debug check of ``value`` fails."""
    _, _, kind, n = json.loads(e.param)
    b = fl.builder
    t = e.type
    if kind == "nonzero":
        if t.is_float:
            return b.fcmp_ordered("==", value, ir.Constant(value.type, 0.0))
        return b.icmp_unsigned("==", value, ir.Constant(value.type, 0))
    v = b.sext(value, I64) if value.type.width < 64 else value  # an index: -n <= v < n
    return b.icmp_unsigned(">=", b.add(v, ir.Constant(I64, n)), ir.Constant(I64, 2 * n))


def _nvptx_check(fl, e: Expr):
    value = fl.expr(e.args[0])
    if not _enabled(fl):
        return value
    from ..target import ERR_RAISE
    from .api import add_site, record_fault

    key, args, _, _ = json.loads(e.param)
    site = add_site(fl.target.sites, e.loc, kind="raise", exception=key, args=args)
    with fl.builder.if_then(_check_fails(fl, e, value), likely=False):
        zero = ir.Constant(I64, 0)
        record_fault(fl, ERR_RAISE, site, zero, zero)
    return value


def _host_check(fl, e: Expr):
    value = fl.expr(e.args[0])
    if not _enabled(fl):
        return value
    from ..target import ERR_RAISE
    from .api import record_error

    key, args, _, _ = json.loads(e.param)
    site = fl.mod.add_site("raise", e.loc, exception=key, args=args)
    with fl.builder.if_then(_check_fails(fl, e, value), likely=False):
        zero = ir.Constant(I64, 0)
        record_error(fl, ERR_RAISE, site, zero, zero, fl.thread_linear())
    return value


register(Intrinsic(
    name="debug.check", operands=Operands(SCALAR, result=Same(0)),
    lowering={"nvptx": _nvptx_check, "host": _host_check},
    param=str))  # [class key, args, "nonzero" | "index", n]: the value, checked under debug


register(Intrinsic(
    name="debug.raise", operands=Operands(result=T.void),
    lowering={"nvptx": _nvptx_raise, "host": _host_raise}, param=str))  # [class key, args]
