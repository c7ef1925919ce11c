"""The mock backend: launches are recorded with their packed parameter bytes, memory is host
memory. Tests of the launch plumbing (slots, packing, configuration checks, the builder) run
on it without a GPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import threading
from dataclasses import dataclass
from typing import Any

from kaiojit.errors import CudaError
from kaiojit.runtime.backend import DeviceLimits, register_backend


@dataclass(frozen=True, slots=True)
class MockLaunch:
    """One recorded launch: what the driver would have received."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    stream: int
    params: tuple[bytes, ...]
    device: int
    cluster: tuple[int, int, int] | None = None


@dataclass(slots=True)
class MockModule:
    ptx: str
    device: int
    unloaded: bool = False


@dataclass(slots=True)
class MockFunction:
    name: str
    module: MockModule
    device: int
    dynamic_shared_limit: int = 48 * 1024


class _ThreadState(threading.local):
    device: int | None = None


class MockBackend:
    """A GpuBackend that runs nothing. ``launches`` lists every :class:`MockLaunch`."""

    name = "mock"

    def __init__(self, device_count: int = 1, limits: DeviceLimits | None = None,
                 debug_sync: bool = False, compute_capability: tuple[int, int] = (9, 0)):
        self.launches: list[MockLaunch] = []
        self.fast_launches = 0
        self.debug_sync = debug_sync
        self.closing = False
        self.limits = limits or DeviceLimits()
        self.cc = compute_capability
        self.synchronize_calls = 0
        self.dynamic_shared_set: list[tuple[str, int]] = []
        self.fail_next_sync: CudaError | None = None
        self._count = device_count
        self._tls = _ThreadState()
        self._default_device = 0
        self._lock = threading.Lock()
        self._buffers: dict[int, tuple[Any, int, int]] = {}  # address -> (buffer, nbytes, device)
        self._next_handle = 0x1000

    # devices
    def device_count(self) -> int:
        return self._count

    def current_device(self) -> int:
        dev = self._tls.device
        if dev is None:
            dev = self._tls.device = self._default_device
        return dev

    # the launch fast path (kaiojit.runtime.fastlaunch) works here as on the cuda backend
    fast_launch = True

    def stream_pointer(self, stream: int) -> int:
        return stream

    def fast_launch_entry(self, fn: Any, slots: Any) -> Any:
        """A stand-in for cuLaunchKernel that records the launch like ``launch_typed``."""
        def launch(fn_, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
            self.launch_typed(fn, (gx, gy, gz), (bx, by, bz), shared, stream, slots)
            self.fast_launches += 1
            return 0
        return launch

    def _launch_failed(self, rc: int, fn: Any, grid: tuple, block: tuple, shared_mem: int,
                       stream: int, slots: Any) -> None:
        raise CudaError("CUDA_ERROR_LAUNCH_FAILED", f"mock launch failed ({rc})")

    def select_device(self, device: int) -> None:
        if not 0 <= device < self._count:
            raise ValueError(f"no CUDA device {device}: this machine has {self._count}")
        self._tls.device = device

    def set_default_device(self, device: int) -> None:
        self.select_device(device)
        self._default_device = device

    def device_limits(self, device: int) -> DeviceLimits:
        return self.limits

    def compute_capability(self, device: int) -> tuple[int, int]:
        return self.cc

    # code
    def load_kernel(self, image: Any) -> Any:
        """The LoadedKernel of a compiled image (cached per image; loaded per device)."""
        from kaiojit.runtime.launch import load_kernel

        return load_kernel(self, image)

    def load_module(self, ptx: str, device: int) -> MockModule:
        if ".entry" not in ptx and ".visible" not in ptx:
            raise CudaError("CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed\n"
                            "JIT log:\nptxas fatal: mock backend found no .entry in the PTX")
        return MockModule(ptx, device)

    def unload_module(self, module: MockModule, device: int) -> None:
        module.unloaded = True

    def get_function(self, module: MockModule, name: str, device: int) -> MockFunction:
        if not re.search(rf"\.entry\s+{re.escape(name)}\b", module.ptx):
            raise CudaError("CUDA_ERROR_NOT_FOUND", "named symbol not found", f"kernel {name!r}")
        return MockFunction(name, module, device)

    def function_attributes(self, fn: MockFunction) -> dict[str, int]:
        return {"max_threads_per_block": self.limits.max_threads_per_block, "shared_bytes": 0,
                "local_bytes": 0, "registers": 16, "const_bytes": 0}

    def set_dynamic_shared(self, fn: MockFunction, nbytes: int) -> None:
        fn.dynamic_shared_limit = nbytes
        self.dynamic_shared_set.append((fn.name, nbytes))

    def occupancy_block_size(self, fn: MockFunction, dynamic_shared: int) -> tuple[int, int]:
        return 264, 256

    def launch_typed(self, fn: MockFunction, grid: tuple[int, int, int],
                     block: tuple[int, int, int], shared_mem: int, stream: int, slots: Any,
                     cluster: tuple[int, int, int] | None = None) -> None:
        launch = MockLaunch(fn.name, grid, block, shared_mem, stream, slots.all_param_bytes(),
                            self.current_device(), cluster)
        with self._lock:
            self.launches.append(launch)

    # memory: real host buffers, so copies and DLPack views hold real data
    def alloc(self, nbytes: int) -> int:
        buf = ctypes.create_string_buffer(max(nbytes, 1) + 256)
        ptr = (ctypes.addressof(buf) + 255) // 256 * 256  # cudaMalloc's alignment
        with self._lock:
            self._buffers[ptr] = (buf, nbytes, self.current_device())
        return ptr

    def free(self, ptr: int, device: int) -> None:
        with self._lock:
            self._buffers.pop(ptr, None)

    @property
    def live_allocations(self) -> int:
        return len(self._buffers)

    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        ctypes.memmove(dst, src, nbytes)

    memcpy_dtoh = memcpy_htod
    memcpy_dtod = memcpy_htod

    def memset(self, ptr: int, byte: int, nbytes: int, stream: int | None = None) -> None:
        ctypes.memset(ptr, byte, nbytes)

    def pointer_device(self, ptr: int) -> int:
        with self._lock:
            for base, (_, nbytes, device) in self._buffers.items():
                if base <= ptr < base + max(nbytes, 1):
                    return device
        return -1

    def dlpack_device_type(self) -> int:
        return 1  # kDLCPU: mock memory is host memory

    # streams and events
    def _handle(self) -> int:
        with self._lock:
            self._next_handle += 0x10
            return self._next_handle

    def synchronize(self) -> None:
        self.synchronize_calls += 1
        if self.fail_next_sync is not None:
            err, self.fail_next_sync = self.fail_next_sync, None
            raise err

    def stream_create(self) -> int:
        return self._handle()

    def stream_destroy(self, stream: int) -> None:
        pass

    def stream_synchronize(self, stream: int) -> None:
        self.synchronize()

    def stream_wait_event(self, stream: int, event: int) -> None:
        pass

    def event_create(self, timing: bool = True) -> int:
        return self._handle()

    def event_destroy(self, event: int) -> None:
        pass

    def event_record(self, event: int, stream: int) -> None:
        pass

    def event_synchronize(self, event: int) -> None:
        pass

    def event_elapsed_ms(self, start: int, end: int) -> float:
        return 0.0

    # tensor maps: deterministic bytes that depend on every field
    def encode_tensormap_tiled(self, **fields: Any) -> bytes:
        digest = hashlib.sha512(repr(sorted(fields.items())).encode()).digest()
        return digest + hashlib.sha512(digest).digest()


register_backend("mock", MockBackend)
