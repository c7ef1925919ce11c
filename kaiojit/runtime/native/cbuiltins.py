"""Python builtin functions whose C function is host code kaiojit compiles from LLVM IR.

The launch fast path calls such builtins (:mod:`.launchrecord`'s launch trampoline, the array
readers of :mod:`.reader`): a builtin call costs ~40 ns where a ctypes call costs ~300 ns,
because CPython calls the C function directly with no argument conversion. The IR is compiled
once per process with MCJIT; it calls functions of CPython's C API bound by address from this
process (``ctypes.pythonapi``), so the same text serves every version
:func:`kaiojit.runtime.native.available` accepts.

A builtin is ``PyCFunction_NewEx(&method_def, self, NULL)``: ``self`` is a tuple whose first
item is a capsule of the native data the C function reads (a launch record, an array spec)
and whose other items keep what that data points into alive.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

METH_NOARGS = 0x0004  # methodobject.h
METH_FASTCALL = 0x0080


class MethodDef(ctypes.Structure):
    """``PyMethodDef`` (methodobject.h; the same in every CPython 3). A builtin points to its
    definition, so one must live as long as the builtins made from it: keep it at module
    level or in a compiled-once table."""

    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def compile_ir(text: str, python_symbols: tuple[str, ...]) -> Any:
    """Compile ``text`` for this process's CPU, its ``declare``\\ d CPython functions
    (``python_symbols``) bound to this interpreter's. The engine owns the code: keep it."""
    # imported here: a process that only loads exported kernels (kaiojit.aot) never needs it
    from llvmlite import binding as llvm

    from kaiojit.runtime.hostjit import _LOAD_LOCK, _engine_target_machine

    for name in python_symbols:  # the C API of this process, by address
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(text)
    module.triple = llvm.get_process_triple()
    module.verify()
    with _LOAD_LOCK:  # MCJIT's engine creation is not thread-safe
        engine = llvm.create_mcjit_compiler(module, _engine_target_machine())
        engine.finalize_object()
    return engine


class CompiledMethod:
    """One builtin's C function, compiled from ``text`` on first use (once per process) and
    kept with its engine: ``method()`` is its :class:`MethodDef` (``METH_FASTCALL``)."""

    def __init__(self, text: str, python_symbols: tuple[str, ...], name: str, doc: str):
        self._args = (text, python_symbols, name, doc)
        self._lock = threading.Lock()
        self._compiled: tuple[Any, MethodDef] | None = None

    def method(self) -> MethodDef:
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    text, symbols, name, doc = self._args
                    engine = compile_ir(text, symbols)  # owns the code
                    self._compiled = (engine, MethodDef(
                        name.encode(), engine.get_function_address(name), METH_FASTCALL,
                        doc.encode()))
        return self._compiled[1]


SELF_SYMBOLS = ("PyTuple_GetItem", "PyCapsule_GetPointer")
SELF_DECLARATIONS = """declare ptr @PyTuple_GetItem(ptr, i64)
declare ptr @PyCapsule_GetPointer(ptr, ptr)"""


def open_self(data: str, then: str) -> str:
    """IR for the start of a builtin's C function: the native data of its ``self`` (made by
    :func:`make_builtin`) into ``%<data>``, then a branch to ``%<then>``; where there is none
    (a Python error is set) a branch to ``%fail``, which the function defines to return
    NULL. Needs ``SELF_DECLARATIONS`` in the module."""
    return f"""  %capsule = call ptr @PyTuple_GetItem(ptr %self, i64 0)
  %no.capsule = icmp eq ptr %capsule, null
  br i1 %no.capsule, label %fail, label %open
open:
  %{data} = call ptr @PyCapsule_GetPointer(ptr %capsule, ptr null)
  %no.{data} = icmp eq ptr %{data}, null
  br i1 %no.{data}, label %fail, label %{then}"""


def make_builtin(method: MethodDef, data_address: int, *owners: Any) -> Any:
    """A builtin function of ``method`` whose ``self`` is ``(capsule of data_address,
    *owners)``."""
    capsule = _capsule_new(data_address, None, None)
    return _cfunction_new(ctypes.byref(method), (capsule, *owners), None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_cfunction_new = ctypes.pythonapi.PyCFunction_NewEx
_cfunction_new.restype = ctypes.py_object
_cfunction_new.argtypes = (ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)


__all__ = ["METH_FASTCALL", "METH_NOARGS", "SELF_DECLARATIONS", "SELF_SYMBOLS", "CompiledMethod",
           "MethodDef", "compile_ir", "make_builtin", "open_self"]
