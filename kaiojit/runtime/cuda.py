"""The cuda backend: the CUDA driver API through ``cuda.bindings.driver``.

Each device's primary context is retained and made current, so memory and streams of
PyTorch, CuPy and numba (which use the same primary contexts) interoperate. Every driver call
goes through :func:`check`. The launch itself, module loading and tensor-map encoding call
driver entry points fetched once with ``cuGetProcAddress`` through ctypes: a launch then costs
one foreign call with prebuilt argument types and no Python object made per launch.

``cuda.bindings`` is imported on first use, so importing kaiojit on a machine without a
driver stays cheap and harmless.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import threading
from typing import Any

from kaiojit.errors import CudaError
from kaiojit.runtime.backend import (
    DeviceLimits,
    cuda_unavailable_error,
    launch_context,
    register_backend,
)

_drv: Any = None


def _driver() -> Any:
    global _drv
    if _drv is None:
        from cuda.bindings import driver

        _drv = driver
    return _drv


# Errors after which the context is unusable: every later call fails the same way.
_STICKY_ERRORS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_CONTEXT_IS_DESTROYED",
})
STICKY_NOTE = (
    "this fault poisons the CUDA context: every later CUDA call in this process will fail; "
    "restart the process"
)


def error_for(code: Any, context: str = "") -> CudaError:
    """A :class:`CudaError` with the driver's name and text for ``code`` (a CUresult or int)."""
    drv = _driver()
    code = drv.CUresult(int(code))
    _, name = drv.cuGetErrorName(code)
    _, text = drv.cuGetErrorString(code)
    name = name.decode() if isinstance(name, bytes) else str(name or f"CUDA error {int(code)}")
    text = text.decode() if isinstance(text, bytes) else str(text or "")
    if name in _STICKY_ERRORS and name != "CUDA_ERROR_CONTEXT_IS_DESTROYED":
        text = f"{text}; {STICKY_NOTE}"
    return CudaError(name, text, context, int(code))


def check(result: Any, context: str = "") -> Any:
    """Unwrap a ``cuda.bindings`` result ``(err, *values)``; raise :class:`CudaError` on error."""
    err = result[0]
    if int(err) != 0:
        raise error_for(err, context)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def is_sticky(error: CudaError) -> bool:
    return error.name in _STICKY_ERRORS


# --- what the driver offers ---------------------------------------------------------------------

_initialized = False


def _init() -> Any:
    global _initialized
    drv = _driver()
    if not _initialized:
        check(drv.cuInit(0))
        _initialized = True
    return drv


def probe_device_count() -> int:
    """How many devices the driver sees; raises if there is no driver."""
    drv = _init()
    return int(check(drv.cuDeviceGetCount()))


def raise_unavailable() -> None:
    """Raise the clear error of a forced cuda backend on a machine without CUDA."""
    try:
        n = probe_device_count()
    except CudaError as e:
        raise cuda_unavailable_error(f"{e.name}: {e.text}") from None
    except Exception as e:  # no driver library at all
        raise cuda_unavailable_error(f"the CUDA driver could not be loaded: {e}") from None
    if n == 0:
        raise cuda_unavailable_error("the driver reports no devices")


def driver_version() -> int:
    """The driver's CUDA version as 1000*major + 10*minor (12080 is CUDA 12.8)."""
    return int(check(_init().cuDriverGetVersion()))


def device_compute_capability(device: int = 0) -> tuple[int, int]:
    drv = _init()
    attr = drv.CUdevice_attribute
    major = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    minor = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
    return int(major), int(minor)


