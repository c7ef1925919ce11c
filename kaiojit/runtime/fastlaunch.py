"""The launch fast path: one generated Python function per (kernel, configuration, argument
kinds), used by ``kernel[grid, block](...)`` once a launch of that shape has succeeded.

A launch through :meth:`ModuleKernel.launch <kaiojit.runtime.launch.ModuleKernel.launch>`
types the arguments, looks up the configuration, and calls one writer per argument. Once that
has worked, the same launch is specialized: the generated function checks, argument by
argument, that each value is of the kind it saw, writes the slots inline and calls the
backend's launch entry with a prebuilt record (``cuLaunchKernelEx`` on cuda, see
:mod:`kaiojit.runtime.launchrecord` and :class:`~kaiojit.runtime.backend.FastLaunchBinding`).
Any check that fails hands the arguments to the launcher's general path, which types,
validates and reports errors as before. The function is bound to the thread that built it
and the device selected then, checked as one token (its slots are that thread's).

Per argument kind: a DeviceArray is checked by class and one interned launch tag (type with
alignment, device) and its parameter bytes are copied in one slice; a PyTorch tensor (or an
object the interop layer reads as one) by class, dtype, ``get_device()`` and
``is_contiguous()``, its pointer read with ``data_ptr()``; a CuPy array by class, dtype,
``_c_contiguous`` and ``data.device_id``; for both the pointer and row stride must keep the
alignment the kernel was specialized on. Scalars are checked by class.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

from kaiojit import types as kt
from kaiojit.runtime.backend import LaunchConfig, LoadedKernel
from kaiojit.runtime.interop import _cupy_info, _torch_info, array_extractor
from kaiojit.runtime.memory import DeviceArray
from kaiojit.runtime.slots import ArgSlots

_FLOAT_KINDS = {32: "f32", 64: "f64"}


class _Miss(Exception):
    """An argument of another kind than the fast form was built for (never escapes)."""


_MISS = _Miss()


def build(loaded: LoadedKernel, slots: ArgSlots, config: LaunchConfig, stream: int,
          args: tuple, device: int) -> Callable[..., Any] | None:
    """A fast launcher for this launch's shape, or None where only the general path applies.

    It is a method ``fast(launcher, *args)``: it launches, or hands ``args`` to
    ``launcher.general`` when any of them differs in kind from what it was built for.
    ``slots`` are the calling thread's slots of ``loaded``."""
    backend = loaded.backend
    if backend.debug_sync or config.cluster is not None:
        return None
    packer = loaded.packer
    fn = loaded.on_device(device).fn
    binding = backend.fast_launch_binding(fn, config.grid, config.block, config.shared_mem,
                                          stream, slots)
    if binding is None:
        return None
    env: dict[str, Any] = {
        "DA": DeviceArray, "MISS": _MISS, "Miss": _Miss, "tls": binding.thread_state,
        "TOKEN": binding.token, "DEV": device, "raw": slots.raw, "u64": slots.u64,
        "f32": slots.f32, "f64": slots.f64, "i64": slots.raw.cast("q"), "launch": binding.call,
        "REC": binding.record, "failed": binding.failed, "BINDING": binding,
        "RT": sys.modules[LoadedKernel.__module__], "BK": backend,
    }
    n = len(args)
    names = [f"a{i}" for i in range(n)]
    # a method: the launcher's class gets it as __call__, so a launch is this one frame
    lines = [
        "def fast(self, *args):",
        "    if tls.token is not TOKEN:  # another thread, or another device selected",
        "        return self.general(args)",
        "    try:",
    ]
    lines.append(f"        {', '.join(names)}{',' if n == 1 else ''} = args" if n else
                 "        if args: raise MISS")
    param = 0
    for i, (t, value) in enumerate(zip(packer.arg_types, args)):
        first = packer.layout.first_slot[param]
        param += len(kt.param_parts(t))
        code = _argument(f"a{i}", i, t, value, first, env)
        if code is None:
            return None
        lines.extend("        " + line for line in code)
    if not any(a.__class__ is DeviceArray for a in args):
        # a DeviceArray's launch tag names its backend; without one, check the active backend
        lines[1] = "    if tls.token is not TOKEN or RT._active is not BK:"
    lines += [
        "    except (Miss, TypeError, ValueError, OverflowError, AttributeError):",
        "        pass  # another kind, or a value the fast form cannot write",
        "    else:",
        "        rc = launch(REC)",
        "        if rc:",
        "            failed(rc)",
        "        return",
        "    return self.general(args)  # outside the handler: its errors chain to nothing",
    ]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<kaiojit fast launch of {loaded.name}>", "exec"), env,
         namespace)
    return namespace["fast"]


