"""The launch fast path: one generated Python function per (kernel, configuration, argument
kinds), used by ``kernel[grid, block](...)`` once a launch of that shape has succeeded.

A launch through :meth:`ModuleKernel.launch <kaiojit.runtime.launch.ModuleKernel.launch>`
types the arguments, looks up the configuration, and calls one writer per argument. Once that
has worked, the same launch is specialized: the generated function checks, argument by
argument, that each value is of the kind it saw (class, kaiojit type, device), writes the slots
inline and calls the backend's launch entry (``cuLaunchKernel`` on cuda, see
:class:`~kaiojit.runtime.backend.FastLaunchBinding`) with the configuration already bound. Any
check that fails hands the arguments to the launcher's general path, which types, validates
and reports errors as before. The function is bound to the thread that built it (its slots
are that thread's).
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable
from typing import Any

from kaiojit import types as kt
from kaiojit.runtime.backend import LaunchConfig, LoadedKernel
from kaiojit.runtime.memory import DeviceArray
from kaiojit.runtime.slots import ArgSlots

_FLOAT_KINDS = {32: "f32", 64: "f64"}


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
        "DA": DeviceArray, "get_ident": threading.get_ident, "OWNER": threading.get_ident(),
        "tls": binding.thread_state, "DEV": device, "u64": slots.u64, "f32": slots.f32,
        "f64": slots.f64, "i64": slots.raw.cast("q"), "launch": binding.call,
        "FN": binding.function, "STREAM": binding.stream, "PARAMS": binding.params,
        "failed": binding.failed, "RT": sys.modules[LoadedKernel.__module__], "BK": backend,
    }
    n = len(args)
    names = [f"a{i}" for i in range(n)]
    # a method: the launcher's class gets it as __call__, so a launch is this one frame
    lines = [
        "def fast(self, *args):",
        # another thread, device or active backend (arrays of every backend say device 0)
        (f"    if get_ident() != OWNER or RT._active is not BK or tls.device != DEV or "
         f"len(args) != {n}:"),
        "        return self.general(args)",
        "    try:",
    ]
    if n:
        lines.append(f"        {', '.join(names)}{',' if n == 1 else ''} = args")
    param = 0
    for i, (t, value) in enumerate(zip(packer.arg_types, args)):
        first = packer.layout.first_slot[param]
        param += len(kt.param_parts(t))
        code = _argument(f"a{i}", i, t, value, first, env)
        if code is None:
            return None
        lines.extend("        " + line.replace("return False", "return self.general(args)")
                     for line in code)
    (gx, gy, gz), (bx, by, bz) = config.grid, config.block
    lines += [
        "    except (TypeError, ValueError, OverflowError):",
        "        return self.general(args)  # a value the fast form cannot write",
        f"    rc = launch(FN, {gx}, {gy}, {gz}, {bx}, {by}, {bz}, {config.shared_mem}, STREAM,",
        "                PARAMS, None)",
        "    if rc:",
        "        failed(rc)",
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
        env[f"T{i}"] = value.kaiojit_type
        code = [(f"if {v}.__class__ is not DA or {v}.kaiojit_type is not T{i} or "
                 f"{v}.device_id != DEV:"),
                "    return False",
                f"u64[{first}] = {v}.ptr"]
        shape = f"{v}.shape"
        strides = f"{v}.strides"
    elif _is_torch_tensor(value) and value.is_contiguous() and t.layout == "C":
        env[f"C{i}"] = cls
        env[f"DT{i}"] = value.dtype
        code = [(f"if ({v}.__class__ is not C{i} or {v}.dtype is not DT{i} or "
                 f"{v}.dim() != {t.ndim} or not {v}.is_contiguous() or "
                 f"{v}.get_device() != DEV):"),
                "    return False",
                f"u64[{first}] = {v}.data_ptr()"]
        shape = f"{v}.shape"
        strides = None
    else:
        return None
    code.append(f"s = {shape}")
    code += [f"u64[{first + 1 + d}] = s[{d}]" for d in range(t.ndim)]
    if t.passes_strides:
        if strides is None:
            return None
        code.append(f"s = {strides}")
        code += [f"u64[{first + 1 + t.ndim + d}] = s[{d}] & 0xFFFFFFFFFFFFFFFF"
                 for d in range(t.ndim)]
    return code


def _scalar(v: str, i: int, t: kt.ScalarType, value: Any, first: int, env: dict) -> list | None:
    cls = value.__class__
    if cls not in (int, float, bool) and cls.__module__ != "numpy":
        return None
    env[f"C{i}"] = cls
    guard = [f"if {v}.__class__ is not C{i}:", "    return False"]
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


def _is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and value.__class__ is torch.Tensor
