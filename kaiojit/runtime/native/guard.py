"""Whether this interpreter is one the native launch helpers were written for.

The builtins of this package are C functions compiled from LLVM IR that call CPython's C API
and, in one case (:mod:`.getset_reader`), read CPython's internal object layout (a
``getset_descriptor``'s ``PyGetSetDef``). They are right only for what they were written and
tested against: CPython (not PyPy or another implementation), a build with the GIL (a
free-threaded build lays out every object's header differently), and a version from
``TESTED_VERSIONS``. :func:`available` says whether all of that holds and the user has not
turned the helpers off (``KAIOJIT_NATIVE=0``); every helper asks it before it touches an object
layout, and where it says no, the launch fast form keeps its Python path (attribute reads, the
ctypes launch trampoline): slower by a few hundred nanoseconds a launch, the same results.
"""

from __future__ import annotations

import sys

from kaiojit import env

# the CPython versions whose object layouts the helpers read (3.11 and 3.12 are run by the
# suite; the headers of every version in between and of 3.10 and 3.13 give the same layouts)
TESTED_VERSIONS = ((3, 10), (3, 13))


def interpreter_problem() -> str | None:
    """Why this interpreter is not one the helpers were written for, or None."""
    if sys.implementation.name != "cpython":
        return f"the interpreter is {sys.implementation.name}, not CPython"
    if sys.version_info >= (3, 13) and _free_threaded():
        return "this CPython is a free-threaded build"
    low, high = TESTED_VERSIONS
    version = sys.version_info[:2]
    if not low <= version <= high:
        return (f"CPython {version[0]}.{version[1]} is outside the tested "
                f"{low[0]}.{low[1]} to {high[0]}.{high[1]}")
    return None


def _free_threaded() -> bool:
    """Whether this CPython was built without the GIL (3.13 and later only; ``sysconfig``,
    a few ms of a cold start, is imported only there)."""
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


_PROBLEM = interpreter_problem()  # the interpreter does not change while it runs


def available() -> bool:
    """Whether the native launch helpers may be used: a tested interpreter, and
    ``KAIOJIT_NATIVE`` not 0."""
    return _PROBLEM is None and env.get("KAIOJIT_NATIVE")


def unavailable_reason() -> str | None:
    """Why :func:`available` says no (the interpreter, or the knob), or None."""
    if _PROBLEM is not None:
        return _PROBLEM
    return None if env.get("KAIOJIT_NATIVE") else "KAIOJIT_NATIVE=0"


__all__ = ["TESTED_VERSIONS", "available", "interpreter_problem", "unavailable_reason"]
