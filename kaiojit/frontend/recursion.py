"""Device functions that call themselves (numba's self-recursion).

A device function is typed once per argument types (``Dispatcher._device_kir``). While it is
being typed it is *pending*: its KIR function exists as a shell (name, parameters, and a return
type once one is known), and a call of it from its own body (or from a function it calls)
refers to the shell, which the typed function fills in when typing ends. The call is a real
call: LLVM inlines what it can and keeps the recursion.

The return type of a recursive call is the declared one (``@jit("i8(i8)", device=True)``), or
else the type of the returns typed before the call in the function's body (numba's rule:
``if n < 2: return n`` comes first). Either is checked when typing ends: a function that
returns another type is typed again with it, and one that keeps changing "does not
converge". A call reached before any return has a type is runaway recursion.

At decoration an eager signature types the function before its name is bound (the
``def`` statement has not finished, a closure's cell is still empty): its own name then
refers to the dispatcher being typed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields

from .. import types as T
from ..errors import TypingError
from ..kir import KFunction

_NOW = threading.local()
_ATTEMPTS = 3


@dataclass(eq=False)
class Pending:
    """A device function being typed for some argument types."""

    dispatcher: object
    shell: KFunction
    guessed: bool = False  # a recursive call took shell.return_type: check it at the end


def _pending() -> dict:
    return _NOW.__dict__.setdefault("functions", {})


def pending_shell(dispatcher, arg_types: tuple) -> KFunction | None:
    """The shell of ``dispatcher`` typed for ``arg_types`` now on this thread (a recursive
    call), or None."""
    p = _pending().get((id(dispatcher), arg_types))
    return None if p is None else p.shell


def self_reference(pyfunc, name: str):
    """The dispatcher typing ``pyfunc`` now, where ``name`` is its own unbound name."""
    if name != pyfunc.__name__:
        return None
    for p in _pending().values():
        if p.dispatcher.py_func is pyfunc:
            return p.dispatcher
    return None


def call_return_type(typer, callee: KFunction, node) -> T.Type:
    """The type of a call of ``callee``: its return type, or for a pending function whose
    return type is not known yet, the type of the returns typed so far in its own body."""
    for p in _pending().values():
        if p.shell is callee:
            break
    else:
        return callee.return_type
    p.guessed = True
    if callee.return_type is None:
        if typer.pyfunc is not p.dispatcher.py_func or not typer.return_types:
            typer.error(f"{callee.name}() calls itself before any of its returns has a type: "
                        "cannot type infer runaway recursion (return a value before the call, "
                        "or declare the function's signature)", node)
        callee.return_type = typer._return_type()
    return callee.return_type


def type_recursive(dispatcher, arg_types: tuple, params: tuple, declared: T.Type | None,
                   type_once) -> KFunction:
    """``type_once()`` (the typer run for ``arg_types``) with ``dispatcher`` pending, so that
    its calls of itself type; the typed function is the shell those calls refer to."""
    pyfunc = dispatcher.py_func
    shell = KFunction(name=pyfunc.__name__, qualname=pyfunc.__qualname__, params=params,
                      return_type=declared, locals={}, body=[], is_kernel=False)
    p = Pending(dispatcher, shell)
    key = (id(dispatcher), arg_types)
    _pending()[key] = p
    try:
        for _ in range(_ATTEMPTS):
            guess = shell.return_type
            try:
                kf = type_once()
            except TypingError as e:
                if p.guessed and shell.return_type == T.void:
                    raise TypingError(
                        f"{pyfunc.__name__}(): Return type of recursive function does not "
                        f"converge: a call of itself takes the type of the returns before it "
                        f"(None), and then {e.message}", e.loc) from None
                raise
            if not p.guessed or kf.return_type == guess:
                break
            shell.return_type, p.guessed = kf.return_type, False  # again, with what it returns
        else:
            raise TypingError(f"{pyfunc.__name__}(): Return type of recursive function does not "
                              f"converge (it returns {kf.return_type} where its calls of itself "
                              f"return {guess})", kf.loc)
    finally:
        del _pending()[key]
    for f in fields(KFunction):
        setattr(shell, f.name, getattr(kf, f.name))
    shell.callees = [shell if c is kf else c for c in kf.callees]
    return shell


__all__ = ["call_return_type", "pending_shell", "self_reference", "type_recursive"]
