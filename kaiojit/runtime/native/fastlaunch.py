"""The launch fast path: one generated Python function per (kernel, configuration, argument
kinds), used by ``kernel[grid, block](...)`` once a launch of that shape has succeeded.

A launch through :meth:`ModuleKernel.launch <kaiojit.runtime.launch.ModuleKernel.launch>`
types the arguments, looks up the configuration, and calls one writer per argument. Once that
has worked, the same launch is specialized into a plain function ``fast(*args)``:

- one ``if``: a chain of identity and value tests, the thread's device-selection token first
  (same thread, same selected device), then per argument a DeviceArray's interned launch tag
  (type with alignment, device, backend), a foreign array's class, dtype, device, contiguity,
  rank and alignment, a scalar's class, a constexpr's value;
- one ``struct.Struct.pack_into`` writing every parameter into the fast form's own parameter
  buffer (a DeviceArray's pointer and shape as its ready-made ``launch_bytes``);
- where arrays' classes publish DLPack's C exchange API (``torch.Tensor``), one native call
  that reads, tests and writes all of them (:mod:`kaiojit.runtime.native.dlpack_exchange`) in place
  of their attribute reads;
- one call of the backend's launch entry with a prebuilt record (a builtin function around
  ``cuLaunchKernelEx`` on cuda, see :mod:`kaiojit.runtime.native.launchrecord` and
  :class:`~kaiojit.runtime.backend.FastLaunchBinding`).

Anything else (another kind, another thread or device, a value the format cannot pack, such
as a float32 beyond its range) goes to the plan's ``fallback``, which launches through the
general path: it types, validates and reports errors as before.

A :class:`FastPlan` says how the call a fast form takes maps to the kernel's parameters, so the
same generator serves a plain kernel, a kernel with ``kj.constexpr`` parameters (their values
are tested, not passed) and ``kj.autotune``'s chosen configuration (the config's constants
are written as constants, not passed).
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaiojit import types as kt
from kaiojit.runtime.backend import LaunchConfig, LoadedKernel
from kaiojit.runtime.dlpack import K_DL_CPU, K_DL_CUDA
from kaiojit.runtime.interop import _cupy_info, _torch_info, array_extractor
from kaiojit.runtime.memory import DeviceArray
from kaiojit.runtime.native import dlpack_exchange, getset_reader
from kaiojit.runtime.slots import ArgSlots

# what a guard or the packing raises for a value of another kind: the general path's to handle
GUARD_ERRORS = (AttributeError, TypeError, ValueError, OverflowError, struct.error)



@dataclass(frozen=True)
class FastPlan:
    """How a fast form's call maps to the kernel's Python parameters.

    ``values``: this launch's value of every parameter of the Python function, in order.
    ``bind[j]``: the index of the call argument that gives parameter ``j``, or None where the
    plan fixes it (``values[j]`` every launch). ``folded``: the parameters folded into the
    kernel (``kj.constexpr``); a bound one is tested against its value. ``ncall``: how many
    arguments the call takes. ``fallback(args, fast)``: what a call that does not match
    returns (``fast`` is the fast form that missed)."""

    values: tuple
    bind: tuple
    folded: frozenset
    ncall: int
    fallback: Callable[[tuple, Any], Any]

    @classmethod
    def direct(cls, args: tuple, folded: tuple, fallback: Callable[[tuple, Any], Any]
               ) -> FastPlan:
        """The call's arguments are the Python function's, in order."""
        return cls(tuple(args), tuple(range(len(args))), frozenset(folded), len(args), fallback)


class _Code:
    """The generated function's pieces: the guard terms, the packing format and values."""

    def __init__(self, env: dict):
        self.env = env
        self.guards: list[str] = []
        self.fmt: list[str] = []
        self.values: list[str] = []
        self.has_device_array = False
        # arrays read natively through their DLPack exchange API, after the packing
        self.reads: list[tuple[str, dlpack_exchange.ArrayRead]] = []
        self.host_reads = True  # whether every such array was host memory (a CPU tensor)
        # arrays read natively through their classes' C getters (CuPy), after the packing
        self.getset_reads: list[tuple[str, getset_reader.ArrayRead]] = []

    def const(self, name: str, value: Any) -> str:
        self.env[name] = value
        return name

    def native_slot(self, ndim: int) -> int:
        """Pad bytes in the packing for an array a native reader writes (its pointer and
        ``ndim`` extents): their byte offset in the buffer."""
        offset = struct.calcsize("<" + "".join(self.fmt))
        self.fmt.append(f"{8 * (1 + ndim)}x")
        return offset