def _argument(v: str, i: int, t: kt.Type, value: Any, first: int, env: dict) -> list | None:
    """Guard and slot writes for one argument, or None when it has no fast form."""
    if isinstance(t, kt.ArrayType):
        return _array(v, i, t, value, first, env)
    if isinstance(t, kt.ScalarType):
        return _scalar(v, i, t, value, first, env)
    return None  # tensor maps: 128 bytes through the general path


def _array(v: str, i: int, t: kt.ArrayType, value: Any, first: int, env: dict) -> list | None:
    cls = value.__class__
    if cls is DeviceArray:
        if value.kaiojit_type != t or value.device_id != env["DEV"]:
            return None  # an eager signature that converts: the general path's work
        env[f"G{i}"] = value.launch_tag
        words = len(value.launch_bytes) // 8
        return [f"if {v}.__class__ is not DA or {v}.launch_tag is not G{i}: raise MISS",
                f"raw[{8 * first}:{8 * (first + words)}] = {v}.launch_bytes"]
    if t.layout != "C" or t.passes_strides:
        return None
    extractor = array_extractor(cls)
    if extractor is _torch_info:
        return _torch(v, i, t, value, first, env)
    if extractor is _cupy_info:
        return _cupy(v, i, t, value, first, env)
    return None


def _shape_and_alignment(v: str, i: int, t: kt.ArrayType, first: int, ptr: str) -> list:
    """Unpacking the shape (a wrong rank raises ValueError: the general path) and the check
    that the array's alignment is the one the kernel was specialized on."""
    dims = [f"{v}_n{d}" for d in range(t.ndim)]
    code = [f"{', '.join(dims)}{',' if t.ndim == 1 else ''} = {v}.shape"]
    row = f" | {dims[-1]} * {t.dtype.itemsize}" if t.ndim > 1 else ""
    aligned = f"({ptr}{row}) & {kt.ALIGN_BYTES - 1}"
    code.append(f"if {aligned}: raise MISS" if t.align else f"if not {aligned}: raise MISS")
    code.append(f"u64[{first}] = {ptr}")
    code += [f"u64[{first + 1 + d}] = {dims[d]}" for d in range(t.ndim)]
    return code


def _torch(v: str, i: int, t: kt.ArrayType, value: Any, first: int, env: dict) -> list:
    """A PyTorch tensor (or an object of the same interface): class, dtype, device and
    contiguity checked, the pointer read with ``data_ptr()``."""
    env[f"C{i}"] = value.__class__
    env[f"DT{i}"] = value.dtype
    return [(f"if ({v}.__class__ is not C{i} or {v}.dtype is not DT{i} or "
             f"{v}.get_device() != DEV or not {v}.is_contiguous()): raise MISS"),
            f"{v}_p = {v}.data_ptr()",
            *_shape_and_alignment(v, i, t, first, f"{v}_p")]


def _cupy(v: str, i: int, t: kt.ArrayType, value: Any, first: int, env: dict) -> list | None:
    """A CuPy array: class, dtype, device and C-contiguity checked, the pointer read from
    ``a.data.ptr``."""
    if not hasattr(value, "_c_contiguous"):
        return None
    env[f"C{i}"] = value.__class__
    env[f"DT{i}"] = value.dtype
    return [(f"if {v}.__class__ is not C{i} or {v}.dtype != DT{i} or not {v}._c_contiguous:"
             " raise MISS"),
            f"{v}_m = {v}.data",
            f"if {v}_m.device_id != DEV: raise MISS",
            *_shape_and_alignment(v, i, t, first, f"{v}_m.ptr")]


def _scalar(v: str, i: int, t: kt.ScalarType, value: Any, first: int, env: dict) -> list | None:
    cls = value.__class__
    if cls not in (int, float, bool) and cls.__module__ != "numpy":
        return None
    env[f"C{i}"] = cls
    guard = [f"if {v}.__class__ is not C{i}: raise MISS"]
    if t.is_float:
        kind = _FLOAT_KINDS.get(t.bits)
        if kind is None:
            return None  # float16: packed through struct by the general path
        index = 2 * first if kind == "f32" else first
        if t.bits == 32 and cls is float and not _fits_f32(value):
            return None  # an overflow to inf is the general path's to handle
        return guard + [f"{kind}[{index}] = {v}"]
    if t.is_bool:
        return guard + [f"u64[{first}] = 1 if {v} else 0"]
    if cls is float:
        return None  # a float where an integer is declared: the general path reports it
    # little-endian: the low bytes of the signed 64-bit slot are the parameter's bytes, so a
    # value of the parameter's range (or one that wraps into it) needs no mask
    return guard + [f"i64[{first}] = {v}"]


def _fits_f32(value: float) -> bool:
    return abs(value) < 3.4e38 or math.isnan(value)
