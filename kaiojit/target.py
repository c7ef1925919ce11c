"""What a compile is for and what it hands the runtime: shared by the compiler and the runtime.

Neither the compiler nor the runtime owns these facts, so they live here, below both:

* ``TargetSpec``: the target of a compile ('nvptx' with an arch and PTX version, or 'host').
  A backend answers its own (``backend.target_spec(device)``); the compiler keys its caches on it.
* The PTX ISA versions each arch needs, and the highest LLVM writes.
* ``HostImage``: what a compile for the host produces (native object code and the facts the
  cpu backend needs to run it), and the host ABI: the context and launch-state words that
  generated host code and the cpu backend's runner share.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """What a compile is for: 'nvptx' with an arch and PTX version, or 'host'."""

    kind: str = "nvptx"
    arch: str = "sm_90"
    ptx_version: int = 80
    sanitize: bool = False  # host: the checked variant (kaiojit/lower/host_sanitize.py)


# PTX ISA version each sm needs at least, and what LLVM 22 can write
_MIN_PTX = {70: 60, 75: 63, 80: 70, 86: 71, 87: 74, 89: 78, 90: 78, 100: 86, 101: 86, 103: 88,
            110: 90, 120: 87, 121: 88}
LLVM_MAX_PTX = 88
MIN_ARCH = min(_MIN_PTX)  # the oldest GPU kaiojit writes PTX for (sm_70)


# the compute capabilities LLVM 22's NVPTX backend knows (an 'a' suffix from sm_90 on, 'f' from
# sm_100 on): an arch given to compile_ptx/compile_llvm is one of these
KNOWN_CC = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120,
            121)


def check_arch(arch: object) -> None:
    """A ValueError naming the accepted archs unless ``arch`` is one (``'sm_90'``,
    ``'sm_90a'``, ``'compute_90'``). Only where the user names an arch: a device reports its
    own, which may be newer than this table."""
    ok = False
    if isinstance(arch, str) and arch.startswith(("sm_", "compute_")):
        tail = arch.split("_", 1)[1]
        suffix = tail[-1] if tail[-1:] in ("a", "f") else ""
        digits = tail[:-1] if suffix else tail
        if digits.isdigit() and int(digits) in KNOWN_CC and digits == str(int(digits)):
            cc = int(digits)
            ok = not suffix or (suffix == "a" and cc >= 90) or (suffix == "f" and cc >= 100)
    if not ok:
        known = ", ".join(f"sm_{cc}" for cc in KNOWN_CC)
        raise ValueError(f"arch {arch!r} is not a GPU architecture kaiojit compiles for; give one "
                         f"of {known} (or compute_NN; sm_90a, sm_100a ... for arch-specific "
                         "features)")


def parse_arch(arch: str) -> int:
    """'sm_90' (or 'sm_90a', 'compute_90') -> 90."""
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    if not arch.startswith(("sm_", "compute_")) or not digits:
        raise ValueError(f"arch must look like 'sm_90', got {arch!r}")
    return int(digits)


def ptx_version_for(arch: str, driver_max: int | None = None) -> int:
    """The PTX ISA version (e.g. 80 for 8.0) to write for ``arch`` under a driver's limit."""
    cc = parse_arch(arch)
    need = max((v for k, v in _MIN_PTX.items() if k <= cc), default=60)
    version = max(need, 80 if cc >= 90 else need)
    if driver_max is not None:
        version = min(version, driver_max)
    return min(version, LLVM_MAX_PTX)



# --- the host image and its ABI ----------------------------------------------------------------

@dataclass(slots=True)
class HostImage:
    """A kernel compiled for the host: native object code and what running it needs.

    ``entry`` is the driver ``void entry(slots, ctx, first_block, end_block)``; ``sites`` are
    plain dicts (kind, filename, line, col and details) that name where a fault came from.
    """

    object_code: bytes
    entry: str
    uses_block_mode: bool
    static_shared_bytes: int
    sites: list[dict] = field(default_factory=list)
    symbols: tuple[str, ...] = ()  # C functions (libc, libm) the code calls beyond the usual
    library: str = ""  # an exported kernel (kaiojit.aot): the shared library holding the entry


# --- the per-worker context: an array of i64 ---------------------------------------------------
CTX_GRID = 0          # gridDim x, y, z
CTX_BLOCK = 3         # blockDim x, y, z
CTX_BLOCK_IDX = 6     # blockIdx x, y, z
CTX_SHARED = 9        # this worker's shared memory (static arrays, then the dynamic buffer)
CTX_DYN_BYTES = 10    # dynamic shared memory bytes of the launch
CTX_EXITED = 11       # block mode: the kernel's per-thread status bytes (3 = returned)
CTX_LAUNCH = 12       # the launch state shared by all workers (LAUNCH_* below)
CTX_CHECK = 13        # checked variant: this worker's sanitizer state (SAN_* below)
CTX_STACK_TOP = 14    # checked variant: the driver's frame address (local arrays lie below)
CTX_NAMED_BARRIERS = 15  # block mode: the block's named barriers' arrival counts (i64 each)
NAMED_BARRIERS = 16   # bar.sync ids 0 to 15
CTX_CLUSTER_DIM = 16  # the cluster's shape in blocks x, y, z (1, 1, 1 without a cluster)
CTX_CLUSTER_TOKEN = 19  # this block's last cluster-barrier arrival (the counter before it)
CTX_CLUSTER_STATE = 20  # the cluster's state, shared by its blocks (CLUSTER_* below)
CTX_WORDS = 24