def build(loaded: LoadedKernel, config: LaunchConfig, stream: int, device: int,
          plan: FastPlan, stream_now: Callable[[int], int] | None = None
          ) -> Callable[..., Any] | None:
    """A fast launcher ``fast(*args)`` for this launch's shape, or None where only the
    general path applies. With ``stream_now`` (a launch that follows PyTorch's current
    stream) it tests that ``stream_now(device)`` is still ``stream``."""
    backend = loaded.backend
    if backend.debug_sync or config.cluster is not None or loaded.raises_at_launch:
        return None
    packer = loaded.packer
    slots = ArgSlots(packer.layout)  # the fast form's own parameter buffer
    fn, grid, extent = loaded.entry(loaded.on_device(device), config)
    if extent is not None:  # a coarse entry's grid extent: written once, after the packing's
        slots.u64[packer.trailing_slot] = extent
    binding = backend.fast_launch_binding(fn, grid, config.block, config.shared_mem, stream,
                                          slots)
    if binding is None:
        return None
    env: dict[str, Any] = {
        "__builtins__": __builtins__, "TLS": binding.thread_state, "TOKEN": binding.token,
        "DEV": device, "LAUNCH": binding.call, "REC": binding.record, "FAILED": binding.failed,
        "FALLBACK": plan.fallback, "GUARD_ERRORS": GUARD_ERRORS, "BINDING": binding,
        "RT": sys.modules[LoadedKernel.__module__], "BK": backend, "SLOTS": slots,
    }
    code = _Code(env)
    if stream_now is not None:
        env["STREAM_NOW"], env["STREAM"] = stream_now, stream
        code.guards.append("STREAM_NOW(DEV) == STREAM")
    param = 0
    for j, value in enumerate(plan.values):
        i = plan.bind[j]
        v = f"a{i}" if i is not None else f"K{j}"
        if j in plan.folded:
            if i is not None and not _constexpr(code, v, i, value):
                return None
            continue
        if param >= len(packer.arg_types):
            return None
        t = packer.arg_types[param]
        param += 1
        if i is None:
            env[v] = value
        if not _argument(code, v, i, t, value, device):
            return None
    if param != len(packer.arg_types):
        return None
    return _generate(loaded.name, code, plan.ncall, binding.record is not None)


def _generate(name: str, code: _Code, ncall: int, with_record: bool) -> Callable[..., Any]:
    guards = ["TLS.token is TOKEN"]
    if not code.has_device_array:
        # a DeviceArray's launch tag names its backend; without one, test the active backend
        guards.append("RT._active is BK")
    guards += code.guards
    names = [f"a{i}" for i in range(ncall)]
    if ncall == 0:
        unpack = "if args: raise ValueError"
    else:
        unpack = f"{', '.join(names)}{',' if ncall == 1 else ''} = args"
    condition = ("\n            and ").join(guards)
    lines = [
        "def fast(*args):",
        "    try:",
        f"        {unpack}",
        f"        if ({condition}):",
    ]
    if code.values:
        code.env["PACK"] = struct.Struct("<" + "".join(code.fmt)).pack_into
        code.env["BUF"] = code.env["SLOTS"].raw
        lines.append(f"            PACK(BUF, 0, {', '.join(code.values)})")
    indent = " " * 12
    reads = []  # after the packing, whose pad bytes cover these arrays' slots
    slots = code.env["SLOTS"]
    if code.reads:
        # CUDA tensors; CPU tensors where they were the launch's and the backend's memory is
        # host memory (the mock backend), which the general path also takes
        host = code.host_reads and code.env["BK"].dlpack_device_type() == K_DL_CPU
        code.env["READ"] = dlpack_exchange.reader(
            [r for _, r in code.reads], slots.address, code.env["DEV"], slots,
            device_type=K_DL_CPU if host else K_DL_CUDA)
        reads.append(f"READ({', '.join(v for v, _ in code.reads)})")
    if code.getset_reads:
        code.env["READ_GETSET"] = getset_reader.reader(
            [r for _, r in code.getset_reads], slots.address, code.env["DEV"], slots)
        reads.append(f"READ_GETSET({', '.join(v for v, _ in code.getset_reads)})")
    if reads:
        lines.append(f"{indent}if {' and '.join(reads)}:")
        indent += "    "
    lines += [
        f"{indent}rc = LAUNCH({'REC' if with_record else ''})",
        f"{indent}if rc:",
        f"{indent}    FAILED(rc)",
        f"{indent}return",
        "    except GUARD_ERRORS:",
        "        pass  # another kind, or a value the format cannot pack",
        "    return FALLBACK(args, fast)",
    ]
    text = "\n".join(lines)
    code.env["__source__"] = text
    exec(compile(text, f"<kaiojit fast launch of {name}>", "exec"), code.env)
    fast = code.env["fast"]
    fast.__qualname__ = fast.__name__ = f"{name}_fast_launch"
    return fast


