"""The launch fast path's native helpers: generated Python and host code that calls CPython's C
API, in one package behind one guard.

- :mod:`.fastlaunch`: the generated Python function ``fast(*args)`` of a launch shape;
- :mod:`.launchrecord`: the prebuilt driver call and its trampolines (a builtin, a C function);
- :mod:`.reader`: the one builder of native array readers (their shared prologue), with
  :mod:`.dlpack_exchange` (DLPack's C exchange API) and :mod:`.getset_reader` (C getters);
- :mod:`.cbuiltins`: builtin functions whose C function is compiled from LLVM IR;
- :mod:`.irstruct`: IR struct types derived from the ``ctypes`` structures the code reads;
- :mod:`.guard`: :func:`available`, asked before any object layout is touched; where it says
  no, the fast form keeps its Python path.

This ``__init__`` imports the guard only: asking it compiles nothing.
"""

from __future__ import annotations

from kaiojit.runtime.native.guard import available, unavailable_reason

__all__ = ["available", "unavailable_reason"]
