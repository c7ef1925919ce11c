"""The cuda backend: the CUDA driver API through ``cuda.bindings.driver``.

Each device's primary context is retained and made current, so memory and streams of
PyTorch, CuPy and numba (which use the same primary contexts) interoperate. Every driver call
goes through :func:`kaiojit.runtime.driver.check`. The launch itself, module loading and
tensor-map encoding call the driver entry points :mod:`kaiojit.runtime.driver` fetches through
ctypes: a launch then costs one foreign call with prebuilt argument types and no Python object
made per launch.
"""

from __future__ import annotations

import atexit
import ctypes
import re
import threading
from typing import Any

from kaiojit import env
from kaiojit.errors import CudaError
from kaiojit.runtime import driver
from kaiojit.runtime.native import launchrecord
from kaiojit.runtime.backend import (
    DeviceLimits, Dim3, FastLaunchBinding, device_token, launch_context,
)
from kaiojit.runtime.driver import check, error_for
from kaiojit.runtime.faults import FaultWatch
from kaiojit.runtime.launch import ModuleKernel, load_kernel
from kaiojit.runtime.slots import ArgSlots
from kaiojit.target import TargetSpec, ptx_version_for

_JIT_LOG_BYTES = 1 << 16


class CudaFunction:
    """A kernel entry point in one device's context."""

    __slots__ = ("handle", "obj", "device", "name", "dynamic_shared_limit", "pointer")

    def __init__(self, obj: Any, device: int, name: str):
        self.obj = obj
        self.handle = int(obj)
        self.pointer = ctypes.c_void_p(self.handle)
        self.device = device
        self.name = name
        self.dynamic_shared_limit = 48 * 1024


class _ThreadState(threading.local):
    device: int | None = None
    token: Any = None


