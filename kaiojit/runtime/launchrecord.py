"""The driver call of a fast launch: one prebuilt record per launcher, one foreign call.

A generated fast launch (:mod:`kaiojit.runtime.fastlaunch`) ends in the driver call. Every
argument of that call except the parameter bytes is fixed once the launcher exists: the
``CUfunction``, the grid, block, dynamic shared memory, stream, and the address of the
thread's ``void*[]``. So they are written once into a :class:`LaunchRecord` (a
``CUlaunchConfig`` followed by the entry point, the function and the parameter array), and a
launch is ``trampoline(record)``: one ctypes call with one prebuilt pointer argument. The
trampoline is a few instructions compiled once per process for the host through llvmlite
(MCJIT); it calls ``record.entry(&record.config, record.function, record.params, NULL)``,
which is ``cuLaunchKernelEx`` on the cuda backend. A ctypes call costs ~40 ns per argument it
converts; this call converts one instead of eleven (``cuLaunchKernel``), and releases the GIL
around the driver like any ctypes call.

``KAIOJIT_LAUNCH`` picks the form (read once, by the cuda backend): ``ex`` (the default, the
record above), ``ctypes`` (``cuLaunchKernel`` through ctypes with eleven prebuilt arguments)
or ``bindings`` (``cuda.bindings``' own ``cuLaunchKernel``, no fast form).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

LAUNCH_MODES = ("ex", "ctypes", "bindings")


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
define i32 @kaiojit_launch_record(ptr %record) {
  %entry.at = getelementptr inbounds i8, ptr %record, i64 ENTRY_OFFSET
  %entry = load ptr, ptr %entry.at, align 8
  %function.at = getelementptr inbounds i8, ptr %record, i64 FUNCTION_OFFSET
  %function = load ptr, ptr %function.at, align 8
  %params.at = getelementptr inbounds i8, ptr %record, i64 PARAMS_OFFSET
  %params = load ptr, ptr %params.at, align 8
  %rc = call i32 %entry(ptr %record, ptr %function, ptr %params, ptr null)
  ret i32 %rc
}

define i32 @kaiojit_launch_stub(ptr %config, ptr %function, ptr %params, ptr %extra) {
  ret i32 0
}
"""

_lock = threading.Lock()
_compiled: dict[str, Any] = {}
LAUNCH_CALL = ctypes.CFUNCTYPE(ctypes.c_int)  # no argtypes: the record goes as a c_void_p


def _compile() -> dict[str, Any]:
    with _lock:
        if _compiled:
            return _compiled
        from llvmlite import binding as llvm

        from kaiojit.runtime.hostjit import _LOAD_LOCK, _engine_target_machine

        text = (_TRAMPOLINE_IR.replace("ENTRY_OFFSET", str(LaunchRecord.entry.offset))
                .replace("FUNCTION_OFFSET", str(LaunchRecord.function.offset))
                .replace("PARAMS_OFFSET", str(LaunchRecord.params.offset)))
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = llvm.parse_assembly(text)
        module.triple = llvm.get_process_triple()
        module.verify()
        with _LOAD_LOCK:  # MCJIT's engine creation is not thread-safe
            engine = llvm.create_mcjit_compiler(module, _engine_target_machine())
            engine.finalize_object()
        _compiled["engine"] = engine  # owns the code
        _compiled["trampoline"] = LAUNCH_CALL(
            engine.get_function_address("kaiojit_launch_record"))
        _compiled["stub"] = engine.get_function_address("kaiojit_launch_stub")
        return _compiled


def trampoline() -> Any:
    """``trampoline(record_pointer) -> status``: calls the record's entry point."""
    return (_compiled or _compile())["trampoline"]


def stub_entry() -> int:
    """The address of a no-op entry point that returns 0 (a stand-in for the driver when
    timing the Python side of a launch without a GPU)."""
    return (_compiled or _compile())["stub"]


__all__ = ["LAUNCH_MODES", "LaunchConfigStruct", "LaunchRecord", "make_record", "stub_entry",
           "trampoline"]