# --- a cluster's state on the host: an array of i64 shared by the blocks of one cluster -------
CLUSTER_BARRIER = 0   # the cluster barrier: its phase (bit 63) and the arrivals in it
CLUSTER_LIVE = 1      # the cluster's blocks that have not returned (deadlock detection:
CLUSTER_EPOCH = 2     # bumped when a block starts or stops waiting, or returns
CLUSTER_FAILS = 3     # epoch << 32 | the waiting blocks that saw no progress in that epoch)
CLUSTER_SHARED = 4    # the shared memory of the cluster's blocks, by rank (CLUSTER_MAX words)
CLUSTER_MAX = 8       # the most blocks a portable cluster holds
CLUSTER_WORDS = CLUSTER_SHARED + CLUSTER_MAX

# --- the launch state: the first error and the print buffer ------------------------------------
LAUNCH_ERROR = 0      # 0, or the kind (ERR_*) of the first error, claimed with a cmpxchg
LAUNCH_SITE = 1       # index into HostImage.sites
LAUNCH_INDEX = 2
LAUNCH_EXTENT = 3
LAUNCH_BLOCK = 4      # linear block index
LAUNCH_THREAD = 5     # linear thread index in the block
LAUNCH_PRINT_USED = 6
LAUNCH_PRINT_CAP = 7
LAUNCH_PRINT_BUF = 8
LAUNCH_GRID_BARRIER = 9  # the grid barrier's counter (kj.cg), zeroed by every launch
LAUNCH_WORDS = 16

# The host grid barrier's sleep (kaiojit/intrinsics/cg.py, kaiojit/runtime/blockthreads.py):
# Linux's futex(2) by syscall number, None where it is not known (the waiters then yield).
SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(
    platform.machine().lower())
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129

ERR_BOUNDS = 1
ERR_DIVERGENT_BARRIER = 2
ERR_TMA = 3              # a tensor copy refused (LAUNCH_INDEX: its kaiojit.tma_host status)
ERR_MBARRIER_STUCK = 4   # an mbarrier wait no thread of the block can complete any more
ERR_ASSERT = 5           # a failed assert under debug=True
ERR_NAMED_BARRIER = 6    # a named barrier no thread can complete any more, or over its count
ERR_CLUSTER_RANK = 7     # a block rank not in the cluster (LAUNCH_INDEX: it, EXTENT: the size)
ERR_CLUSTER_STUCK = 8    # a cluster barrier wait no block of the cluster can complete any more
ERR_RAISE = 9            # a kernel's raise statement under debug=True (its site: the exception)

# --- the GPU's debug fault record (kaiojit/lower/gpu_faults.py, kaiojit/runtime/faults.py) ---
FAULT_GLOBAL = "kaiojit_fault"  # a module global of FAULT_WORDS i64 words

FAULT_KIND = 0        # 0, ERR_BOUNDS, ERR_ASSERT or ERR_RAISE, claimed with a cmpxchg (the first fault wins)
FAULT_SITE = 1        # index into CompiledKernel.fault_sites
FAULT_INDEX = 2
FAULT_EXTENT = 3
FAULT_BLOCK = 4       # blockIdx x, y, z
FAULT_THREAD = 7      # threadIdx x, y, z
FAULT_WORDS = 10

# --- the checked variant's per-worker sanitizer state: an array of i64 --------------------------
# An access is packed in one word: epoch << 32 | thread << SAN_THREAD_SHIFT | site.
SAN_EPOCH = 0         # this worker's epoch: +1 at every block start, barrier and syncwarp
SAN_BLOCK_EPOCH = 1   # the epoch the current block started at
SAN_LAUNCH_EPOCH = 2  # the epoch the launch started at
SAN_BLOCK = 3         # the current block's linear index
SAN_SHARED_BASE = 4   # the worker's shared memory, and its shadow (4 words per byte offset)
SAN_SHARED_BYTES = 5
SAN_SHARED_SHADOW = 6
SAN_TABLE = 7         # the global-memory table (8 words per entry, direct-mapped by address)
SAN_TABLE_MASK = 8    # its entries - 1
SAN_UNINIT = 9        # kj.device_array ranges not fully written: (base, end, bitmap) triples
                      # (the bitmap: a byte per byte, 1 where written)
