"""The CUDA driver itself: loading ``cuda.bindings``, error checking, versions, entry points.

Every driver call of the cuda backend goes through :func:`check`, which raises
:class:`~kaiojit.errors.CudaError` with the driver's error name and text. The few calls made
per launch or per module (``cuLaunchKernel``, ``cuModuleLoadDataEx``,
``cuTensorMapEncodeTiled``) are fetched once with ``cuGetProcAddress`` and called through
ctypes with prebuilt argument types (:func:`entry_point`).

``cuda.bindings`` is imported on first use, so importing kaiojit on a machine without a
driver stays cheap and harmless; :func:`driver_sees_devices` asks the driver library itself,
through ctypes, whether there is anything to talk to before anything imports it.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from kaiojit.errors import CudaError

_drv: Any = None


def bindings() -> Any:
    """``cuda.bindings.driver``, imported on first use."""
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
    drv = bindings()
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


def unavailable_error(reason: str) -> CudaError:
    """The error of a cuda backend asked for on a machine where CUDA is not usable."""
    return CudaError(
        "CUDA_ERROR_NO_DEVICE",
        f"no usable CUDA device ({reason}); set KAIOJIT_BACKEND=cpu to run kernels on the host",
    )


# --- what the driver offers ---------------------------------------------------------------------

_initialized = False


def initialized() -> Any:
    """The driver bindings after ``cuInit`` (called once)."""
    global _initialized
    drv = bindings()
    if not _initialized:
        check(drv.cuInit(0))
        _initialized = True
    return drv


# The driver library's name, as the loader looks it up (numba's and CuPy's choice too).
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def driver_sees_devices() -> bool:
    """Whether the CUDA driver library loads, initializes and counts at least one device,
    asked through ctypes (``cuInit``, ``cuDeviceGetCount``) without importing
    ``cuda.bindings`` (and its ``cuda.pathfinder``, about 30 ms of a cold start): on a machine
    with no driver or no device, the answer "no" costs a failed ``dlopen``. Never raises."""
    try:
        lib = ctypes.CDLL(DRIVER_LIBRARY)
        count = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 \
            and count.value > 0
    except (OSError, AttributeError):  # no library, or one without the driver API
        return False


def probe_device_count() -> int:
    """How many devices the driver sees; raises if there is no driver."""
    return int(check(initialized().cuDeviceGetCount()))


def raise_unavailable() -> None:
    """Raise the clear error of a forced cuda backend on a machine without CUDA."""
    try:
        n = probe_device_count()
    except CudaError as e:
        raise unavailable_error(f"{e.name}: {e.text}") from None
    except Exception as e:  # no driver library at all
        raise unavailable_error(f"the CUDA driver could not be loaded: {e}") from None
    if n == 0:
        raise unavailable_error("the driver reports no devices")


def driver_version() -> int:
    """The driver's CUDA version as 1000*major + 10*minor (12080 is CUDA 12.8)."""
    return int(check(initialized().cuDriverGetVersion()))


def device_compute_capability(device: int = 0) -> tuple[int, int]:
    drv = initialized()
    attr = drv.CUdevice_attribute
    major = check(drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    minor = check(drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
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


# --- ctypes entry points ------------------------------------------------------------------------

_u = ctypes.c_uint
_p = ctypes.c_void_p
# cuLaunchKernel is called without argtypes: the handle, stream and parameter array go as
# prebuilt c_void_p objects and the dimensions as plain ints (C ints, which the x86-64 and
# aarch64 ABIs pass like the driver's unsigned ints). Measured 2.4x cheaper than converting
# eleven arguments through argtypes on every launch.
LAUNCH_PROTO = ctypes.CFUNCTYPE(ctypes.c_int)
LOAD_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_p), ctypes.c_char_p, _u,
                              ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_p))
TENSORMAP_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, _p, ctypes.c_int, ctypes.c_uint32, _p, ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
    ctypes.POINTER(ctypes.c_uint32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int)
_ENTRY_POINT_CUDA_VERSION = 12000
# cuLinkCreate, cuLinkAddData, cuLinkComplete, cuLinkDestroy (kaiojit.aot's driver compiler)
_LINK_PROTOS = (
    ("cuLinkCreate", ctypes.CFUNCTYPE(ctypes.c_int, _u, ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(_p), ctypes.POINTER(_p))),
    ("cuLinkAddData", ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.c_int, ctypes.c_char_p,
                                       ctypes.c_size_t, ctypes.c_char_p, _u, _p, _p)),
    ("cuLinkComplete", ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.POINTER(_p),
                                        ctypes.POINTER(ctypes.c_size_t))),
    ("cuLinkDestroy", ctypes.CFUNCTYPE(ctypes.c_int, _p)),
)
JIT_INPUT_PTX = 1  # CU_JIT_INPUT_PTX


def link_entry_points() -> tuple[Any, ...]:
    """The driver's linker functions as ctypes functions (looked up at each export: rare)."""
    return tuple(entry_point(name, proto) for name, proto in _LINK_PROTOS)


def entry_point(name: str, proto: Any) -> Any:
    """The driver function ``name`` (CUDA 12.0 ABI) as a ctypes function of type ``proto``."""
    return proto(entry_address(name))


def entry_address(name: str) -> int:
    """The address of the driver function ``name`` (CUDA 12.0 ABI)."""
    drv = bindings()
    flags = drv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
    result = check(drv.cuGetProcAddress(name.encode(), _ENTRY_POINT_CUDA_VERSION, flags),
                   f"cuGetProcAddress({name})")
    pfn = result[0] if isinstance(result, tuple) else result
    address = int(pfn)
    if not address:
        raise CudaError("CUDA_ERROR_NOT_FOUND", f"the driver has no entry point {name}")
    return address
