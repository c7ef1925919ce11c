"""kaiojit: CUDA kernels written in Python, compiled through LLVM's NVPTX backend.

Public names only; see API.md. The runtime (driver, memory, streams) is imported on first use,
so ``import kaiojit`` and ``compile_ptx`` stay fast on machines without a GPU.
"""

from __future__ import annotations

import functools
import sys

from . import types
from . import execsource as _execsource
from .logs import set_log_level
from .options import VERSION as _VERSION
from .options import CompileOptions as _CompileOptions
from .options import launch_bounds_of as _launch_bounds_of
from .target import TargetSpec as _TargetSpec
from .target import check_arch as _check_arch, ptx_version_for as _ptx_version_for
from .errors import (
    CompileError,
    CudaError,
    KernelError,
    LaunchError,
    LibdeviceNotFound,
    PerformanceWarning,
    TypingError,
    UnsupportedError,
    user_facing as _user_facing,
)
from .language import (
    activemask,
    all_sync,
    any_sync,
    atomic,
    ballot_sync,
    blockDim,
    blockIdx,
    clusterBlockIdx,
    clusterDim,
    clusterGridDim,
    clusterIdx,
    brev,
    cg,
    clz,
    const,
    ffs,
    fma,
    grid,
    gridDim,
    gridsize,
    laneid,
    local,
    popc,
    shared,
    shfl_down_sync,
    shfl_sync,
    shfl_up_sync,
    shfl_xor_sync,
    syncthreads,
    syncthreads_and,
    syncthreads_count,
    syncthreads_or,
    static_range,
    literal_unroll,
    syncwarp,
    threadfence,
    threadfence_block,
    threadfence_system,
    threadIdx,
    warpsize,
    wgmma,
)
from .types import (
    Signature,
    bfloat16,
    constexpr,
    bool_,
    complex64,
    complex128,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    void,
)

__version__ = _VERSION
_execsource.install()  # kernels built by exec() from a string keep their source

__all__ = [  # the compiler's names; the runtime's (to_device, Stream, ...) and the library's
    # (vectorize, reduce) load on first use
    "CompileError", "CudaError", "Dispatcher", "KernelError", "LaunchError", "LibdeviceNotFound",
    "PerformanceWarning", "Signature", "TypingError", "UnsupportedError",
    "activemask", "all_sync", "any_sync", "atomic", "ballot_sync", "blockDim", "blockIdx",
    "bool_", "brev", "clz", "compile_llvm", "compile_ptx", "const", "ffs", "float16", "float32",
    "float64", "fma", "grid", "gridDim", "gridsize", "int8", "int16", "int32", "int64", "jit",
    "laneid", "local", "popc", "shared", "shfl_down_sync", "shfl_sync", "shfl_up_sync",
    "shfl_xor_sync", "syncthreads", "syncthreads_and", "syncthreads_count", "syncthreads_or",
    "syncwarp", "threadIdx", "threadfence", "threadfence_block", "threadfence_system", "types",
    "uint8", "uint16", "uint32", "uint64", "warpsize", "wgmma", "reduce", "vectorize",
]
__all__ += ["Config", "autotune", "constexpr", "occupancy"]  # tuning (issue 12)
__all__ += ["bfloat16", "bf16", "static_range"]  # tensor cores (issue 11)
__all__ += ["literal_unroll"]  # numba's (issue 28)
__all__ += ["complex64", "complex128", "cg", "declare_device"]  # issue 13
__all__ += ["float8_e4m3fn", "float8_e5m2"]  # fp8, named as ml_dtypes and PyTorch name them
__all__ += ["set_log_level"]  # issue 30: the kaiojit logger, on at run time
__all__ += ["cuda", "void", "guvectorize"]  # numba's namespace and spelling (issue 28)
__all__ += ["clusterBlockIdx", "clusterDim", "clusterGridDim", "clusterIdx"]  # issue 32


def declare_device(name, sig, link=None, *, abi="numba", py_impl=None):
    """A foreign device function kernels may call (numba's ``cuda.declare_device``): see
    ``kaiojit/linking.py``."""
    from .linking import declare_device as declare

    return declare(name, sig, link, abi=abi, py_impl=py_impl)


def _link_files(link) -> tuple:
    if not link:
        return ()
    from .linking import check_link_files

    return check_link_files(link, "kj.jit(link=...)")
c8, c16 = complex64, complex128

boolean = bool_
b1 = bool_
i1, i2, i4, i8 = int8, int16, int32, int64
u1, u2, u4, u8 = uint8, uint16, uint32, uint64
f2, f4, f8 = float16, float32, float64
i32, i64, i16, u32, u64, u16 = int32, int64, int16, uint32, uint64, uint16
f16, f32, f64 = float16, float32, float64
half, double = float16, float64
bf16 = bfloat16
intp, uintp = int64, uint64