SAN_UNINIT_COUNT = 10
SAN_COUNTS = 11       # findings of each kind (SAN_COUNTS + kind - 1), kinds SAN_KIND_*
SAN_QUIET = 15        # this launch: which of host_sanitize.quiet_params' arrays need no racecheck
SAN_KIND = 16         # the first finding: its kind (0: none)
SAN_SITE = 17
SAN_THREAD = 18
SAN_FIRST_BLOCK = 19
SAN_DETAIL = 20       # bounds: the dimension; race: the hazard; sync: the lanes at fault
SAN_OTHER = 21        # race: the other access (packed), its block
SAN_OTHER_BLOCK = 22
SAN_NDIM = 23
SAN_INDEX = 24        # the access's indices (8 words) and the array's shape (8 words)
SAN_SHAPE = 32
SAN_MAX_DIMS = 8
SAN_SCRATCH = 40      # a shadow lookup's finding: the other access (packed) and its block
SAN_BARRIER_EPOCH = 42  # the epoch of the block's last block-level barrier (or its start)
SAN_WARP_SYNC = 43    # per thread of the block: the epoch of its last syncwarp (SAN_MAX_THREADS)
SAN_WORDS = 48
SAN_MAX_THREADS = 1024
SAN_THREAD_SHIFT = 21
SAN_SITE_MASK = (1 << SAN_THREAD_SHIFT) - 1
SAN_KIND_BOUNDS, SAN_KIND_RACE, SAN_KIND_INIT, SAN_KIND_SYNC = 1, 2, 3, 4
HAZARD_RAW, HAZARD_WAR, HAZARD_WAW, HAZARD_BLOCKS = 1, 2, 3, 4
INIT_SHARED, INIT_GLOBAL = 5, 6  # an initcheck finding's detail: which memory

STATUS_RETURNED = 3   # block mode: a thread's status byte once it returned
HIDDEN_FAST = 4       # (ctx, tid.x, tid.y, tid.z) before a fast function's own parameters
PRINT_LINE_BYTES = 512


# --- the host machine --------------------------------------------------------------------------

# CPU features whose bfloat16 conversion (VCVTNEPS2BF16) flushes subnormal inputs and results
# to zero whatever MXCSR says; the GPU's cvt.rn.bf16.f32 keeps them. Without these features
# LLVM rounds by __truncsfbf2 (kaiojit/hostsyms.py), which keeps them too.
FLUSHING_FEATURES = ("avx512bf16", "avxneconvert")


@functools.lru_cache(maxsize=1)
def host_cpu_features() -> str:
    """This CPU's features for host code, less ``FLUSHING_FEATURES``, as LLVM spells them."""
    from llvmlite import binding as llvm

    features = llvm.get_host_cpu_features()
    for name in FLUSHING_FEATURES:
        if name in features:
            features[name] = False
    return features.flatten()


@functools.lru_cache(maxsize=1)
def host_target_machine():
    """The target machine host kernels are compiled with: this CPU and its features, O3."""
    from llvmlite import binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=host_cpu_features(),
        opt=3, codemodel="jitdefault", jit=True)


@functools.lru_cache(maxsize=1)
def host_machine_id() -> str:
    """What host object code depends on besides the compile: the triple, the CPU and its
    features, and LLVM's version (part of a host kernel's disk-cache key, so a cache shared
    between machines never hands one CPU code compiled for another)."""
    from llvmlite import binding as llvm

    return (f"{llvm.get_process_triple()}|{llvm.get_host_cpu_name()}|"
            f"{host_cpu_features()}|llvm{llvm.llvm_version_info}")


@functools.lru_cache(maxsize=1)
def register_host_symbols() -> None:
    """Make libm's and libc's functions known to MCJIT's symbol resolution by address."""
    from llvmlite import binding as llvm

    from .hostsyms import MATH_FUNCTIONS

    libm = ctypes.CDLL("libm.so.6")
    libc = ctypes.CDLL(None)
    names = ["snprintf", *sorted(MATH_FUNCTIONS)]
    for name in names:
        for lib in (libm, libc):
            try:
                addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            except AttributeError:
                continue
            llvm.add_symbol(name, addr)
            break


@functools.lru_cache(maxsize=None)
def link_c_functions(names: tuple[str, ...]) -> None:
    """Make C functions of this process (libc, libm) that host code calls known to MCJIT:
    only those of the allow-list (kaiojit/hostsyms.py), whatever an image names."""
    from llvmlite import binding as llvm

    from .hostsyms import host_symbol_allowed

    refused = [name for name in names if not host_symbol_allowed(name)]
    if refused:
        raise RuntimeError(f"host code names the C function(s) {', '.join(refused)}, which "
                           "kaiojit's code never calls: refused")
    libs = (ctypes.CDLL(None), ctypes.CDLL("libm.so.6"))
    for name in names:
        for lib in libs:
            fn = getattr(lib, name, None)
            if fn is not None:
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
                break
        else:
            raise RuntimeError(f"host code calls the C function {name}, which this process "
                               "does not have")


# An elementwise kernel's coarse entry (kaiojit/kir/coarsen.py): the compiler names it and
# builds it on demand (kaiojit.compiler.CoarseEntry), the runtime launches large grids with it.
COARSE_FACTOR = 4


def coarse_entry(symbol: str) -> str:
    """The name of the coarse entry of the kernel entry ``symbol``."""
    return f"{symbol}__coarse{COARSE_FACTOR}"