class CudaBackend:
    """The GpuBackend of real devices."""

    name = "cuda"
    debug_sync = False
    closing = False

    def __init__(self) -> None:
        self.drv = driver.initialized()
        self.debug_sync = env.get("KAIOJIT_DEBUG_SYNC")
        self._count = int(check(self.drv.cuDeviceGetCount()))
        if self._count == 0:
            raise driver.unavailable_error("the driver reports no devices")
        self._contexts: dict[int, Any] = {}
        self.faults = FaultWatch()  # debug kernels' fault records, read after waits
        self.live_allocations = 0  # cuMemAlloc'd and not yet freed (as the cpu backend's)
        self._limits: dict[int, DeviceLimits] = {}
        self._specs: dict[int, TargetSpec] = {}
        self._tls = _ThreadState()
        self._default_device = 0
        self._lock = threading.Lock()
        self._launch = driver.entry_point("cuLaunchKernel", driver.LAUNCH_PROTO)
        # KAIOJIT_LAUNCH: native (default), ex, ctypes or bindings
        # (kaiojit.runtime.native.launchrecord)
        self.launch_mode = launchrecord.launch_mode(env.get("KAIOJIT_LAUNCH"))
        self.launch_through_bindings = self.launch_mode == "bindings"
        self._launch_ex_address = 0
        self._streams: dict[int, Any] = {0: None}
        self._load = driver.entry_point("cuModuleLoadDataEx", driver.LOAD_PROTO)
        self._encode_tiled: Any = None
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        self.closing = True

    # --- devices and contexts -------------------------------------------------------------

    def device_count(self) -> int:
        return self._count

    def _context(self, device: int) -> Any:
        ctx = self._contexts.get(device)
        if ctx is None:
            with self._lock:
                ctx = self._contexts.get(device)
                if ctx is None:
                    if not 0 <= device < self._count:
                        raise ValueError(f"no CUDA device {device}: this machine has {self._count}")
                    dev = check(self.drv.cuDeviceGet(device))
                    ctx = check(self.drv.cuDevicePrimaryCtxRetain(dev), f"device {device}")
                    self._contexts[device] = ctx
        return ctx

    def current_device(self) -> int:
        """This thread's device; its primary context is current in this thread."""
        dev = self._tls.device
        if dev is None:
            dev = self._default_device
            self._make_current(dev)
        return dev

    def _make_current(self, device: int) -> None:
        check(self.drv.cuCtxSetCurrent(self._context(device)), f"device {device}")
        self._tls.device = device
        self._tls.token = device_token(device)

    def select_device(self, device: int) -> None:
        self._make_current(device)

    def set_default_device(self, device: int) -> None:
        self._context(device)
        self._default_device = device

    def device_limits(self, device: int) -> DeviceLimits:
        limits = self._limits.get(device)
        if limits is None:
            a = self.drv.CUdevice_attribute

            def get(attr: Any) -> int:
                return int(check(self.drv.cuDeviceGetAttribute(attr, device)))

            limits = DeviceLimits(
                max_threads_per_block=get(a.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                max_block=(get(a.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                           get(a.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                           get(a.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
                max_grid=(get(a.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                          get(a.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                          get(a.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
                max_shared_per_block=get(a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
                max_shared_per_block_optin=get(
                    a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
                max_cluster_size=8 if self.compute_capability(device)[0] >= 9 else 0,
                multiprocessor_count=get(a.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            )
            self._limits[device] = limits
        return limits

    def compute_capability(self, device: int) -> tuple[int, int]:
        return driver.device_compute_capability(device)

    def target_spec(self, device: int | None = None) -> TargetSpec:
        """The device's ``sm_XY``, and the PTX version both it and the driver take."""
        dev = self.current_device() if device is None else device
        spec = self._specs.get(dev)
        if spec is None:
            major, minor = self.compute_capability(dev)
            arch = f"sm_{major}{minor}"
            ptx_major, ptx_minor = driver.max_ptx_version()
            version = ptx_version_for(arch, 10 * ptx_major + ptx_minor)
            spec = self._specs[dev] = TargetSpec("nvptx", arch, version)
        return spec

    def _on_device(self, device: int) -> bool:
        """Make ``device``'s context current in this thread; True if it was not (pop later)."""
        if self._tls.device == device:
            return False
        check(self.drv.cuCtxPushCurrent(self._context(device)))
        return True

    def _pop(self) -> None:
        check(self.drv.cuCtxPopCurrent())

    # --- modules and functions --------------------------------------------------------------

    def load_kernel(self, kernel: Any) -> ModuleKernel:
        """The loaded form of a compiled kernel (cached per kernel; loaded per device)."""
        loaded = load_kernel(self, kernel)
        packed = len(loaded.packer.layout.kinds)  # and a coarse entry's grid extent last
        check_entry_params(kernel.ptx, kernel.name, packed - bool(loaded.coarse_factor))
        return loaded

    def load_module(self, image: str | bytes, device: int) -> Any:
        """``cuModuleLoadDataEx`` on PTX text (or a cubin's bytes, from ``kaiojit.aot``), with
        the JIT's error and info logs in the error."""
        pushed = self._on_device(device)
        try:
            return self._load_module(image)
        finally:
            if pushed:
                self._pop()

    def _load_module(self, ptx: str | bytes) -> Any:
        jit = self.drv.CUjit_option
        error_log = ctypes.create_string_buffer(_JIT_LOG_BYTES)
        info_log = ctypes.create_string_buffer(_JIT_LOG_BYTES)
        names = [jit.CU_JIT_ERROR_LOG_BUFFER, jit.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                 jit.CU_JIT_INFO_LOG_BUFFER, jit.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
        values = [ctypes.addressof(error_log), _JIT_LOG_BYTES,
                  ctypes.addressof(info_log), _JIT_LOG_BYTES]
        cubin = isinstance(ptx, bytes)
        if not cubin and "\t.loc\t" in ptx:  # lineinfo=True or debug=True: keep the line table
            names.append(jit.CU_JIT_GENERATE_LINE_INFO)
            values.append(1)
        opts = (ctypes.c_int * len(names))(*(int(n) for n in names))
        vals = (ctypes.c_void_p * len(values))(*values)
        module = ctypes.c_void_p()
        data = ptx if cubin else ptx.encode()
        rc = self._load(ctypes.byref(module), data, len(names), opts, vals)
        if rc != 0:
            err = error_for(rc, f"loading {'a cubin' if cubin else 'PTX'} with cuModuleLoadDataEx")
            logs = error_log.value.decode(errors="replace").strip()
            info = info_log.value.decode(errors="replace").strip()
            detail = "\n".join(x for x in (logs, info) if x)
            if detail:
                err = CudaError(err.name, f"{err.text}\nJIT log:\n{detail}", err.context, err.code)
            raise err
        return self.drv.CUmodule(module.value)

    def unload_module(self, module: Any, device: int) -> None:
        if self.closing:
            return
        if self.faults:
            self.faults.forget(self, device, module)
        pushed = self._on_device(device)
        try:
            check(self.drv.cuModuleUnload(module))
        finally:
            if pushed:
                self._pop()

    def get_function(self, module: Any, name: str, device: int) -> CudaFunction:
        obj = check(self.drv.cuModuleGetFunction(module, name.encode()), f"kernel {name!r}")
        return CudaFunction(obj, device, name)

    def function_attributes(self, fn: CudaFunction) -> dict[str, int]:
        a = self.drv.CUfunction_attribute

        def get(attr: Any) -> int:
            return int(check(self.drv.cuFuncGetAttribute(attr, fn.obj)))

        return {
            "max_threads_per_block": get(a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            "shared_bytes": get(a.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            "local_bytes": get(a.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            "registers": get(a.CU_FUNC_ATTRIBUTE_NUM_REGS),
            "const_bytes": get(a.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
        }

    def set_dynamic_shared(self, fn: CudaFunction, nbytes: int) -> None:
        """Opt in to more than 48 KB of dynamic shared memory for ``fn``."""
        attr = self.drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(self.drv.cuFuncSetAttribute(fn.obj, attr, nbytes), f"kernel {fn.name!r}")
        fn.dynamic_shared_limit = nbytes

    def occupancy_block_size(self, fn: CudaFunction, dynamic_shared: int) -> tuple[int, int]:
        """``(min_grid_size, block_size)`` for full occupancy."""
        min_grid, block = check(self.drv.cuOccupancyMaxPotentialBlockSize(
            fn.obj, None, dynamic_shared, 0))
        return int(min_grid), int(block)

    # --- launching --------------------------------------------------------------------------

    def launch_typed(self, fn: CudaFunction, grid: Dim3, block: Dim3, shared_mem: int,
                     stream: int, slots: ArgSlots, cluster: Dim3 | None = None) -> None:
        if cluster is not None:
            self._launch_cluster(fn, grid, block, shared_mem, stream, slots, cluster)
            return
        if self.launch_through_bindings:
            rc = self.drv.cuLaunchKernel(fn.obj, grid[0], grid[1], grid[2], block[0], block[1],
                                         block[2], shared_mem, stream, slots.params_address, 0)[0]
            if int(rc) != 0:
                self._launch_failed(int(rc), fn, grid, block, shared_mem, stream, slots)
            return
        try:
            stream_pointer = self._streams[stream]
        except KeyError:
            stream_pointer = self._streams[stream] = ctypes.c_void_p(stream)
        rc = self._launch(fn.pointer, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                          shared_mem, stream_pointer, slots.params_pointer, None)
        if rc != 0:
            self._launch_failed(rc, fn, grid, block, shared_mem, stream, slots)

    def fast_launch_binding(self, fn: CudaFunction, grid: Dim3, block: Dim3, shared_mem: int,
                            stream: int, slots: ArgSlots) -> FastLaunchBinding | None:
        """``cuLaunchKernelEx`` through a prebuilt record, called by a builtin function
        (``KAIOJIT_LAUNCH=native``, the default, where ``kaiojit.runtime.native.available()``)
        or by the ctypes trampoline (``ex``, and ``native`` elsewhere), or
        ``cuLaunchKernel`` through ctypes with prebuilt pointers (``ctypes``); none under
        ``bindings``, whose launches all go through ``launch_typed``."""
        if self.launch_through_bindings:
            return None

        def failed(rc: int) -> None:
            self._launch_failed(rc, fn, grid, block, shared_mem, stream, slots)
        token = device_token(self.current_device())
        if self.launch_mode == "ctypes":
            launch, function = self._launch, fn.pointer
            stream_pointer, params = self._stream_pointer(stream), slots.params_pointer
            (gx, gy, gz), (bx, by, bz) = grid, block

            def call() -> int:
                return launch(function, gx, gy, gz, bx, by, bz, shared_mem, stream_pointer,
                              params, None)
            return FastLaunchBinding(call, None, failed, self._tls, token, slots)
        if not self._launch_ex_address:
            self._launch_ex_address = driver.entry_address("cuLaunchKernelEx")
        record, pointer = launchrecord.make_record(self._launch_ex_address, fn.handle, grid,
                                                   block, shared_mem, stream,
                                                   slots.params_address)
        if launchrecord.uses_builtin(self.launch_mode):
            return FastLaunchBinding(launchrecord.native_launcher(record, slots, fn), None,
                                     failed, self._tls, token, (record, slots))
        return FastLaunchBinding(launchrecord.trampoline(), pointer, failed, self._tls, token,
                                 (record, slots))

    def _stream_pointer(self, stream: int) -> ctypes.c_void_p:
        """The prebuilt ``c_void_p`` a launch passes for a stream handle."""
        try:
            return self._streams[stream]
        except KeyError:
            pointer = self._streams[stream] = ctypes.c_void_p(stream)
            return pointer

    def _launch_failed(self, rc: int, fn: CudaFunction, grid: tuple, block: tuple,
                       shared_mem: int, stream: int, slots: Any) -> None:
        err = error_for(rc)
        if err.name == "CUDA_ERROR_INVALID_CONTEXT" and fn.device is not None:
            # Another library changed this thread's current context: restore ours, once.
            self._make_current(fn.device)
            rc = self._launch(fn.pointer, *grid, *block, shared_mem, ctypes.c_void_p(stream),
                              slots.params_pointer, None)
            if rc == 0:
                return
            err = error_for(rc)
        raise CudaError(err.name, err.text, launch_context(fn.name, grid, block, shared_mem),
                        err.code)

    def _launch_cluster(self, fn: CudaFunction, grid: tuple, block: tuple, shared_mem: int,
                        stream: int, slots: Any, cluster: tuple[int, int, int]) -> None:
        drv = self.drv
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = shared_mem
        config.hStream = drv.CUstream(stream)
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        config.attrs = [attr]
        config.numAttrs = 1
        context = launch_context(fn.name, grid, block, shared_mem) + f", cluster={cluster}"
        check(drv.cuLaunchKernelEx(config, fn.obj, slots.params_address, 0), context)

    # --- memory -------------------------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        self.current_device()
        try:
            ptr = int(check(self.drv.cuMemAlloc(max(nbytes, 1)), f"allocating {nbytes} bytes"))
        except CudaError as e:
            if e.name == "CUDA_ERROR_OUT_OF_MEMORY":  # as the host's malloc failing: MemoryError
                raise MemoryError(str(e)) from None
            raise
        self.live_allocations += 1
        return ptr

    def free(self, ptr: int, device: int) -> None:
        self.live_allocations -= 1
        if self.closing:
            return  # the context may be gone at interpreter exit; the driver frees it all
        pushed = self._on_device(device)
        try:
            check(self.drv.cuMemFree(ptr))
        finally:
            if pushed:
                self._pop()

    def alloc_host_visible(self, nbytes: int, managed: bool) -> int:
        """Memory host and device both address at one pointer (unified addressing): managed
        (``cuMemAllocManaged``, attached globally) or page-locked host memory mapped into
        the device (``cuMemHostAlloc`` with DEVICEMAP and PORTABLE), as numba's
        ``managed_array`` and ``mapped_array`` have."""
        self.current_device()
        what = f"allocating {nbytes} bytes of {'managed' if managed else 'mapped host'} memory"
        try:
            if managed:
                ptr = check(self.drv.cuMemAllocManaged(max(nbytes, 1), 1), what)  # ATTACH_GLOBAL
            else:
                ptr = check(self.drv.cuMemHostAlloc(max(nbytes, 1), 0x3), what)  # PORTABLE|MAP
        except CudaError as e:
            if e.name == "CUDA_ERROR_OUT_OF_MEMORY":
                raise MemoryError(str(e)) from None
            raise
        return int(ptr)

    def free_host_visible(self, ptr: int, managed: bool) -> None:
        if self.closing:
            return
        self.current_device()
        check(self.drv.cuMemFree(ptr) if managed else self.drv.cuMemFreeHost(ptr))

    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            self.current_device()  # a thread's first driver call: our context current there
            if stream is None:
                check(self.drv.cuMemcpyHtoD(dst, src, nbytes))
            else:
                check(self.drv.cuMemcpyHtoDAsync(dst, src, nbytes, stream))

    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            self.current_device()  # a thread's first driver call: our context current there
            if stream is None:
                check(self.drv.cuMemcpyDtoH(dst, src, nbytes))
                if self.faults:
                    self.faults.check(self)
            else:
                check(self.drv.cuMemcpyDtoHAsync(dst, src, nbytes, stream))

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            self.current_device()  # a thread's first driver call: our context current there
            if stream is None:
                check(self.drv.cuMemcpyDtoD(dst, src, nbytes))
            else:
                check(self.drv.cuMemcpyDtoDAsync(dst, src, nbytes, stream))

    def memcpy_peer(self, dst: int, dst_device: int, src: int, src_device: int, nbytes: int,
                    stream: int | None = None) -> None:
        """Copy between two devices' memory (``cuMemcpyPeer[Async]``)."""
        if not nbytes:
            return
        dst_ctx, src_ctx = self._context(dst_device), self._context(src_device)
        context = f"peer copy of {nbytes} bytes from device {src_device} to {dst_device}"
        if stream is None:
            check(self.drv.cuMemcpyPeer(dst, dst_ctx, src, src_ctx, nbytes), context)
        else:
            check(self.drv.cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, nbytes, stream),
                  context)

    # --- the debug fault records (kaiojit.runtime.faults) -------------------------------------

    def module_global(self, module: Any, name: str, device: int) -> int:
        """The device address of a module's global ``name``."""
        pushed = self._on_device(device)
        try:
            address, _ = check(self.drv.cuModuleGetGlobal(module, name.encode()),
                               f"the module global {name!r}")
        finally:
            if pushed:
                self._pop()
        return int(address)

    def read_device(self, dst: int, address: int, nbytes: int, device: int) -> None:
        """A synchronous copy from ``device`` to host memory that checks no fault record."""
        pushed = self._on_device(device)
        try:
            check(self.drv.cuMemcpyDtoH(dst, address, nbytes), "reading a fault record")
        finally:
            if pushed:
                self._pop()

    def zero_device(self, address: int, nbytes: int, device: int) -> None:
        pushed = self._on_device(device)
        try:
            check(self.drv.cuMemsetD8(address, 0, nbytes), "clearing a fault record")
        finally:
            if pushed:
                self._pop()

    def can_access_peer(self, device: int, peer: int) -> bool:
        if device == peer:
            return True
        return bool(check(self.drv.cuDeviceCanAccessPeer(device, peer)))

    def enable_peer_access(self, device: int, peer: int) -> bool:
        """Map ``peer``'s memory into ``device``'s context; False where the hardware cannot."""
        if device == peer:
            return True
        if not self.can_access_peer(device, peer):
            return False
        pushed = self._on_device(device)
        try:
            err = self.drv.cuCtxEnablePeerAccess(self._context(peer), 0)
            err = err[0] if isinstance(err, tuple) else err
            already = self.drv.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            if err != self.drv.CUresult.CUDA_SUCCESS and err != already:
                check((err,), f"enabling peer access from device {device} to {peer}")
        finally:
            if pushed:
                self._pop()
        return True

    def memset(self, ptr: int, byte: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            if stream is None:
                check(self.drv.cuMemsetD8(ptr, byte, nbytes))
            else:
                check(self.drv.cuMemsetD8Async(ptr, byte, nbytes, stream))

    def pointer_device(self, ptr: int) -> int:
        """The device ordinal that owns ``ptr``, or -1 if the driver does not know it."""
        attr = self.drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        err, value = self.drv.cuPointerGetAttribute(attr, ptr)
        return int(value) if int(err) == 0 else -1

    def dlpack_device_type(self) -> int:
        return 2  # kDLCUDA

    # --- streams and events -----------------------------------------------------------------

    def synchronize(self) -> None:
        self.current_device()
        check(self.drv.cuCtxSynchronize(), "synchronize")
        if self.faults:
            self.faults.check(self)

    def stream_create(self) -> int:
        self.current_device()
        return int(check(self.drv.cuStreamCreate(0)))

    def stream_destroy(self, stream: int) -> None:
        if not self.closing:
            check(self.drv.cuStreamDestroy(stream))

    def stream_synchronize(self, stream: int) -> None:
        check(self.drv.cuStreamSynchronize(stream), "stream synchronize")
        if self.faults:
            self.faults.check(self)

    def stream_wait_event(self, stream: int, event: int) -> None:
        check(self.drv.cuStreamWaitEvent(stream, event, 0))

    def event_create(self, timing: bool = True) -> int:
        self.current_device()
        flags = self.drv.CUevent_flags
        flag = flags.CU_EVENT_DEFAULT if timing else flags.CU_EVENT_DISABLE_TIMING
        return int(check(self.drv.cuEventCreate(int(flag))))

    def event_destroy(self, event: int) -> None:
        if not self.closing:
            check(self.drv.cuEventDestroy(event))

    def event_record(self, event: int, stream: int) -> None:
        check(self.drv.cuEventRecord(event, stream))

    def event_synchronize(self, event: int) -> None:
        check(self.drv.cuEventSynchronize(event))

    def event_elapsed_ms(self, start: int, end: int) -> float:
        return float(check(self.drv.cuEventElapsedTime(start, end)))

    # --- tensor maps --------------------------------------------------------------------------

    def encode_tensormap_tiled(self, *, dtype: str, rank: int, address: int,
                               dims: tuple[int, ...], strides: tuple[int, ...],
                               box: tuple[int, ...], element_strides: tuple[int, ...],
                               interleave: str, swizzle: str, l2_promotion: str,
                               oob_fill: str) -> bytes:
        """``cuTensorMapEncodeTiled``; enum arguments are the driver's member names."""
        if self._encode_tiled is None:
            self._encode_tiled = driver.entry_point("cuTensorMapEncodeTiled",
                                                    driver.TENSORMAP_PROTO)
        drv = self.drv
        storage = ctypes.create_string_buffer(128 + 64)
        address_out = (ctypes.addressof(storage) + 63) // 64 * 64
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        rc = self._encode_tiled(
            address_out,
            int(getattr(drv.CUtensorMapDataType, dtype)), rank, address,
            (u64 * rank)(*dims), (u64 * max(rank - 1, 1))(*strides), (u32 * rank)(*box),
            (u32 * rank)(*element_strides),
            int(getattr(drv.CUtensorMapInterleave, interleave)),
            int(getattr(drv.CUtensorMapSwizzle, swizzle)),
            int(getattr(drv.CUtensorMapL2promotion, l2_promotion)),
            int(getattr(drv.CUtensorMapFloatOOBfill, oob_fill)))
        if rc != 0:
            raise error_for(rc, f"cuTensorMapEncodeTiled(dims={dims}, box={box})")
        return ctypes.string_at(address_out, 128)


def check_entry_params(ptx: str, name: str, expected: int) -> None:
    """A PTX entry must take as many parameters as its signature packs: a mismatch would shift
    every argument after it, silently."""
    match = re.search(rf"\.entry\s+{re.escape(name)}\s*\(([^)]*)\)", ptx)
    if match is None:
        return  # the driver reports a missing entry by name
    found = match.group(1).count(".param")
    if found != expected:
        raise ValueError(f"kernel {name!r}: its PTX entry takes {found} parameters, its "
                         f"signature packs {expected}")