def source_of(fast: Callable[..., Any]) -> str:
    """The generated text of a fast form (for tests and inspection)."""
    return fast.__globals__.get("__source__", "")


def _constexpr(code: _Code, v: str, i: int, value: Any) -> bool:
    """The test that a constexpr argument has the value the kernel was compiled for: its class
    and its value (specializations differ by both, as their printed forms do)."""
    cls = value.__class__
    if cls in (int, bool):
        code.guards.append(f"{v}.__class__ is {code.const(f'C{i}', cls)} "
                           f"and {v} == {code.const(f'V{i}', value)}")
    elif cls is float:
        if value == 0.0 or math.isnan(value):  # -0.0 and 0.0, NaN: by their printed form
            code.guards.append(f"{v}.__class__ is float "
                               f"and repr({v}) == {code.const(f'V{i}', repr(value))}")
        else:
            code.guards.append(f"{v}.__class__ is float and {v} == {code.const(f'V{i}', value)}")
    else:
        code.guards.append(f"{v} is {code.const(f'V{i}', value)}")
    return True


def _argument(code: _Code, v: str, i: int | None, t: kt.Type, value: Any, device: int) -> bool:
    """Guards and packing of one parameter; False when it has no fast form."""
    if isinstance(t, kt.ArrayType):
        return _array(code, v, i, t, value, device)
    if isinstance(t, kt.ScalarType):
        return _scalar(code, v, i, t, value)
    return False  # tensor maps: 128 bytes through the general path


def _array(code: _Code, v: str, i: int | None, t: kt.ArrayType, value: Any,
           device: int) -> bool:
    cls = value.__class__
    if cls is DeviceArray:
        if value.kaiojit_type != t or value.device_id != device:
            return False  # an eager signature that converts: the general path's work
        if i is not None:
            tag = code.const(f"G{i}", value.launch_tag)
            code.guards.append(f"{v}.launch_tag is {tag}")
            code.has_device_array = True
            code.values.append(f"{v}.launch_bytes")
        else:
            code.values.append(code.const(f"B{v}", value.launch_bytes))
        code.fmt.append(f"{len(value.launch_bytes)}s")
        return True
    if i is None or t.layout != "C" or t.passes_strides:
        return False
    extractor = array_extractor(cls)
    if extractor is _torch_info and t.dtype.is_complex:
        # a lazy conjugate view reads as its base: the general path refuses it
        code.guards.append(f"not {v}.is_conj()")
    if extractor is not None and dlpack_exchange.export_function(cls) is not None:
        _exchange(code, v, t, cls)
        code.host_reads &= getattr(value, "is_cpu", False) is True
        return True
    if extractor is _torch_info:
        _torch(code, v, i, t, value)
        return True
    if extractor is _cupy_info and hasattr(value, "_c_contiguous"):
        _cupy(code, v, i, t, value)
        return True
    return False


