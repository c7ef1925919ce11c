"""Calls of foreign device functions (``kj.declare_device``, see ``kaiojit/linking.py``):
``foreign.call:<name>``, operands already converted to the declared argument types.

On the GPU the call is to an external function of that name, in numba's ABI
(``int name(T *result, args...)``) or C's; the runtime links the definition. On the host it
calls the declaration's Python implementation through a C callback, or the function its
``.cu`` files define, compiled for the host (kaiojit/hostcu.py); GPU code alone (PTX, cubins)
is a located error.
"""

from __future__ import annotations

import os

from llvmlite import ir

from .. import types as T
from ..errors import CompileError, UnsupportedError
from .api import I32, I64, Expr, Intrinsic, ll_type, register


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


def _emit_call(fl, e: Expr, symbol: str):
    """The call of the declared function under ``symbol``, in its ABI: numba's
    (``int name(T *result, args...)``, the status ignored; a void function still gets a
    result slot) or C's (``T name(args...)``)."""
    decl = _declaration(e)
    b = fl.builder
    args = [fl.expr(a) for a in e.args]
    rt = ll_type(e.type)
    if decl.abi == "c":
        fn = fl.mod.declare(symbol, rt, [a.type for a in args])
        return b.call(fn, args)
    fn = fl.mod.declare(symbol, I32, [ir.PointerType()] + [a.type for a in args])
    slot = fl.alloca(I64 if e.type == T.void else rt, name=f"{decl.name}.ret")
    b.call(fn, [slot] + args)
    return None if e.type == T.void else b.load(slot, typ=rt)


def _nvptx_call(fl, e: Expr):
    return _emit_call(fl, e, _declaration(e).name)


def _host_call(fl, e: Expr):
    """The Python implementation (``py_impl=``) through a C callback, or the declaration's
    ``.cu`` files (and the kernel's) compiled for the host (kaiojit/hostcu.py)."""
    decl = _declaration(e)
    if decl.py_impl is not None:
        decl.bind_host()
        args = [fl.expr(a) for a in e.args]
        fn = fl.mod.declare(decl.host_symbol, ll_type(e.type), [a.type for a in args])
        return fl.builder.call(fn, args)
    files = tuple(dict.fromkeys((*decl.link, *getattr(fl.options, "link", ()))))
    sources = tuple(f for f in files if f.endswith(".cu"))
    if not sources:
        gpu_only = f" ({', '.join(os.path.basename(f) for f in files)} is GPU code)" \
            if files else ""
        raise UnsupportedError(
            f"{decl.name}() is foreign device code, which cannot run on the cpu backend"
            f"{gpu_only}: link CUDA C source (.cu, cuda.CUSource), which the cpu backend "
            "compiles for the host, or declare it with kj.declare_device(..., "
            "py_impl=<a Python function>) to run that there instead", e.loc)
    from ..hostcu import symbol

    try:
        registered = symbol(decl.name, sources)
    except CompileError as err:
        raise CompileError(f"{decl.name}(): {err.message}", e.loc) from None
    fl.target.link_symbols((registered,))
    return _emit_call(fl, e, registered)


register(Intrinsic(name="foreign.call", operands=_check,
                   lowering={"nvptx": _nvptx_call, "host": _host_call},
                   param=str))  # the declared function's name


def _buffer_operands(e: Expr) -> str | None:
    ok = (len(e.args) == 1 and isinstance(e.args[0].type, T.ArrayType)
          and e.type == T.CPointer(e.args[0].type.dtype))
    return None if ok else f"ffi.from_buffer of {[a.type for a in e.args]} -> {e.type}"


def _buffer(fl, e: Expr):
    return fl.builder.extract_value(fl.expr(e.args[0]), 0)  # the array's data pointer


register(Intrinsic(name="foreign.buffer", operands=_buffer_operands,
                   lowering={"nvptx": _buffer, "host": _buffer}))  # ffi.from_buffer(array)
