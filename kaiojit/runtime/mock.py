"""The mock backend: launches are recorded with their packed parameter bytes, memory is host
memory. Tests of the launch plumbing (slots, packing, configuration checks, the builder, the
fast launch) run on it without a GPU. It claims ``device_count`` devices of one compute
capability; modules are PTX text that must name its entries, and nothing runs. A module's
``.global`` byte arrays are host buffers (``module_global``), so a test can write a debug
kernel's fault record as the GPU would and see the next wait report it.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from kaiojit.errors import CudaError
from kaiojit.runtime.backend import DeviceLimits, Dim3, FastLaunchBinding, device_token
from kaiojit.runtime.faults import FaultWatch
from kaiojit.runtime.native.launchrecord import (
    LaunchConfigStruct, make_record, native_launcher, trampoline, uses_builtin,
)
from kaiojit.runtime.native.launchrecord import launch_mode as parse_launch_mode
from kaiojit.runtime.launch import ModuleKernel, load_kernel
from kaiojit.runtime.slots import ArgSlots
from kaiojit.target import TargetSpec, ptx_version_for


# int entry(const CUlaunchConfig*, CUfunction, void** params, void** extra): cuLaunchKernelEx
DRIVER_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p)


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
    globals: dict = field(default_factory=dict)  # name -> host buffer (module_global)
    cubin: bytes = b""  # a module loaded from a cubin (kaiojit.aot) instead of PTX


@dataclass(slots=True)
class MockFunction:
    name: str
    module: MockModule
    device: int
    dynamic_shared_limit: int = 48 * 1024


@dataclass(slots=True)
class MockCapture:
    """A stream capture in progress: the launches recorded, the thread that began it (the
    capture is thread-local: that thread may do nothing the capture forbids)."""

    thread: int
    nodes: list = field(default_factory=list)
    invalidated: str = ""  # why the capture failed, once it has


@dataclass(slots=True)
class MockGraph:
    """A captured graph, or an instantiated one (``nodes`` are MockLaunch records)."""

    nodes: tuple
    destroyed: bool = False


class _ThreadState(threading.local):
    device: int | None = None
    token: Any = None


class MockBackend:
    """A GpuBackend that runs nothing. ``launches`` lists every :class:`MockLaunch`."""

    name = "mock"
    debug_sync = False
    closing = False

    def __init__(self, device_count: int = 1, limits: DeviceLimits | None = None,
                 debug_sync: bool = False, compute_capability: tuple[int, int] = (9, 0),
                 launch_mode: str = "native"):
        self.launches: list[MockLaunch] = []
        self.fast_launches = 0
        self.fail_next_launch = 0  # the status the next fast launch's driver stand-in returns
        self.launch_mode = parse_launch_mode(launch_mode)  # as KAIOJIT_LAUNCH says
        self.debug_sync = debug_sync
        self.closing = False
        self.limits = limits or DeviceLimits()
        self.cc = compute_capability
        self.synchronize_calls = 0
        self.dynamic_shared_set: list[tuple[str, int]] = []
        self.loaded_images: list[bytes] = []  # cubins loaded (kaiojit.aot), in order
        self.fail_next_sync: CudaError | None = None
        self.faults = FaultWatch()  # as the cuda backend's: read after waits
        self.freed_globals: set[int] = set()  # addresses of unloaded modules' globals
        self.retired_globals: list = []  # their buffers, kept so no address is reused
        self._count = device_count
        self._tls = _ThreadState()
        self._default_device = 0
        self._lock = threading.Lock()
        self._buffers: dict[int, tuple[Any, int, int]] = {}  # address -> (buffer, nbytes, device)
        self.host_visible: dict[int, tuple[Any, bool]] = {}  # managed / mapped: (buffer, managed)
        self._next_handle = 0x1000
        self.captures: dict[int, MockCapture] = {}  # stream -> capture in progress
        self.graph_launches = 0

    # devices
    def device_count(self) -> int:
        return self._count

    def current_device(self) -> int:
        dev = self._tls.device
        if dev is None:
            dev = self._tls.device = self._default_device
            self._tls.token = device_token(dev)
        return dev

    def select_device(self, device: int) -> None:
        if not 0 <= device < self._count:
            raise ValueError(f"no CUDA device {device}: this machine has {self._count}")
        self._tls.device = device
        self._tls.token = device_token(device)

    def set_default_device(self, device: int) -> None:
        self.select_device(device)
        self._default_device = device

    def device_limits(self, device: int) -> DeviceLimits:
        return self.limits

    def compute_capability(self, device: int) -> tuple[int, int]:
        return self.cc

    def target_spec(self, device: int | None = None) -> TargetSpec:
        """The arch of the compute capability the mock claims, its PTX version unlimited by a
        driver."""
        arch = f"sm_{self.cc[0]}{self.cc[1]}"
        return TargetSpec("nvptx", arch, ptx_version_for(arch))

    # code
    def load_kernel(self, kernel: Any) -> ModuleKernel:
        """The loaded form of a compiled kernel (cached per kernel; loaded per device)."""
        return load_kernel(self, kernel)

    def load_module(self, image: str | bytes, device: int) -> MockModule:
        """A module of PTX text; text without an entry fails as the driver's JIT would. Bytes
        are a cubin: an ELF image, else the driver's CUDA_ERROR_INVALID_IMAGE."""
        self._capture_forbids("a module load")
        if isinstance(image, bytes):
            if not image.startswith(b"\x7fELF"):
                raise CudaError("CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid")
            self.loaded_images.append(image)
            return MockModule("", device, cubin=image)
        if ".entry" not in image and ".visible" not in image:
            raise CudaError("CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed\n"
                            "JIT log:\nptxas fatal: mock backend found no .entry in the PTX")
        return MockModule(image, device)

    def module_global(self, module: MockModule, name: str, device: int) -> int:
        """The address of a ``.global .b8 name[n]`` of the module's PTX (zeros at load)."""
        buf = module.globals.get(name)
        if buf is None:
            m = re.search(rf"\.global\s+(?:\.align\s+\d+\s+)?\.b8\s+{re.escape(name)}\[(\d+)\]",
                          module.ptx)
            if m is None:
                raise CudaError("CUDA_ERROR_NOT_FOUND", "named symbol not found",
                                f"the module global {name!r}")
            buf = module.globals[name] = ctypes.create_string_buffer(int(m.group(1)))
        return ctypes.addressof(buf)

    def read_device(self, dst: int, address: int, nbytes: int, device: int) -> None:
        if address in self.freed_globals:  # as cuMemcpyDtoH from an unloaded module's global
            raise CudaError("CUDA_ERROR_INVALID_VALUE", "invalid argument",
                            "reading a fault record")
        ctypes.memmove(dst, address, nbytes)

    def zero_device(self, address: int, nbytes: int, device: int) -> None:
        ctypes.memset(address, 0, nbytes)

    def unload_module(self, module: MockModule, device: int) -> None:
        module.unloaded = True
        self.faults.forget(self, device, module)
        # the globals' memory is the driver's no more (the buffers stay alive: no host fault)
        self.freed_globals.update(ctypes.addressof(b) for b in module.globals.values())
        self.retired_globals.extend(module.globals.values())

    def get_function(self, module: MockModule, name: str, device: int) -> MockFunction:
        if module.cubin:  # the entry's name is in the cubin's string table
            if b"\0" + name.encode() + b"\0" not in module.cubin:
                raise CudaError("CUDA_ERROR_NOT_FOUND", "named symbol not found",
                                f"kernel {name!r}")
            return MockFunction(name, module, device)
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

    def launch_typed(self, fn: MockFunction, grid: Dim3, block: Dim3, shared_mem: int,
                     stream: int, slots: ArgSlots, cluster: Dim3 | None = None) -> None:
        launch = MockLaunch(fn.name, grid, block, shared_mem, stream, slots.all_param_bytes(),
                            self.current_device(), cluster)
        if self.captures:
            capture = self.captures.get(stream)
            if capture is not None:
                capture.nodes.append(launch)  # recorded, not run
                return
            if stream == 0:  # the legacy stream waits for every stream, capturing ones too
                self._capture_forbids("a launch on the legacy default stream",
                                      "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
        with self._lock:
            self.launches.append(launch)

    def fast_launch_binding(self, fn: MockFunction, grid: Dim3, block: Dim3, shared_mem: int,
                            stream: int, slots: ArgSlots) -> FastLaunchBinding | None:
        """The cuda backend's binding of ``launch_mode`` with the driver replaced by a C
        callback into this backend: the callback reads the launch record back (configuration,
        stream, function, parameter array), records the launch as ``launch_typed`` does,
        counts it in ``fast_launches`` and returns ``fail_next_launch`` (once) as the driver's
        status. Under ``ctypes`` the stand-in is a Python function reading the record."""
        if self.launch_mode == "bindings":
            return None
        handle = id(fn)

        def entry(config: int, function: int, params: int, extra: int) -> int:
            c = LaunchConfigStruct.from_address(config)
            if function != handle or params != slots.params_address or extra:
                return 1  # CUDA_ERROR_INVALID_VALUE: the record is not the one built
            self.launch_typed(fn, (c.gridDimX, c.gridDimY, c.gridDimZ),
                              (c.blockDimX, c.blockDimY, c.blockDimZ), c.sharedMemBytes,
                              c.hStream or 0, slots)
            self.fast_launches += 1
            status, self.fail_next_launch = self.fail_next_launch, 0
            return status

        def failed(rc: int) -> None:
            raise CudaError("CUDA_ERROR_LAUNCH_FAILED", f"mock launch failed ({rc})")
        token = device_token(self.current_device())
        if self.launch_mode == "ctypes":
            record, _ = make_record(0, handle, grid, block, shared_mem, stream,
                                    slots.params_address)

            def call() -> int:
                return entry(ctypes.addressof(record.config), record.function, record.params, 0)
            return FastLaunchBinding(call, None, failed, self._tls, token, (record, slots))
        callback = DRIVER_ENTRY(entry)
        record, pointer = make_record(ctypes.cast(callback, ctypes.c_void_p).value, handle,
                                      grid, block, shared_mem, stream, slots.params_address)
        if uses_builtin(self.launch_mode):
            return FastLaunchBinding(native_launcher(record, slots, callback), None, failed,
                                     self._tls, token, (record, slots, callback))
        return FastLaunchBinding(trampoline(), pointer, failed, self._tls, token,
                                 (record, slots, callback))

    # memory: real host buffers, so copies and DLPack views hold real data
    def alloc(self, nbytes: int) -> int:
        self._capture_forbids("cuMemAlloc")
        buf = ctypes.create_string_buffer(max(nbytes, 1) + 256)
        ptr = (ctypes.addressof(buf) + 255) // 256 * 256  # cudaMalloc's alignment
        with self._lock:
            self._buffers[ptr] = (buf, nbytes, self.current_device())
        return ptr

    def free(self, ptr: int, device: int) -> None:
        with self._lock:
            self._buffers.pop(ptr, None)

    def alloc_host_visible(self, nbytes: int, managed: bool) -> int:
        """The cuda backend's managed or mapped host memory: host memory (the mock's device
        memory is host memory too)."""
        self._capture_forbids("cuMemAllocManaged" if managed else "cuMemHostAlloc")
        buf = ctypes.create_string_buffer(max(nbytes, 1) + 256)
        ptr = (ctypes.addressof(buf) + 255) // 256 * 256
        with self._lock:
            self.host_visible[ptr] = (buf, managed)
        return ptr

    def free_host_visible(self, ptr: int, managed: bool) -> None:
        with self._lock:
            self.host_visible.pop(ptr, None)

    @property
    def live_allocations(self) -> int:
        return len(self._buffers)

    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if stream is None:
            self._capture_forbids("a synchronous copy")
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if stream is None:
            self._capture_forbids("a synchronous copy")
        ctypes.memmove(dst, src, nbytes)
        if stream is None and self.faults:  # a synchronous copy is a wait, as on the driver
            self.faults.check(self)

    memcpy_dtod = memcpy_htod

    def memcpy_peer(self, dst: int, dst_device: int, src: int, src_device: int, nbytes: int,
                    stream: int | None = None) -> None:
        ctypes.memmove(dst, src, nbytes)

    def can_access_peer(self, device: int, peer: int) -> bool:
        return True  # the mock's devices share the host's memory

    def enable_peer_access(self, device: int, peer: int) -> bool:
        return True

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
        self._capture_forbids("a synchronization")
        self.synchronize_calls += 1
        if self.fail_next_sync is not None:
            err, self.fail_next_sync = self.fail_next_sync, None
            raise err
        if self.faults:
            self.faults.check(self)

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

    # CUDA graphs: a model of stream capture in the driver's thread-local mode
    def _capture_forbids(self, what: str, name: str = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
                         ) -> None:
        """What the driver does for work a capture forbids, in the capturing thread: it fails
        and invalidates the capture (its end then fails too)."""
        if not self.captures:
            return
        me = threading.get_ident()
        mine = [c for c in self.captures.values() if c.thread == me]
        if mine:
            for capture in mine:
                capture.invalidated = capture.invalidated or what
            raise CudaError(name, f"operation not permitted when stream is capturing ({what})")

    def capture_begin(self, stream: int) -> None:
        if stream == 0 or stream in self.captures:
            raise CudaError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
                            "operation not supported when stream is capturing")
        self.captures[stream] = MockCapture(threading.get_ident())

    def capture_end(self, stream: int) -> MockGraph:
        capture = self.captures.pop(stream, None)
        if capture is None:
            raise CudaError("CUDA_ERROR_ILLEGAL_STATE", "the stream is not capturing")
        if capture.invalidated:
            raise CudaError("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
                            f"the capture was invalidated by {capture.invalidated}")
        return MockGraph(tuple(capture.nodes))

    def stream_capturing(self, stream: int) -> bool:
        return stream in self.captures

    def graph_nodes(self, graph: MockGraph) -> int:
        return len(graph.nodes)

    def graph_instantiate(self, graph: MockGraph) -> MockGraph:
        return MockGraph(graph.nodes)

    def graph_update(self, executable: MockGraph, graph: MockGraph) -> bool:
        """In place where the topology is the same (node for node, the same kernels)."""
        if [n.kernel for n in executable.nodes] != [n.kernel for n in graph.nodes]:
            return False
        executable.nodes = graph.nodes
        return True

    def graph_launch(self, executable: MockGraph, stream: int) -> None:
        if executable.destroyed:
            raise CudaError("CUDA_ERROR_INVALID_HANDLE", "invalid resource handle")
        with self._lock:
            self.launches += [replace(n, stream=stream) for n in executable.nodes]
            self.graph_launches += 1

    def graph_destroy(self, graph: MockGraph) -> None:
        graph.destroyed = True

    graph_exec_destroy = graph_destroy

    # tensor maps
    def encode_tensormap_tiled(self, *, dtype: str, rank: int, address: int,
                               dims: tuple[int, ...], strides: tuple[int, ...],
                               box: tuple[int, ...], element_strides: tuple[int, ...],
                               interleave: str, swizzle: str, l2_promotion: str,
                               oob_fill: str) -> bytes:
        """128 deterministic bytes that depend on every field."""
        fields = (dtype, rank, address, dims, strides, box, element_strides, interleave, swizzle,
                  l2_promotion, oob_fill)
        digest = hashlib.sha512(repr(fields).encode()).digest()
        return digest + hashlib.sha512(digest).digest()