def _shape_and_alignment(code: _Code, v: str, t: kt.ArrayType, ptr: str,
                         vector_size: bool = False) -> None:
    """The rank test, the test that the array's alignment is the one the kernel was
    specialized on, and the packing of the pointer and the shape. With ``vector_size`` a
    one-dimensional array's rank and length are read from ``ndim`` and ``size`` (CuPy's
    ``shape`` builds a tuple each time; those two read the array's fields)."""
    if vector_size and t.ndim == 1:
        code.guards.append(f"{v}.ndim == 1")
        extents = [f"{v}.size"]
    else:
        code.guards.append(f"len({v}_s := {v}.shape) == {t.ndim}")
        extents = [f"{v}_s[{d}]" for d in range(t.ndim)]
    row = f" | {v}_s[-1] * {t.dtype.itemsize}" if t.ndim > 1 else ""
    misaligned = f"(({ptr}){row}) & {kt.ALIGN_BYTES - 1}"
    code.guards.append(f"not {misaligned}" if t.align else misaligned)
    code.fmt.append("Q" + "q" * t.ndim)
    code.values.append(f"{v}_p")
    code.values += extents


def _exchange(code: _Code, v: str, t: kt.ArrayType, cls: type) -> None:
    """An array whose class publishes DLPack's C exchange API (``torch.Tensor`` in PyTorch
    2.11): one native call after the packing reads every such array of the launch, tests it
    and writes its slots (:mod:`kaiojit.runtime.native.dlpack_exchange`); the packing leaves pad
    bytes there."""
    offset = code.native_slot(t.ndim)
    code.reads.append((v, dlpack_exchange.ArrayRead(cls, t.ndim, t.dtype, bool(t.align), offset)))


def _torch(code: _Code, v: str, i: int, t: kt.ArrayType, value: Any) -> None:
    """A PyTorch tensor (or an object of the same interface) of a class without the exchange
    API: class, dtype, device and contiguity tested, the pointer read with ``data_ptr()``."""
    code.guards += [f"{v}.__class__ is {code.const(f'C{i}', value.__class__)}",
                    f"{v}.dtype is {code.const(f'DT{i}', value.dtype)}",
                    f"{v}.get_device() == DEV", f"{v}.is_contiguous()"]
    _shape_and_alignment(code, v, t, f"{v}_p := {v}.data_ptr()")


def _cupy(code: _Code, v: str, i: int, t: kt.ArrayType, value: Any) -> None:
    """A CuPy array: where its class's attributes are C getters (CuPy's Cython class), one
    native call after the packing reads it with the launch's other such arrays
    (:mod:`kaiojit.runtime.native.getset_reader`); otherwise class, dtype, C-contiguity and device
    tested, the pointer read from ``a.data.ptr``."""
    memory_cls = value.data.__class__
    if getset_reader.readable(value.__class__, memory_cls):
        offset = code.native_slot(t.ndim)
        code.getset_reads.append((v, getset_reader.ArrayRead(
            value.__class__, memory_cls, value.dtype, t.ndim, t.dtype, bool(t.align), offset)))
        return
    code.guards += [f"{v}.__class__ is {code.const(f'C{i}', value.__class__)}",
                    f"{v}.dtype is {code.const(f'DT{i}', value.dtype)}",
                    f"{v}._c_contiguous", f"({v}_m := {v}.data).device_id == DEV"]
    _shape_and_alignment(code, v, t, f"{v}_p := {v}_m.ptr", vector_size=True)


def _scalar(code: _Code, v: str, i: int | None, t: kt.ScalarType, value: Any) -> bool:
    """A scalar packed as its type says (``ScalarFacts.slot_format``; through the type's
    ``encode`` for the floats ``struct`` has no format for: bfloat16, fp8)."""
    cls = value.__class__
    if cls not in (int, float, bool, complex) and cls.__module__ not in ("numpy", "ml_dtypes"):
        return False
    if i is not None:
        code.guards.append(f"{v}.__class__ is {code.const(f'C{i}', cls)}")
    if t.is_complex:
        code.fmt.append(t.component.slot_format * 2)
        code.values += [f"{v}.real", f"{v}.imag"]
        return True
    if not (t.is_float or t.is_bool) and (cls is float or cls is complex):
        return False  # a float where an integer is declared: the general path reports it
    code.fmt.append(t.slot_format)
    encode = t.facts.encode
    code.values.append(v if encode is None else f"{code.const(f'ENC_{t.name}', encode)}({v})")
    return True
