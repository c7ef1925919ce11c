"""The launch builder for PTX users bring themselves.

    mod = kj.Module.from_ptx(ptx)
    fn = mod.get_function("scale")
    fn.grid(n // 256).block(256).arg_ptr(out).arg_f32(2.0).arg_u32(n).launch(stream)

Each ``arg_*`` adds exactly one kernel parameter (a tensormap too, though it fills 16 slots),
in order, into the same :class:`~kaiojit.runtime.slots.ArgSlots` the compiled path uses.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from kaiojit.runtime.backend import GpuBackend, get_backend
from kaiojit.runtime.interop import array_info
from kaiojit.runtime.launch import check_launch_config, debug_sync, launch_context
from kaiojit.runtime.slots import ArgSlots, SlotLayout, ThreadSlots
from kaiojit.runtime.stream import stream_handle
from kaiojit.types import SCALARS

_RANGES = {
    "uint32": (0, 2**32 - 1), "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1), "int64": (-(2**63), 2**63 - 1),
}


class Module:
    """A PTX module loaded on the current device."""

    def __init__(self, ptx: str, backend: GpuBackend | None = None):
        self.backend = backend or get_backend()
        self.ptx = ptx
        self.device = self.backend.current_device()
        self.handle = self.backend.load_module(ptx, self.device)
        fin = weakref.finalize(self, _unload, self.backend, self.handle, self.device)
        fin.atexit = False
        self._functions: dict[str, Function] = {}

    @classmethod
    def from_ptx(cls, ptx: str) -> Module:
        return cls(ptx)

    def get_function(self, name: str) -> Function:
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = Function(self, name)
        return fn


def _unload(backend: GpuBackend, handle: Any, device: int) -> None:
    if not backend.closing:
        try:
            backend.unload_module(handle, device)
        except Exception:
            pass


class Function:
    """A kernel of a :class:`Module`; ``grid()``, ``block()``, ... start a launch builder."""

    def __init__(self, module: Module, name: str):
        self.module = module
        self.name = name
        self.backend = module.backend
        self.handle = self.backend.get_function(module.handle, name, module.device)
        self._slots: dict[tuple[str, ...], ThreadSlots] = {}
        self._lock = threading.Lock()
        self._dynamic_limit: int | None = None
        self._attributes: dict[str, int] | None = None
        self.limits = self.backend.device_limits(module.device)

    @property
    def attributes(self) -> dict[str, int]:
        """Registers, shared/local/constant bytes and the most threads a block may have."""
        if self._attributes is None:
            self._attributes = self.backend.function_attributes(self.handle)
        return self._attributes

    def slots_for(self, kinds: tuple[str, ...]) -> ArgSlots:
        ts = self._slots.get(kinds)
        if ts is None:
            with self._lock:
                ts = self._slots.setdefault(kinds, ThreadSlots(SlotLayout.for_kinds(kinds)))
        return ts.get()

    def launcher(self) -> KernelLaunch:
        return KernelLaunch(self)

    def grid(self, *dims: Any) -> KernelLaunch:
        return KernelLaunch(self).grid(*dims)

    def block(self, *dims: Any) -> KernelLaunch:
        return KernelLaunch(self).block(*dims)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("arg_") or name in ("shared_mem", "cluster"):
            return getattr(KernelLaunch(self), name)
        raise AttributeError(name)


def _dims(dims: tuple) -> Any:
    return dims[0] if len(dims) == 1 else dims


class KernelLaunch:
    """Builder of one launch: grid and block default to 1, shared memory to 0."""

    def __init__(self, function: Function):
        self.function = function
        self._grid: Any = 1
        self._block: Any = 1
        self._shared_mem = 0
        self._cluster: Any = None
        self.kinds: list[str] = []
        self.values: list[Any] = []

    def grid(self, *dims: Any) -> KernelLaunch:
        self._grid = _dims(dims)
        return self

    def block(self, *dims: Any) -> KernelLaunch:
        self._block = _dims(dims)
        return self

    def shared_mem(self, nbytes: int) -> KernelLaunch:
        self._shared_mem = nbytes
        return self

    def cluster(self, *dims: Any) -> KernelLaunch:
        self._cluster = _dims(dims)
        return self

    def _add(self, kind: str, value: Any) -> KernelLaunch:
        self.kinds.append(kind)
        self.values.append(value)
        return self

    def _int(self, kind: str, value: Any) -> KernelLaunch:
        v = int(value.__index__()) if hasattr(value, "__index__") else None
        lo, hi = _RANGES[kind]
        if v is None or not lo <= v <= hi:
            raise ValueError(f"argument {len(self.kinds)} ({kind}): {value!r} is not an integer "
                             f"in [{lo}, {hi}]")
        return self._add(kind, v)

    def arg_ptr(self, pointer: Any) -> KernelLaunch:
        """A device pointer: an int, a DeviceArray, or any CAI/DLPack/PyTorch/CuPy array."""
        if isinstance(pointer, int):
            return self._add("ptr", pointer)
        info = array_info(pointer)
        if info is None:
            raise TypeError(f"argument {len(self.kinds)} (ptr): a device pointer or a device "
                            f"array, got {type(pointer).__qualname__}")
        return self._add("ptr", info[0])

    def arg_u32(self, value: int) -> KernelLaunch:
        return self._int("uint32", value)

    def arg_i32(self, value: int) -> KernelLaunch:
        return self._int("int32", value)

    def arg_u64(self, value: int) -> KernelLaunch:
        return self._int("uint64", value)

    def arg_i64(self, value: int) -> KernelLaunch:
        return self._int("int64", value)

    def arg_f32(self, value: float) -> KernelLaunch:
        return self._add("float32", float(value))

    def arg_f64(self, value: float) -> KernelLaunch:
        return self._add("float64", float(value))

    def arg_tensormap(self, tensormap: Any) -> KernelLaunch:
        """A 128-byte CUtensorMap by value: a kj.TensorMap or 128 bytes."""
        data = bytes(getattr(tensormap, "bytes", tensormap))
        if len(data) != 128:
            raise ValueError(f"argument {len(self.kinds)} (tensormap): needs 128 bytes, "
                             f"got {len(data)}")
        return self._add("tensormap", data)

    def write(self, slots: ArgSlots) -> None:
        first = slots.layout.first_slot
        for i, (kind, value) in enumerate(zip(self.kinds, self.values)):
            slot = first[i]
            if kind in ("float32", "float64"):
                slots.write_scalar(slot, SCALARS[kind], value)
            elif kind == "tensormap":
                slots.write_bytes(slot, value)
            else:
                slots.write_int(slot, value, 0xFFFFFFFFFFFFFFFF)

    def launch(self, stream: Any = None) -> None:
        fn = self.function
        backend = fn.backend
        attrs = fn.attributes
        static = attrs.get("shared_bytes", 0)
        config = check_launch_config(self._grid, self._block, self._shared_mem, self._cluster,
                                     fn.limits, fn.name, static, attrs.get("max_threads_per_block"))
        limit = fn._dynamic_limit if fn._dynamic_limit is not None else 48 * 1024 - static
        if config.shared_mem > limit:
            backend.set_dynamic_shared(fn.handle, config.shared_mem)
            fn._dynamic_limit = config.shared_mem
        if backend.current_device() != fn.module.device:
            raise ValueError(f"kernel {fn.name!r} was loaded on device {fn.module.device}, "
                             f"the current device is {backend.current_device()}")
        slots = fn.slots_for(tuple(self.kinds))
        self.write(slots)
        handle = stream_handle(stream)
        backend.launch_typed(fn.handle, config.grid, config.block, config.shared_mem, handle,
                             slots, config.cluster)
        if backend.debug_sync:
            debug_sync(backend, handle, fn.name, config)

    def __repr__(self) -> str:
        where = launch_context(self.function.name, self._grid, self._block, self._shared_mem)
        return f"<KernelLaunch {where} args={self.kinds}>"
