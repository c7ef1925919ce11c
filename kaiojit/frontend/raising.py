"""``raise`` in a kernel, as numba compiles it.

``raise ValueError``, ``raise MyError("message")`` (an exception class, with constant
arguments) end the raising thread. Under ``debug=True`` the first raise of a launch is
recorded as a fault (``debug.raise``: kaiojit/intrinsics/assertion.py) and the launch raises
it on the host: an instance of the class (also a :class:`kaiojit.KernelError`) whose first
argument is numba's ``"In function 'k', file f.py, line 5, tid=[0, 0, 0] ctaid=[0, 0, 0]:
message"``. Without ``debug`` nothing is reported (numba's behaviour): the thread just
returns. A raise in a device function is an error: kaiojit does not carry an exception out of
a device function (numba does not report those correctly either: its issue 8036).
"""

from __future__ import annotations

import ast
import json

from .. import kir
from .. import types as T
from ..errors import UnsupportedError, raised_class_key
from .values import PyObj


def raise_statement(typer, node: ast.Raise) -> list:
    """The statements of ``raise Cls(args)`` in a kernel: the fault, then a return."""
    if not typer.is_kernel:
        typer.error("'raise' in a device function is not supported: raise in the kernel "
                    "itself (exceptions of device functions are not reported)", node,
                    UnsupportedError)
    if node.exc is None:
        typer.error("a bare 'raise' re-raises the exception being handled, and kernels "
                    "handle none", node, UnsupportedError)
    if node.cause is not None:
        typer.error("'raise ... from' is not supported in kernels", node.cause, UnsupportedError)
    exc, args = node.exc, []
    if isinstance(exc, ast.Call):
        if exc.keywords:
            typer.error("an exception raised in a kernel takes positional arguments only",
                        exc.keywords[0].value, UnsupportedError)
        exc, args = exc.func, [_constant(typer, a) for a in exc.args]
    cls = typer.visit(exc)
    if not (isinstance(cls, PyObj) and isinstance(cls.value, type)
            and issubclass(cls.value, BaseException)):
        typer.error("a kernel raises an exception class, such as 'raise ValueError' or "
                    "'raise ValueError(\"message\")'", exc, UnsupportedError)
    param = json.dumps([raised_class_key(cls.value), args])
    fault = typer.intrinsic("debug.raise", T.void, (), node, param=param)
    return [kir.ExprStmt(fault, typer.loc(node)), kir.Return(None, typer.loc(node))]


def _debug(typer) -> bool:
    return bool(getattr(typer.options, "debug", False))


def checked_divisor(typer, divisor: kir.Expr, op: str, node) -> kir.Expr:
    """The divisor of ``/``, ``//`` or ``%``; under debug=True checked first (numba's
    debug-mode ZeroDivisionError: a zero divisor is a fault, the launch raises it)."""
    if not _debug(typer) or (divisor.op == "const" and divisor.attr != 0) or \
            not isinstance(divisor.type, T.ScalarType) or divisor.type.is_complex:
        return divisor
    words = "modulo by zero" if op == "%" else "division by zero"
    return _checked(typer, divisor, ZeroDivisionError, words, "nonzero", 0, node)


def checked_tuple_index(typer, index: kir.Expr, n: int, node) -> kir.Expr:
    """A run-time index into a tuple of ``n`` items; under debug=True checked first (from -n
    to n - 1, as Python: IndexError, numba's debug-mode message)."""
    if not _debug(typer):
        return index
    return _checked(typer, index, IndexError, "tuple index out of range", "index", n, node)


def _checked(typer, value: kir.Expr, cls: type, words: str, kind: str, n: int, node):
    param = json.dumps([raised_class_key(cls), [words], kind, n])
    return typer.intrinsic("debug.check", value.type, (value,), node, param=param)


def _constant(typer, node):
    """An exception's argument: a constant (a string, a number, a bool)."""
    value = typer.visit(node)
    if isinstance(value, PyObj):
        value = value.value
    elif isinstance(value, kir.Expr) and value.op == "const":
        value = value.attr
    if type(value) not in (str, int, float, bool):
        typer.error("an exception raised in a kernel takes constant arguments (a string or a "
                    "number)", node, UnsupportedError)
    return value


__all__ = ["checked_divisor", "checked_tuple_index", "raise_statement"]
