"""numba.cuda's public namespace on kaiojit: ``from kaiojit import cuda`` in place of
``from numba import cuda``.

The kernel language's names are kaiojit's own objects (``cuda.grid is kj.grid``); the type
names are :mod:`kaiojit.types`' (``cuda.float32``, ``cuda.void``, ``cuda.types.Array``); the
host API (streams, events, devices, pinned/mapped/managed arrays) is in :mod:`.host` and the
compile entry points, which return numba's shapes (``compile_ptx`` gives ``(ptx, restype)``),
in :mod:`.decorators`. What differs from numba is listed in docs/porting.md.
"""

from __future__ import annotations

import importlib
import math

from .. import language as _L
from .. import types  # noqa: F401  numba.cuda.types
from ..errors import CompileError, KernelError, TypingError  # noqa: F401
from .args import In, InOut, Out  # noqa: F401
from .atomics import atomic  # noqa: F401
from .decorators import (  # noqa: F401
    compile,
    compile_all,
    compile_for_current_device,
    compile_ptx,
    compile_ptx_for_current_device,
    jit,
    vectorize,
)
from .host import (  # noqa: F401
    as_cuda_array,
    close,
    current_context,
    default_stream,
    defer_cleanup,
    detect,
    device_array,
    device_array_like,
    event,
    event_elapsed_time,
    external_stream,
    from_cuda_array_interface,
    get_current_device,
    gpus,
    is_available,
    is_bfloat16_supported,
    is_cuda_array,
    is_float16_supported,
    is_supported_version,
    legacy_default_stream,
    list_devices,
    managed_array,
    managed_array_like,
    mapped,
    mapped_array,
    mapped_array_like,
    per_thread_default_stream,
    pinned,
    pinned_array,
    pinned_array_like,
    profile_start,
    profile_stop,
    profiling,
    require_context,
    select_device,
    stream,
    synchronize,
    to_device,
)
from .linkable import (  # noqa: F401
    LTOIR,
    Archive,
    Cubin,
    CUSource,
    Fatbin,
    LinkableCode,
    Object,
    PTXSource,
)
from .types import *

del bf16  # noqa: F821  numba.cuda.bf16 is the bfloat16 library (a submodule), not types.bf16

threadIdx, blockIdx, blockDim, gridDim = _L.threadIdx, _L.blockIdx, _L.blockDim, _L.gridDim
laneid, warpsize = _L.laneid, _L.warpsize
grid, gridsize = _L.grid, _L.gridsize
shared, local, const, cg = _L.shared, _L.local, _L.const, _L.cg
syncthreads, syncthreads_count = _L.syncthreads, _L.syncthreads_count
syncthreads_and, syncthreads_or, syncwarp = _L.syncthreads_and, _L.syncthreads_or, _L.syncwarp
threadfence, threadfence_block = _L.threadfence, _L.threadfence_block
threadfence_system = _L.threadfence_system
shfl_sync, shfl_up_sync, shfl_down_sync = _L.shfl_sync, _L.shfl_up_sync, _L.shfl_down_sync
shfl_xor_sync, all_sync, any_sync = _L.shfl_xor_sync, _L.all_sync, _L.any_sync
eq_sync = _L.eq_sync
ballot_sync, activemask = _L.ballot_sync, _L.activemask
fma, popc, clz, ffs, brev = _L.fma, _L.popc, _L.clz, _L.ffs, _L.brev
cbrt = math.cbrt  # numba's cuda.cbrt: the kernel language's math.cbrt



HAS_NUMBA = False  # kaiojit does not need numba: tests that need numba's CPU jit skip
implementation = "kaiojit"
CudaSupportError = RuntimeError
KernelRuntimeError = KernelError

def declare_device(name, sig, link=None, use_cooperative: bool = False, abi: str = "numba",
                   **kwargs):
    """numba's ``cuda.declare_device``: a foreign device function; ``link`` may hold
    ``cuda.CUSource`` / ``cuda.PTXSource`` objects as well as file paths."""
    from .. import declare_device as declare
    from .linkable import link_paths

    return declare(name, sig, link_paths(link) or None, abi=abi, **kwargs)


_FROM_KAIOJIT = frozenset({
    "reduce", "Event", "Stream", "DeviceArray", "nanosleep",
    "ldca", "ldcg", "ldcs", "ldlu", "ldcv", "stcg", "stcs", "stwb", "stwt",  # cache hints
})
_SUBMODULES = frozenset({"host", "decorators", "types", "compiler", "random", "linkable", "fp16",
                         "bf16", "args", "devicearray", "ufuncs", "kernels"})


def __getattr__(name: str):
    # loaded on first use: the library kernels (vectorize, reduce) need NumPy and the runtime
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "guvectorize":
        from .ufuncs import guvectorize

        return guvectorize
    if name in ("selp", "lanemask_lt"):
        from . import select

        return getattr(select, name)
    if name == "Reduce":
        name = "reduce"
    if name in _FROM_KAIOJIT:
        import kaiojit
        value = globals()[name] = getattr(kaiojit, name)
        return value
    raise AttributeError(f"module 'kaiojit.cuda' has no attribute {name!r} (numba.cuda's "
                         "names kaiojit lacks are listed in docs/porting.md)")
