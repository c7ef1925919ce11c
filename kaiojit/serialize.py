"""Pickling the Python functions kernels are made of, as numba pickles its dispatchers.

A function a module defines at its top level travels by reference (its module and qualified
name), as pickle sends functions. Any other (a kernel defined inside a function, a closure, a
function of ``exec``'d text) travels by value: its code object (``marshal``, so the loading
Python must be the same version), the globals it names, its defaults and the contents of its
closure cells, each pickled in turn (modules by name; device functions by these same rules),
and the source lines kaiojit compiles from (its file's lines, given to ``linecache`` where
the loading process has no such file). The rebuilt function has globals of its own, holding
those names only, as numba's rebuilt functions do.
"""

from __future__ import annotations

import importlib
import linecache
import marshal
import os
import sys
import types
from typing import Any


def function_reference(fn: types.FunctionType, holder: Any) -> tuple | None:
    """``(module, qualname)`` when ``holder`` (the function or the object wrapping it) is what
    that name holds at its module's top level, else None."""
    module = sys.modules.get(fn.__module__)
    if module is None or "<locals>" in fn.__qualname__:
        return None
    value: Any = module
    for part in fn.__qualname__.split("."):
        value = getattr(value, part, None)
    return (fn.__module__, fn.__qualname__) if value is holder else None


def by_reference(module: str, qualname: str) -> Any:
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


class _Module:
    """A module in a pickled function's globals: rebuilt by importing its name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        return importlib.import_module, (self.name,)


def _names(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the code nested in it may read."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _picklable(value: Any) -> Any:
    return _Module(value.__name__) if isinstance(value, types.ModuleType) else value


def function_state(fn: types.FunctionType) -> tuple:
    """What rebuilds ``fn`` by value (see the module's doc)."""
    code = fn.__code__
    scope = fn.__globals__
    names = {n: _picklable(scope[n]) for n in sorted(_names(code)) if n in scope}
    cells = tuple(_picklable(c.cell_contents) for c in (fn.__closure__ or ()))
    lines = tuple(linecache.getlines(code.co_filename, scope))
    return (marshal.dumps(code), fn.__name__, fn.__qualname__, fn.__module__, names,
            fn.__defaults__, fn.__kwdefaults__, cells, lines)


def rebuild_function(state: tuple) -> types.FunctionType:
    code_bytes, name, qualname, module, names, defaults, kwdefaults, cells, lines = state
    code = marshal.loads(code_bytes)
    filename = code.co_filename
    if lines and not os.path.exists(filename) and not linecache.getlines(filename):
        # the source kaiojit compiles from, where this process has no such file
        linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
    scope = {"__builtins__": __builtins__, "__name__": module, **names}
    closure = tuple(types.CellType(v) for v in cells) or None
    fn = types.FunctionType(code, scope, name, defaults, closure)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults
    fn.__module__ = module
    return fn
