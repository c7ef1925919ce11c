"""The driver call of a fast launch: one prebuilt record per launcher, one foreign call.

A generated fast launch (:mod:`kaiojit.runtime.native.fastlaunch`) ends in the driver call. Every
argument of that call except the parameter bytes is fixed once the launcher exists: the
``CUfunction``, the grid, block, dynamic shared memory, stream, and the address of the
launcher's ``void*[]``. So they are written once into a :class:`LaunchRecord` (a
``CUlaunchConfig`` followed by the entry point, the function and the parameter array), and a
launch calls ``record.entry(&record.config, record.function, record.params, NULL)``, which is
``cuLaunchKernelEx`` on the cuda backend.

Two trampolines make that call, compiled once per process for the host through llvmlite
(MCJIT):

- the *native* one is the C function of a builtin Python function
  (:mod:`kaiojit.runtime.native.cbuiltins`, ``METH_NOARGS``) made per launcher, whose ``self`` holds
  the record; calling it is a builtin call with no argument conversion (~40 ns instead of
  ctypes' ~300 ns). It releases the GIL
  around the driver call (``PyEval_SaveThread``/``PyEval_RestoreThread``), as ctypes does, so
  a launch that blocks on a full queue never holds up a host callback that needs the GIL. It
  returns the status as a Python int. It uses only functions of the stable ABI
  (``PyTuple_GetItem``, ``PyCapsule_GetPointer``, ``PyLong_FromLong``), so it is the same on
  Python 3.11 and 3.12;
- the *ex* one is a plain C function ``int trampoline(record*)`` called through ctypes (one
  argument converted).

``KAIOJIT_LAUNCH`` picks the form (read once, when the cuda backend is made):

- ``native`` (the default): ``cuLaunchKernelEx`` through the builtin-function trampoline;
- ``ex``: ``cuLaunchKernelEx`` through the ctypes trampoline;
- ``ctypes``: ``cuLaunchKernel`` through ctypes with eleven prebuilt arguments;
- ``bindings``: ``cuda.bindings``' own ``cuLaunchKernel``, and no fast form at all.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from kaiojit import env
from kaiojit.runtime.native import cbuiltins, guard
from kaiojit.runtime.native.irstruct import expand

LAUNCH_MODES = env.LAUNCH_MODES
DEFAULT_LAUNCH_MODE = "native"


def launch_mode(value: str | None) -> str:
    """The launch form ``KAIOJIT_LAUNCH=value`` asks for (``ValueError`` naming the choices)."""
    mode = (value or "").strip().lower() or DEFAULT_LAUNCH_MODE
    if mode not in LAUNCH_MODES:
        raise ValueError(f"KAIOJIT_LAUNCH={value!r}: use one of {', '.join(LAUNCH_MODES)}")
    return mode


class LaunchConfigStruct(ctypes.Structure):
    """``CUlaunchConfig`` of the CUDA driver API (cuda.h, CUDA 12 and 13)."""

    _fields_ = [
        ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("numAttrs", ctypes.c_uint),
    ]


class LaunchRecord(ctypes.Structure):
    """What the trampoline reads: the config first (its address is the record's), then the
    entry point ``int entry(const CUlaunchConfig*, CUfunction, void**, void**)``, the
    function and the parameter array."""

    _fields_ = [
        ("config", LaunchConfigStruct),
        ("entry", ctypes.c_void_p),
        ("function", ctypes.c_void_p),
        ("params", ctypes.c_void_p),
    ]

    @property
    def grid(self) -> tuple[int, int, int]:
        c = self.config
        return c.gridDimX, c.gridDimY, c.gridDimZ

    @property
    def block(self) -> tuple[int, int, int]:
        c = self.config
        return c.blockDimX, c.blockDimY, c.blockDimZ


def make_record(entry: int, function: int, grid: tuple[int, int, int],
                block: tuple[int, int, int], shared_mem: int, stream: int,
                params: int) -> tuple[LaunchRecord, ctypes.c_void_p]:
    """A filled record and the prebuilt pointer a launch passes (keep both alive)."""
    record = LaunchRecord()
    c = record.config
    c.gridDimX, c.gridDimY, c.gridDimZ = grid
    c.blockDimX, c.blockDimY, c.blockDimZ = block
    c.sharedMemBytes = shared_mem
    c.hStream = stream or None
    c.attrs = None
    c.numAttrs = 0
    record.entry = entry
    record.function = function
    record.params = params
    return record, ctypes.c_void_p(ctypes.addressof(record))


# --- the trampoline, compiled once per process ---------------------------------------------------

_TRAMPOLINE_IR = """
$(types)

define i32 @kaiojit_launch_record(ptr %record) {
  %entry.at = getelementptr inbounds %LaunchRecord, ptr %record,
              i32 0, i32 $(LaunchRecord.entry)
  %entry = load ptr, ptr %entry.at, align 8
  %function.at = getelementptr inbounds %LaunchRecord, ptr %record,
                 i32 0, i32 $(LaunchRecord.function)
  %function = load ptr, ptr %function.at, align 8
  %params.at = getelementptr inbounds %LaunchRecord, ptr %record,
               i32 0, i32 $(LaunchRecord.params)
  %params = load ptr, ptr %params.at, align 8
  %rc = call i32 %entry(ptr %record, ptr %function, ptr %params, ptr null)
  ret i32 %rc
}

define i32 @kaiojit_launch_stub(ptr %config, ptr %function, ptr %params, ptr %extra) {
  ret i32 0
}

; the C function of a METH_NOARGS builtin: self is (capsule of the record, owners...)
SELF_DECLARATIONS
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
declare ptr @PyLong_FromLong(i64)

define ptr @kaiojit_launch_native(ptr %self, ptr %unused) {
OPEN_SELF
launch:
  %status = call i32 @kaiojit_launch_record_nogil(ptr %record)
  %wide = sext i32 %status to i64
  %result = call ptr @PyLong_FromLong(i64 %wide)
  ret ptr %result
fail:
  ret ptr null
}

define i32 @kaiojit_launch_record_nogil(ptr %record) {
  %state = call ptr @PyEval_SaveThread()
  %status = call i32 @kaiojit_launch_record(ptr %record)
  call void @PyEval_RestoreThread(ptr %state)
  ret i32 %status
}
"""

_lock = threading.Lock()
_compiled: dict[str, Any] = {}
LAUNCH_CALL = ctypes.CFUNCTYPE(ctypes.c_int)  # no argtypes: the record goes as a c_void_p
_PYTHON_SYMBOLS = (*cbuiltins.SELF_SYMBOLS, "PyEval_SaveThread", "PyEval_RestoreThread",
                   "PyLong_FromLong")


def _compile() -> dict[str, Any]:
    with _lock:
        if _compiled:
            return _compiled
        text = expand(_TRAMPOLINE_IR, (LaunchRecord,)).replace(
            "SELF_DECLARATIONS", cbuiltins.SELF_DECLARATIONS).replace(
            "OPEN_SELF", cbuiltins.open_self("record", "launch"))
        engine = cbuiltins.compile_ir(text, _PYTHON_SYMBOLS)
        _compiled["engine"] = engine  # owns the code
        _compiled["trampoline"] = LAUNCH_CALL(
            engine.get_function_address("kaiojit_launch_record"))
        _compiled["stub"] = engine.get_function_address("kaiojit_launch_stub")
        # one definition for the process: the builtins point to it
        _compiled["method"] = cbuiltins.MethodDef(
            b"kaiojit_launch", engine.get_function_address("kaiojit_launch_native"),
            cbuiltins.METH_NOARGS, b"Launch the kernel of a prebuilt record.")
        return _compiled


def trampoline() -> Any:
    """``trampoline(record_pointer) -> status``: calls the record's entry point."""
    return (_compiled or _compile())["trampoline"]


def stub_entry() -> int:
    """The address of a no-op entry point that returns 0 (a stand-in for the driver when
    timing the Python side of a launch without a GPU)."""
    return (_compiled or _compile())["stub"]


def uses_builtin(mode: str) -> bool:
    """Whether launches of form ``mode`` go through the builtin trampoline: ``native``, where
    the native helpers may be used (:func:`kaiojit.runtime.native.available`); otherwise
    they take the ctypes trampoline of ``ex``."""
    return mode == "native" and guard.available()


def native_launcher(record: LaunchRecord, *owners: Any) -> Any:
    """A builtin function ``launch() -> status`` that calls ``record``'s entry point with the
    GIL released. It keeps ``record`` and ``owners`` (what the record points into) alive."""
    method = (_compiled or _compile())["method"]
    return cbuiltins.make_builtin(method, ctypes.addressof(record), record, *owners)


__all__ = ["DEFAULT_LAUNCH_MODE", "LAUNCH_MODES", "LaunchConfigStruct", "LaunchRecord",
           "launch_mode", "make_record", "native_launcher", "stub_entry", "trampoline",
           "uses_builtin"]