# The first CUDA release that loads each PTX ISA version, newest first (the PTX ISA release
# history). CUDA 13.x loads PTX 9.x with the same minor.
_PTX_FOR_CUDA: tuple[tuple[int, tuple[int, int]], ...] = (
    (13050, (9, 5)), (13040, (9, 4)), (13030, (9, 3)), (13020, (9, 2)), (13010, (9, 1)),
    (13000, (9, 0)), (12090, (8, 8)), (12080, (8, 7)), (12070, (8, 6)), (12050, (8, 5)),
    (12040, (8, 4)), (12030, (8, 3)), (12020, (8, 2)), (12010, (8, 1)), (12000, (8, 0)),
    (11080, (7, 8)), (11070, (7, 7)), (11060, (7, 6)), (11050, (7, 5)), (11040, (7, 4)),
    (11030, (7, 3)), (11020, (7, 2)), (11010, (7, 1)), (11000, (7, 0)),
)


def ptx_version_for_driver(version: int) -> tuple[int, int]:
    """The newest PTX ISA ``(major, minor)`` a driver of CUDA ``version`` (e.g. 12080) loads."""
    for first_cuda, ptx in _PTX_FOR_CUDA:
        if version >= first_cuda:
            return ptx
    raise CudaError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                    f"driver CUDA {version // 1000}.{version % 1000 // 10} is older than 11.0")


def max_ptx_version() -> tuple[int, int]:
    """The newest PTX ISA version this machine's driver accepts, e.g. ``(9, 0)``."""
    return ptx_version_for_driver(driver_version())


# --- ctypes entry points ---------------------------------------------------------------------------

_u = ctypes.c_uint
_p = ctypes.c_void_p
# cuLaunchKernel is called without argtypes: the handle, stream and parameter array go as
# prebuilt c_void_p objects and the dimensions as plain ints (C ints, which the x86-64 and
# aarch64 ABIs pass like the driver's unsigned ints). Measured 2.4x cheaper than converting
# eleven arguments through argtypes on every launch.
_LAUNCH_PROTO = ctypes.CFUNCTYPE(ctypes.c_int)
_LOAD_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_p), ctypes.c_char_p, _u,
                               ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_p))
_TMAP_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, _p, ctypes.c_int, ctypes.c_uint32, _p, ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
    ctypes.POINTER(ctypes.c_uint32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int)
_ENTRY_POINT_CUDA_VERSION = 12000


def _entry_point(name: str, proto: Any) -> Any:
    drv = _driver()
    flags = drv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
    result = check(drv.cuGetProcAddress(name.encode(), _ENTRY_POINT_CUDA_VERSION, flags),
                   f"cuGetProcAddress({name})")
    pfn = result[0] if isinstance(result, tuple) else result
    address = int(pfn)
    if not address:
        raise CudaError("CUDA_ERROR_NOT_FOUND", f"the driver has no entry point {name}")
    return proto(address)


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