@_user_facing(errors=(CompileError, TypeError, ValueError))  # a bad option, an eager compile
def jit(func_or_sig=None, *, device: bool = False, fastmath: bool = False, contract: bool = True,
        debug: bool = False, lineinfo: bool = False, opt: int = 3, max_registers: int | None = None,
        cache: bool = False, specialize=(), link=None, prefetch: bool = True,
        coarsen: bool = True, launch_bounds=None, inline: str = "", **unknown):
    """Compile a Python function as a CUDA kernel (or, with ``device=True``, a device function).

    ``@kj.jit`` is lazy: one specialization per argument-type signature, compiled at the first
    launch with those types. ``@kj.jit("void(float32[:], int32)")`` (or a list of signatures,
    or annotations of every parameter) compiles eagerly. ``specialize=("BLOCK",)`` makes
    parameters compile-time constants, as the annotation ``BLOCK: kj.constexpr`` does.
    ``prefetch=False`` leaves out the L2 prefetches a one-element-a-thread kernel gets ahead
    of its loads on sm_90 and later; ``coarsen=False`` leaves out the coarse entry that
    launches such a kernel's large grids with a quarter of the blocks (docs/semantics.md).
    ``launch_bounds=128`` (or ``(128, 2)``, ``(128, 2, 4)``) bounds the block's threads (and
    asks for blocks per SM, blocks per cluster), as CUDA C's ``__launch_bounds__``.
    ``inline="always"`` / ``"never"`` makes a device function always / never inlined into
    its callers (LLVM's ``alwaysinline`` / ``noinline``); by default LLVM decides.
    """
    if unknown:
        raise TypeError(f"kj.jit() got unknown option(s): {', '.join(sorted(unknown))}")
    if not 0 <= opt <= 3:
        raise ValueError(f"opt must be 0 to 3, got {opt}")
    if inline not in ("", "always", "never"):
        raise ValueError(f"inline is 'always', 'never' or '' (LLVM decides), got {inline!r}")
    options = _CompileOptions(fastmath=bool(fastmath), contract=bool(contract), debug=bool(debug), lineinfo=bool(lineinfo),
                              opt=int(opt), max_registers=max_registers, cache=bool(cache),
                              link=_link_files(link), prefetch=bool(prefetch),
                              coarsen=bool(coarsen),
                              launch_bounds=_launch_bounds_of(launch_bounds), inline=inline)

    @_user_facing(errors=(CompileError,))
    def decorate(pyfunc, sigs=()):
        from .dispatcher import Dispatcher, annotations_signature as _annotations_signature

        if not sigs:
            ann = _annotations_signature(pyfunc)
            if ann is not None:
                sigs = (ann,)
        return Dispatcher(pyfunc, options, device=device, signatures=sigs, specialize=specialize)

    if func_or_sig is None:
        return decorate
    if isinstance(func_or_sig, (str, Signature)):
        return functools.partial(decorate, sigs=(func_or_sig,))
    if isinstance(func_or_sig, (list, tuple)) and all(
        isinstance(s, (str, Signature)) for s in func_or_sig
    ):
        return functools.partial(decorate, sigs=tuple(func_or_sig))
    if callable(func_or_sig):
        return decorate(func_or_sig)
    raise TypeError(f"kj.jit takes a function or a signature string, got {func_or_sig!r}")


@_user_facing(errors=(CompileError, TypeError, ValueError))  # the user's mistake: their frames
def compile_ptx(pyfunc, signature, arch: str = "sm_90", *, ptx_version: int | None = None,
                device: bool = False, **options) -> str:
    """PTX for ``pyfunc`` compiled for ``signature``; no GPU needed. Returns the PTX text.

    With ``device=True`` the function is compiled as a device function: a ``.visible .func``
    named after it, returning what it returns (numba's ``compile_ptx(device=True)``)."""
    return _compile_standalone(pyfunc, signature, arch, ptx_version, device, options).ptx


@_user_facing(errors=(CompileError, TypeError, ValueError))  # the user's mistake: their frames
def compile_llvm(pyfunc, signature, arch: str = "sm_90", *, device: bool = False,
                 **options) -> str:
    """Optimized LLVM IR (NVPTX) for ``pyfunc`` compiled for ``signature``; ``device`` as for
    :func:`compile_ptx`."""
    return _compile_standalone(pyfunc, signature, arch, None, device, options).llvm


def _compile_standalone(pyfunc, signature, arch, ptx_version, device, options):
    _check_arch(arch)
    from .dispatcher import Dispatcher

    spec = _TargetSpec("nvptx", arch, ptx_version or _ptx_version_for(arch))
    disp = pyfunc if isinstance(pyfunc, Dispatcher) else jit(**options)(pyfunc)
    return disp.compile_device(signature, spec) if device else disp.compile(signature, spec)


