"""Calls of foreign device functions (``kj.declare_device``, see ``kaiojit/linking.py``):
``foreign.call:<name>``, operands already converted to the declared argument types.

On the GPU the call is to an external function of that name, in numba's ABI
(``int name(T *result, args...)``) or C's; the runtime links the definition. On the host it
calls the declaration's Python implementation through a C callback, or is a located error.
"""

from __future__ import annotations

from llvmlite import ir

from ..errors import UnsupportedError
from .api import I32, Expr, Intrinsic, ll_type, register


def _declaration(e: Expr):
    from ..linking import declaration

    return declaration(e.param)


def _check(e: Expr) -> str | None:
    try:
        decl = _declaration(e)
    except KeyError:
        return f"no device function {e.param!r} is declared"
    got = tuple(a.type for a in e.args)
    if got != decl.signature.args or e.type != decl.signature.return_type:
        return f"a call of {decl.name}{got} -> {e.type}, declared {decl.signature}"
    return None


def _nvptx_call(fl, e: Expr):
    decl = _declaration(e)
    b = fl.builder
    args = [fl.expr(a) for a in e.args]
    rt = ll_type(e.type)
    if decl.abi == "c":
        fn = fl.mod.declare(decl.name, rt, [a.type for a in args])
        return b.call(fn, args)
    fn = fl.mod.declare(decl.name, I32, [ir.PointerType()] + [a.type for a in args])
    slot = fl.alloca(rt, name=f"{decl.name}.ret")
    b.call(fn, [slot] + args)
    return b.load(slot, typ=rt)


def _host_call(fl, e: Expr):
    decl = _declaration(e)
    if decl.py_impl is None:
        raise UnsupportedError(
            f"{decl.name}() is foreign device code, which cannot run on the cpu backend: "
            f"declare it with kj.declare_device(..., py_impl=<a Python function>) to run "
            "that there instead", e.loc)
    decl.bind_host()
    args = [fl.expr(a) for a in e.args]
    fn = fl.mod.declare(decl.host_symbol, ll_type(e.type), [a.type for a in args])
    return fl.builder.call(fn, args)


register(Intrinsic(name="foreign.call", operands=_check,
                   lowering={"nvptx": _nvptx_call, "host": _host_call},
                   param=str))  # the declared function's name