class CudaBackend:
    """The GpuBackend of real devices."""

    name = "cuda"

    def __init__(self) -> None:
        self.drv = _init()
        self.debug_sync = os.environ.get("KAIOJIT_DEBUG_SYNC", "") not in ("", "0")
        self._count = int(check(self.drv.cuDeviceGetCount()))
        if self._count == 0:
            raise cuda_unavailable_error("the driver reports no devices")
        self._contexts: dict[int, Any] = {}
        self._limits: dict[int, DeviceLimits] = {}
        self._tls = _ThreadState()
        self._default_device = 0
        self._lock = threading.Lock()
        self._launch = _entry_point("cuLaunchKernel", _LAUNCH_PROTO)
        # KAIOJIT_LAUNCH=bindings launches through cuda.bindings' cuLaunchKernel instead.
        self.launch_through_bindings = os.environ.get("KAIOJIT_LAUNCH", "") == "bindings"
        self._streams: dict[int, Any] = {0: None}
        self._load = _entry_point("cuModuleLoadDataEx", _LOAD_PROTO)
        self._encode_tiled: Any = None
        self.closing = False
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
            )
            self._limits[device] = limits
        return limits

    def compute_capability(self, device: int) -> tuple[int, int]:
        return device_compute_capability(device)

    def _on_device(self, device: int) -> bool:
        """Make ``device``'s context current in this thread; True if it was not (pop later)."""
        if self._tls.device == device:
            return False
        check(self.drv.cuCtxPushCurrent(self._context(device)))
        return True

    def _pop(self) -> None:
        check(self.drv.cuCtxPopCurrent())

    # --- modules and functions --------------------------------------------------------------

    def load_kernel(self, image: Any) -> Any:
        """The LoadedKernel of a compiled image (cached per image; loaded per device)."""
        from kaiojit.runtime.launch import load_kernel

        loaded = load_kernel(self, image)
        check_entry_params(image.ptx, image.name, len(loaded.packer.layout.kinds))
        return loaded


    def load_module(self, ptx: str, device: int) -> Any:
        """``cuModuleLoadDataEx`` on PTX, with the JIT's error and info logs in the error."""
        pushed = self._on_device(device)
        try:
            return self._load_module(ptx)
        finally:
            if pushed:
                self._pop()

    def _load_module(self, ptx: str) -> Any:
        jit = self.drv.CUjit_option
        error_log = ctypes.create_string_buffer(_JIT_LOG_BYTES)
        info_log = ctypes.create_string_buffer(_JIT_LOG_BYTES)
        opts = (ctypes.c_int * 4)(
            int(jit.CU_JIT_ERROR_LOG_BUFFER), int(jit.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
            int(jit.CU_JIT_INFO_LOG_BUFFER), int(jit.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES))
        vals = (_p * 4)(ctypes.addressof(error_log), _JIT_LOG_BYTES,
                        ctypes.addressof(info_log), _JIT_LOG_BYTES)
        module = _p()
        rc = self._load(ctypes.byref(module), ptx.encode(), 4, opts, vals)
        if rc != 0:
            err = error_for(rc, "loading PTX with cuModuleLoadDataEx")
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

    def launch_typed(self, fn: CudaFunction, grid: tuple[int, int, int],
                     block: tuple[int, int, int], shared_mem: int, stream: int, slots: Any,
                     cluster: tuple[int, int, int] | None = None) -> None:
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

    @property
    def fast_launch(self) -> bool:
        """Whether launches may take :mod:`kaiojit.runtime.fastlaunch`'s generated path."""
        return not self.launch_through_bindings

    def fast_launch_entry(self, fn: CudaFunction, slots: Any) -> Any:
        """The callable a fast launch calls as ``cuLaunchKernel`` (the ctypes entry point)."""
        return self._launch

    def stream_pointer(self, stream: int) -> ctypes.c_void_p:
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
        return int(check(self.drv.cuMemAlloc(max(nbytes, 1)), f"allocating {nbytes} bytes"))

    def free(self, ptr: int, device: int) -> None:
        if self.closing:
            return  # the context may be gone at interpreter exit; the driver frees it all
        pushed = self._on_device(device)
        try:
            check(self.drv.cuMemFree(ptr))
        finally:
            if pushed:
                self._pop()

    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            if stream is None:
                check(self.drv.cuMemcpyHtoD(dst, src, nbytes))
            else:
                check(self.drv.cuMemcpyHtoDAsync(dst, src, nbytes, stream))

    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            if stream is None:
                check(self.drv.cuMemcpyDtoH(dst, src, nbytes))
            else:
                check(self.drv.cuMemcpyDtoHAsync(dst, src, nbytes, stream))

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
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

    def stream_create(self) -> int:
        self.current_device()
        return int(check(self.drv.cuStreamCreate(0)))

    def stream_destroy(self, stream: int) -> None:
        if not self.closing:
            check(self.drv.cuStreamDestroy(stream))

    def stream_synchronize(self, stream: int) -> None:
        check(self.drv.cuStreamSynchronize(stream), "stream synchronize")

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
            self._encode_tiled = _entry_point("cuTensorMapEncodeTiled", _TMAP_PROTO)
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


register_backend("cuda", CudaBackend)


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