_SUBMODULES = frozenset({"bench", "diskcache", "compiler", "dispatcher", "language", "launch",
                         "options", "target", "types", "errors", "frontend", "lower", "testing",
                         "tools", "lib", "random", "kir", "intrinsics", "tma_host", "aot", "cuda"})
# documented import paths of modules that moved into a package (``from kaiojit.random import
# ...`` in README and docs/semantics.md): the old name finds the module under its new one
_MOVED_MODULES = {"kaiojit.random": "kaiojit.lib.random"}


class _MovedModuleFinder:
    """Imports a documented old path (``kaiojit.random``) as the module it names now: one module
    object under both names, no stub file. First on ``sys.meta_path``, so that no other finder
    (another checkout's editable install) answers the old name with a stale file; for any other
    name it is one dict lookup."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None):
        if fullname not in _MOVED_MODULES:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(fullname, _MovedModuleFinder)

    @staticmethod
    def create_module(spec) -> None:
        return None  # a placeholder that exec_module replaces in sys.modules

    @staticmethod
    def exec_module(module) -> None:
        import importlib

        sys.modules[module.__name__] = importlib.import_module(_MOVED_MODULES[module.__name__])


sys.meta_path.insert(0, _MovedModuleFinder)


def __getattr__(name: str):
    # kernel functions the intrinsic registry declares (kj.nanosleep, ...), then the runtime's
    # names (DeviceArray, to_device, Stream, ...): each loaded on first use
    import importlib

    if name.startswith("_"):
        raise AttributeError(f"module 'kaiojit' has no attribute {name!r}")
    if name in _SUBMODULES:  # `from . import x` asks for submodules here before importing them
        return importlib.import_module(f"kaiojit.{name}")
    if name == "Dispatcher":  # the compiler: loaded by the first @kj.jit, not by the import
        value = globals()[name] = importlib.import_module("kaiojit.dispatcher").Dispatcher
        return value
    if name in ("reduce", "vectorize", "guvectorize"):  # library kernels: loaded on first use
        return getattr(importlib.import_module("kaiojit.lib.ufunc"), name)
    if name in ("Config", "autotune", "occupancy"):  # tuning: loaded on first use
        module = "kaiojit.launch.occupancy_api" if name == "occupancy" else "kaiojit.lib.autotuner"
        value = globals()[name] = getattr(importlib.import_module(module), name)
        return value
    if name == "runtime" or name in _RUNTIME_NAMES:  # host names: no intrinsic registry (nor
        runtime = importlib.import_module("kaiojit.runtime")  # LLVM) is loaded for them
        if name == "runtime":
            return runtime
        value = globals()[name] = getattr(runtime, name)
        return value
    from .kir.intrinsics import public_object

    value = public_object(name)  # a kernel function: no runtime (nor NumPy) is loaded for it
    if value is not None:
        globals()[name] = value
        return value
    runtime = importlib.import_module("kaiojit.runtime")
    try:
        value = getattr(runtime, name)
    except AttributeError:
        raise AttributeError(f"module 'kaiojit' has no attribute {name!r}") from None
    globals()[name] = value
    return value


# kaiojit.runtime.__all__, known without importing the runtime (tests/test_imports.py checks
# that the two agree)
_RUNTIME_NAMES = frozenset({
    "can_access_peer", "copy_peer", "enable_peer_access", "CudaGraph", "DeviceArray",
    "DeviceLimits", "Event", "GpuBackend", "LaunchConfig", "LoadedKernel", "Module",
    "ModuleKernel", "Stream", "TensorMap", "as_device_array", "backend", "check_launch_config",
    "default_stream", "device", "device_array", "device_array_like", "device_count",
    "device_compute_capability", "driver_version", "max_ptx_version", "ptx_version_for_driver",
    "forall_config", "get_backend", "is_cuda_available", "load_kernel", "register_backend",
    "select_device", "set_backend", "sm_count", "suggest_block_size", "synchronize", "to_device",
    "typeof",
})
_LAZY = frozenset({"reduce", "vectorize", "guvectorize", "Config", "autotune", "occupancy",
                   "runtime"})


def __dir__() -> list[str]:
    """The whole public API, lazy names included (``kj.to_d<TAB>`` completes in a fresh
    notebook): this module's names, its submodules, the kernel functions of the intrinsic
    registry and the runtime's names (importing the runtime does not touch the driver)."""
    import importlib

    from .kir.intrinsics import public_names

    runtime = importlib.import_module("kaiojit.runtime")
    names = set(globals()) | set(__all__) | _SUBMODULES | _LAZY | public_names()
    names |= set(runtime.__all__)
    return sorted(n for n in names if not n.startswith("_"))
