"""The names kernels use (``kj.grid``, ``kj.threadIdx``, ``kj.shared.array``, ``kj.atomic.add``...).

These objects only mark what a kernel refers to: the frontend recognises them by identity and
types the call. Called from ordinary Python they raise, as numba's do.
"""

from __future__ import annotations


class KernelBuiltin:
    """A function usable only inside a kernel or device function."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"kj.{self.name}() can only be called inside a @kj.jit kernel or device function"
        )

    def __repr__(self) -> str:
        return f"<kaiojit builtin {self.name}>"


class Dim3Register:
    """``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``: .x, .y, .z inside kernels."""

    __slots__ = ("name", "x", "y", "z")

    def __init__(self, name: str):
        self.name = name
        self.x = KernelBuiltin(f"{name}.x")
        self.y = KernelBuiltin(f"{name}.y")
        self.z = KernelBuiltin(f"{name}.z")

    def __repr__(self) -> str:
        return f"<kaiojit special register {self.name}>"


class Namespace:
    """A group of builtins, such as ``kj.shared`` or ``kj.atomic``."""

    def __init__(self, prefix: str, names: str):
        self._prefix = prefix
        for name in names.split():
            setattr(self, name, KernelBuiltin(f"{prefix}.{name.rstrip('_')}"))

    def __repr__(self) -> str:
        return f"<kaiojit namespace {self._prefix}>"


threadIdx = Dim3Register("threadIdx")
blockIdx = Dim3Register("blockIdx")
blockDim = Dim3Register("blockDim")
gridDim = Dim3Register("gridDim")
# thread-block clusters (sm_90): the cluster's index in the grid, its shape in blocks, the
# block's index in it and the grid's shape in clusters (kaiojit/intrinsics/cluster.py)
clusterIdx = Dim3Register("clusterIdx")
clusterDim = Dim3Register("clusterDim")
clusterBlockIdx = Dim3Register("clusterBlockIdx")
clusterGridDim = Dim3Register("clusterGridDim")
laneid = KernelBuiltin("laneid")
warpsize = 32

grid = KernelBuiltin("grid")
gridsize = KernelBuiltin("gridsize")

shared = Namespace("shared", "array")
local = Namespace("local", "array")
const = Namespace("const", "array_like")
cg = Namespace("cg", "this_grid")  # cooperative groups: kj.cg.this_grid().sync()
atomic = Namespace("atomic", "add sub max min nanmax nanmin exch and_ or_ xor inc dec cas")
wgmma = Namespace(
    "wgmma", "fence commit_group wait_group descriptor mma_async fence_proxy_async acc_to_a")

syncthreads = KernelBuiltin("syncthreads")
syncthreads_count = KernelBuiltin("syncthreads_count")
syncthreads_and = KernelBuiltin("syncthreads_and")
syncthreads_or = KernelBuiltin("syncthreads_or")
syncwarp = KernelBuiltin("syncwarp")
threadfence = KernelBuiltin("threadfence")
threadfence_block = KernelBuiltin("threadfence_block")
threadfence_system = KernelBuiltin("threadfence_system")

shfl_sync = KernelBuiltin("shfl_sync")
shfl_up_sync = KernelBuiltin("shfl_up_sync")
shfl_down_sync = KernelBuiltin("shfl_down_sync")
shfl_xor_sync = KernelBuiltin("shfl_xor_sync")
all_sync = KernelBuiltin("all_sync")
any_sync = KernelBuiltin("any_sync")
eq_sync = KernelBuiltin("eq_sync")  # numba's: the predicate is the same in every member lane
ballot_sync = KernelBuiltin("ballot_sync")
activemask = KernelBuiltin("activemask")

fma = KernelBuiltin("fma")
popc = KernelBuiltin("popc")
clz = KernelBuiltin("clz")
ffs = KernelBuiltin("ffs")
brev = KernelBuiltin("brev")


class StaticRange(KernelBuiltin):
    """``for i in kj.static_range(n)``: the loop is unrolled when the kernel is typed, so ``i``
    is a constant in each copy of the body (a tuple index, a fragment element). Outside a
    kernel it is ``range``."""

    __slots__ = ()

    def __call__(self, *args):
        return range(*args)


static_range = StaticRange("static_range")


class LiteralUnroll(KernelBuiltin):
    """``for x in kj.literal_unroll(tup)`` (numba's ``literal_unroll``): the loop over a tuple
    whose items may differ in type (arrays of several ranks) is unrolled when the kernel is
    typed, each copy of the body typed with its own item. Outside a kernel it is the tuple."""

    __slots__ = ()

    def __call__(self, container):
        return container


literal_unroll = LiteralUnroll("literal_unroll")
