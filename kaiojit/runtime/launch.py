"""Launching compiled kernels: configuration checks, :class:`ModuleKernel`, occupancy.

A :class:`ModuleKernel` is the :class:`~kaiojit.runtime.backend.LoadedKernel` of backends
that load modules (cuda, mock): one compiled image (PTX, entry name, signature), loaded lazily
on each device it is launched on. A launch normalizes and checks the configuration (cached per
distinct configuration), packs the arguments into this thread's slots, and hands them to the
backend. ``KAIOJIT_DEBUG_SYNC=1`` synchronizes after every launch so an asynchronous fault is
raised at the launch that caused it.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from kaiojit import env
from kaiojit import types as kt
from kaiojit.errors import CudaError, LaunchError
from kaiojit.runtime import cooperative
from kaiojit.runtime.args import ArgPacker, StagedArray
from kaiojit.runtime.backend import (
    DeviceLimits,
    Dim3,
    GpuBackend,
    LaunchConfig,
    LoadedKernel,
    launch_context,
)
from kaiojit.runtime.graph import forbid_in_capture
from kaiojit.runtime.native import fastlaunch
from kaiojit.runtime.slots import ThreadSlots
from kaiojit.runtime.stream import stream_handle
from kaiojit.runtime.torchstream import StreamChoice
from kaiojit.target import COARSE_FACTOR

DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024
CONFIG_CACHE_LIMIT = 256  # checked configurations kept per kernel (ConfigCache)
# a launch of at least this many threads (grid.x times the block's) takes the kernel's coarse
# entry, where it has one (kaiojit/kir/coarsen.py): a quarter of the blocks still fill the GPU
# several times over (the H200 holds 132 x 2048 threads). KAIOJIT_COARSE_MIN_THREADS (read
# once, at import) changes it: 0 sends every launch it can through the coarse entry (tests).
COARSE_MIN_THREADS = env.get("KAIOJIT_COARSE_MIN_THREADS")


class KernelImage(Protocol):
    """What the compiler hands the runtime."""

    name: str
    ptx: str
    signature: Any  # kaiojit.types.Signature
    arg_names: tuple[str, ...]
    static_shared_bytes: int
    # optional: ``coarse``, the kernel's coarse entry (kaiojit.compiler.CoarseEntry: ``name``
    # and ``ptx``, compiled on first use), or None


# --- configuration ------------------------------------------------------------------------------

def normalize_dim3(value: Any, what: str, kernel: str = "") -> Dim3:
    """An int or a tuple of 1 to 3 ints as a 3-tuple, missing dimensions 1."""
    where = f"kernel {kernel!r}: " if kernel else ""
    if isinstance(value, (tuple, list)):
        dims = tuple(value)
    else:
        dims = (value,)
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"{where}{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not hasattr(d, "__index__"):
            raise LaunchError(f"{where}{what} must be an int or a tuple of 1 to 3 ints, "
                              f"got {value!r}")
        out.append(int(d.__index__()))
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]


def launch_bound(image: Any) -> int | None:
    """The thread count of a kernel's ``launch_bounds`` option, None where it has none."""
    bounds = getattr(getattr(image, "options", None), "launch_bounds", ())
    return bounds[0] if bounds else None


def check_launch_config(grid: Any, block: Any, shared_mem: Any, cluster: Any,
                        limits: DeviceLimits, kernel: str = "", static_shared: int = 0,
                        max_threads_for_kernel: int | None = None,
                        launch_bound: int | None = None) -> LaunchConfig:
    """Normalize and check a launch configuration; :class:`LaunchError` names what is wrong.
    ``launch_bound``: the kernel's ``launch_bounds`` thread count, if it declared one."""
    where = f"kernel {kernel!r}: " if kernel else ""
    g = normalize_dim3(grid, "grid", kernel)
    b = normalize_dim3(block, "block", kernel)
    for what, dims in (("grid", g), ("block", b)):
        for axis, n in zip("xyz", dims):
            if n < 1:
                raise LaunchError(f"{where}{what} {dims} has {what}.{axis} = {n}; every "
                                  "dimension must be at least 1")
    threads = b[0] * b[1] * b[2]
    if threads > limits.max_threads_per_block:
        raise LaunchError(f"{where}block {b} has {threads} threads; the device allows at most "
                          f"{limits.max_threads_per_block} threads per block")
    for axis, n, most in zip("xyz", b, limits.max_block):
        if n > most:
            raise LaunchError(f"{where}block {b} has block.{axis} = {n}; the device allows at "
                              f"most {most}")
    if launch_bound is not None and threads > launch_bound:
        raise LaunchError(f"{where}block {b} has {threads} threads; this kernel can run at "
                          f"most {launch_bound} per block (its launch_bounds)")
    if max_threads_for_kernel is not None and threads > max_threads_for_kernel:
        raise LaunchError(f"{where}block {b} has {threads} threads; this kernel can run at "
                          f"most {max_threads_for_kernel} per block (its register use limits it)")
    for axis, n, most in zip("xyz", g, limits.max_grid):
        if n > most:
            raise LaunchError(f"{where}grid {g} has grid.{axis} = {n}; the device allows at "
                              f"most {most}")
    if isinstance(shared_mem, bool) or not hasattr(shared_mem, "__index__"):
        raise LaunchError(f"{where}shared memory must be an int number of bytes, "
                          f"got {shared_mem!r}")
    shm = int(shared_mem.__index__())
    if shm < 0:
        raise LaunchError(f"{where}shared memory must be >= 0 bytes, got {shm}")
    if static_shared > limits.max_shared_per_block:  # ptxas refuses it: "too much shared data"
        raise LaunchError(f"{where}{static_shared} bytes of static shared memory exceed the "
                          f"{limits.max_shared_per_block} bytes a kernel may declare "
                          "statically (more must be dynamic shared memory)")
    if shm + static_shared > limits.max_shared_per_block_optin:
        static = f" + {static_shared} static" if static_shared else ""
        raise LaunchError(f"{where}{shm} bytes of dynamic shared memory{static} exceed the "
                          f"device's {limits.max_shared_per_block_optin} bytes per block")
    c = None
    if cluster is not None:
        c = normalize_dim3(cluster, "cluster", kernel)
        size = c[0] * c[1] * c[2]
        if limits.max_cluster_size == 0:
            raise LaunchError(f"{where}thread-block clusters need a device of compute "
                              "capability 9.0 or newer")
        if min(c) < 1 or size > limits.max_cluster_size:
            raise LaunchError(f"{where}cluster {c} has {size} blocks; a cluster holds 1 to "
                              f"{limits.max_cluster_size} blocks")
        for axis, n, k in zip("xyz", g, c):
            if n % k:
                raise LaunchError(f"{where}grid.{axis} = {n} is not a multiple of "
                                  f"cluster.{axis} = {k}")
    return LaunchConfig(g, b, shm, c)


def debug_sync(backend: GpuBackend, stream: int, name: str, config: LaunchConfig) -> None:
    """``KAIOJIT_DEBUG_SYNC``: wait for the launch; a fault names it and where it came from."""
    forbid_in_capture(f"kernel {name!r}: KAIOJIT_DEBUG_SYNC synchronizes after the launch")
    try:
        backend.stream_synchronize(stream)
    except CudaError as e:
        import traceback  # a fault's report only

        where = "".join(traceback.format_stack()[:-2])
        context = (f"{launch_context(name, config.grid, config.block, config.shared_mem)}; "
                   f"KAIOJIT_DEBUG_SYNC caught this fault right after that launch, which was "
                   f"made at:\n{where}")
        raise CudaError(e.name, e.text, context, e.code) from None


class ConfigCache:
    """A kernel's checked launch configurations by what the launch asked (grid, block, dynamic
    shared bytes, cluster and device), the least recently used dropped past ``limit``: a
    program sweeping dynamic shared sizes or grids keeps a bounded number. ``get`` raises
    ``TypeError`` for an unhashable key (lists), which the caller checks every time."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = CONFIG_CACHE_LIMIT):
        self._entries: OrderedDict[Any, LaunchConfig] = OrderedDict()
        self.limit = limit

    def get(self, key: Any) -> LaunchConfig | None:
        entries = self._entries
        config = entries.get(key)
        if config is not None:
            try:
                entries.move_to_end(key)
            except KeyError:  # another thread dropped it meanwhile
                pass
        return config

    def put(self, key: Any, config: LaunchConfig) -> None:
        entries = self._entries
        entries[key] = config
        while len(entries) > self.limit:
            try:
                entries.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break

    def __len__(self) -> int:
        return len(self._entries)


# --- one kernel on one device -------------------------------------------------------------------

class _DeviceKernel:
    """A ModuleKernel's module and function on one device."""

    __slots__ = ("device", "module", "fn", "limits", "max_threads", "static_shared",
                 "dynamic_limit", "coarse_tried", "coarse_fn", "coarse_max_threads",
                 "__weakref__")

    def __init__(self, backend: GpuBackend, image: KernelImage, device: int):
        self.device = device
        files = _linked_files(image)
        if files is None:  # an exported kernel (kaiojit.aot) may bring its cubin
            self.module = backend.load_module(getattr(image, "cubin", None) or image.ptx, device)
        else:  # foreign device code (kj.declare_device, link=): linked first
            from kaiojit.runtime.linker import load_linked
            self.module = load_linked(backend, image.ptx, files, device)
        weakref.finalize(self, _unload, backend, self.module, device).atexit = False
        self.fn = backend.get_function(self.module, image.name, device)
        attrs = backend.function_attributes(self.fn)
        self.limits = backend.device_limits(device)
        self.max_threads = attrs.get("max_threads_per_block")
        self.static_shared = max(attrs.get("shared_bytes", 0), image.static_shared_bytes)
        self.dynamic_limit = DEFAULT_DYNAMIC_SHARED_LIMIT - self.static_shared
        # the coarse entry's module and function, loaded when a launch first takes it
        self.coarse_tried, self.coarse_fn, self.coarse_max_threads = False, None, 0

    def load_coarse(self, backend: GpuBackend, image: KernelImage) -> None:
        """Compile (once per kernel) and load (once per device) the coarse entry. A failure
        leaves the kernel's own entry for every launch, with a warning naming it."""
        self.coarse_tried = True
        entry = image.coarse
        try:
            # an exported kernel's coarse entry (kaiojit.aot) may bring its cubin
            module = backend.load_module(getattr(entry, "cubin", None) or entry.ptx, self.device)
            weakref.finalize(self, _unload, backend, module, self.device).atexit = False
            fn = backend.get_function(module, entry.name, self.device)
            threads = backend.function_attributes(fn).get("max_threads_per_block") or 0
        except Exception as e:  # noqa: BLE001 - the kernel's own entry still runs the launch
            warnings.warn(f"kernel {image.name!r}: its coarse entry is unavailable ({e}); "
                          "launches use the kernel's own entry", RuntimeWarning, stacklevel=4)
            return
        self.coarse_fn, self.coarse_max_threads = fn, threads


def _linked_files(image: KernelImage) -> tuple[str, ...] | None:
    """The files a kernel links, or None for a kernel that links nothing (the usual case)."""
    options = getattr(image, "options", None)
    link = getattr(options, "link", ())
    if not link and ".extern .func" not in image.ptx:
        return None
    from kaiojit.linking import link_files, undefined_declarations

    files = link_files(image.ptx, link)
    return files if files or undefined_declarations(image.ptx, files) else None


def _unload(backend: GpuBackend, module: Any, device: int) -> None:
    if not backend.closing:
        try:
            backend.unload_module(module, device)
        except Exception:
            pass


class ModuleKernel:
    """A compiled kernel ready to launch on any device of a backend that loads modules.

    ``slots`` are its argument slots, one copy per thread (``slots.get()``)."""

    def __init__(self, backend: GpuBackend, image: KernelImage):
        self.backend = backend
        self.image = image
        self.name = getattr(image, "py_name", None) or image.name  # the user's, for messages
        # how many of the user's blocks a block of the coarse entry does (0: none)
        self.coarse_factor = COARSE_FACTOR if getattr(image, "coarse", None) is not None else 0
        self.packer = ArgPacker(image.signature.args, image.arg_names,
                                trailing=bool(self.coarse_factor),
                                written=getattr(image, "written_arrays", None))
        self.slots = ThreadSlots(self.packer.layout)
        self.fault_sites = getattr(image, "fault_sites", ())  # debug=True: a fault record
        # a debug kernel with a ``raise`` (numba's exceptions, kaiojit/frontend/raising.py):
        # its launch raises what it recorded, so the launch waits for it, as numba's debug
        # launches read their error code back after every launch
        self.raises_at_launch = any(site.get("kind") == "raise" for site in self.fault_sites)
        self.launch_bound = launch_bound(image)
        self._devices: dict[int, _DeviceKernel] = {}
        self._configs = ConfigCache()
        self._lock = threading.Lock()
        self.cooperative = cooperative.is_cooperative(image)  # it synchronizes its grid
        # the arguments that are arrays: a launch naming no stream follows PyTorch's current
        # stream where one of them is a CUDA tensor (kaiojit.runtime.torchstream)
        self.array_at = tuple(i for i, t in enumerate(image.signature.args)
                              if isinstance(t, kt.ArrayType))

    def max_cooperative_grid_blocks(self, block: Any, dynamic_shared: int = 0) -> int:
        """The most blocks of ``block`` threads that a cooperative launch may have here."""
        device = self.backend.current_device()
        return cooperative.max_cooperative_grid_blocks(
            self.backend, self.on_device(device).fn, block, dynamic_shared, device)

    def on_device(self, device: int) -> _DeviceKernel:
        dk = self._devices.get(device)
        if dk is None:
            forbid_in_capture(f"kernel {self.name!r}: its first launch on device {device} "
                              "loads its module")
            with self._lock:
                dk = self._devices.get(device)
                if dk is None:
                    dk = self._devices[device] = _DeviceKernel(self.backend, self.image, device)
        return dk

    def attributes(self, device: int | None = None) -> dict[str, int]:
        """Registers, shared, local and constant bytes of the kernel on a device."""
        dev = self.backend.current_device() if device is None else device
        return self.backend.function_attributes(self.on_device(dev).fn)

    def configure(self, grid: Any, block: Any, shared_mem: Any = 0, cluster: Any = None,
                  device: int | None = None) -> LaunchConfig:
        """Check a configuration for this kernel (:class:`LaunchError` if it cannot run)."""
        dev = self.backend.current_device() if device is None else device
        return self._configure(self.on_device(dev), grid, block, shared_mem, cluster, None)

    def _configure(self, dk: _DeviceKernel, grid: Any, block: Any, shared_mem: Any,
                   cluster: Any, key: Any) -> LaunchConfig:
        config = check_launch_config(grid, block, shared_mem, cluster, dk.limits, self.name,
                                     dk.static_shared, dk.max_threads, self.launch_bound)
        if config.shared_mem > dk.dynamic_limit:
            self.backend.set_dynamic_shared(dk.fn, config.shared_mem)
            dk.dynamic_limit = config.shared_mem
        if key is not None:
            self._configs.put(key, config)
        return config

    def launch(self, grid: Any, block: Any, stream: Any, shared_mem: Any, args: Any,
               cluster: Any = None) -> None:
        """Check, pack and launch. ``args`` are the user's values in signature order."""
        backend = self.backend
        device = backend.current_device()
        dk = self._devices.get(device) or self.on_device(device)
        key = (grid, block, shared_mem, cluster, device)
        try:
            config = self._configs.get(key)
        except TypeError:  # an unhashable configuration (lists): check it every time
            config = self._configure(dk, grid, block, shared_mem, cluster, None)
        if config is None:
            config = self._configure(dk, grid, block, shared_mem, cluster, key)
        if stream is None:
            handle = StreamChoice.default(args, self.array_at, device) if self.array_at else 0
        else:
            handle = stream_handle(stream)
        slots = self.slots.get()
        staged = self.packer.pack(slots, args, device)
        if self.cooperative:
            cooperative.launch_cuda(backend, dk, self.name, config, handle, slots,
                                    launch_context(self.name, config.grid, config.block,
                                                   config.shared_mem))
        else:
            fn, grid, extent = self.entry(dk, config)
            if extent is not None:
                slots.u64[self.packer.trailing_slot] = extent
            backend.launch_typed(fn, grid, config.block, config.shared_mem, handle, slots,
                                 config.cluster)
        if self.fault_sites and getattr(backend, "faults", None) is not None:
            backend.faults.watch(backend, device, dk.module, self.image)
            if self.raises_at_launch:
                forbid_in_capture(f"kernel {self.name!r}: a debug kernel with 'raise' waits for "
                                  "each launch, to raise its exception there")
                backend.stream_synchronize(handle)  # the wait reads the fault records
        if staged is not None:
            _copy_back(staged, backend, handle)
        if backend.debug_sync:
            debug_sync(backend, handle, self.name, config)

    def fast_path(self, grid: Any, block: Any, stream: Any, shared_mem: Any,
                  plan: fastlaunch.FastPlan) -> Callable[..., Any] | None:
        """After a successful :meth:`launch` with this configuration: a plain function
        ``fast(*args)`` that repeats such launches with less work, for calls mapped to the
        kernel's parameters by ``plan``, and hands other calls to ``plan.fallback`` (see
        :mod:`kaiojit.runtime.native.fastlaunch`); None where there is no fast form."""
        device = self.backend.current_device()
        if self.cooperative:
            return None  # each launch checks its grid and zeroes the barrier
        try:
            config = self._configs.get((grid, block, shared_mem, None, device))
        except TypeError:
            return None
        if config is None:
            return None
        stream_now = None
        if stream is not None:
            handle = stream_handle(stream)
        elif StreamChoice.follows_torch(plan.values, range(len(plan.values))):
            stream_now = StreamChoice.getter()
            handle = 0 if stream_now is None else stream_now(device)
        else:
            handle = 0
        return fastlaunch.build(self, config, handle, device, plan, stream_now)

    def entry(self, dk: _DeviceKernel, config: LaunchConfig) -> tuple[Any, Dim3, int | None]:
        """The function a launch of ``config`` calls, the grid it launches, and the grid
        extent its coarse entry is told (None for the kernel's own entry): the coarse entry
        takes launches of at least ``COARSE_MIN_THREADS`` threads without a cluster or dynamic
        shared memory, in blocks its registers allow."""
        gx, gy, gz = config.grid
        bx, by, bz = config.block
        threads = bx * by * bz
        if (not self.coarse_factor or gx * threads < COARSE_MIN_THREADS or config.cluster
                or config.shared_mem):
            return dk.fn, config.grid, None
        if not dk.coarse_tried:
            forbid_in_capture(f"kernel {self.name!r}: its first launch of "
                              f"{COARSE_MIN_THREADS} threads or more loads its coarse entry")
            with self._lock:
                if not dk.coarse_tried:
                    dk.load_coarse(self.backend, self.image)
        if dk.coarse_fn is None or threads > dk.coarse_max_threads:
            return dk.fn, config.grid, None
        k = self.coarse_factor
        return dk.coarse_fn, ((gx + k - 1) // k, gy, gz), gx

    def suggest_block_size(self, dynamic_shared: int = 0) -> int:
        """The block size of highest occupancy on the current device."""
        dk = self.on_device(self.backend.current_device())
        _, block = self.backend.occupancy_block_size(dk.fn, dynamic_shared)
        return max(int(block), 1)

    def __repr__(self) -> str:
        return f"<ModuleKernel {self.name} {self.image.signature} on {self.backend.name}>"


def _copy_back(staged: list[StagedArray], backend: GpuBackend, stream: int) -> None:
    for s in staged:
        s.copy_back(stream)
    backend.stream_synchronize(stream)


# --- loading, cached per backend ----------------------------------------------------------------

# Per backend, the ModuleKernels alive, by what they load. Weak: a kernel lives as long as
# something launches it (the dispatcher's caches hold it); when the last holder goes, its
# modules are unloaded (_DeviceKernel's finalizer) and its entry here disappears.
_LOADED: weakref.WeakKeyDictionary[Any, weakref.WeakValueDictionary[Any, ModuleKernel]] = \
    weakref.WeakKeyDictionary()
_loaded_lock = threading.Lock()


def load_kernel(backend: GpuBackend, image: KernelImage) -> ModuleKernel:
    """The ModuleKernel of ``image`` on ``backend``; one per (PTX, entry name, signature,
    whether it has a coarse entry: ``coarsen=False`` compiles the same PTX without one)
    while it is in use."""
    key = (image.ptx, image.name, image.signature, getattr(image, "coarse", None) is not None)
    cache = _LOADED.get(backend)
    if cache is not None:
        loaded = cache.get(key)
        if loaded is not None:
            return loaded
    with _loaded_lock:
        cache = _LOADED.get(backend)
        if cache is None:
            cache = _LOADED[backend] = weakref.WeakValueDictionary()
        loaded = cache.get(key)
        if loaded is None:
            loaded = cache[key] = ModuleKernel(backend, image)
        return loaded


def loaded_kernels(backend: GpuBackend) -> int:
    """How many ModuleKernels of ``backend`` are alive (for tests of their lifetime)."""
    cache = _LOADED.get(backend)
    return 0 if cache is None else len(cache)


# --- occupancy ------------------------------------------------------------------------------------

def suggest_block_size(loaded: LoadedKernel, dynamic_shared: int = 0) -> int:
    """The block size of highest occupancy (``cuOccupancyMaxPotentialBlockSize``)."""
    return loaded.suggest_block_size(dynamic_shared)


def forall_config(loaded: LoadedKernel, n: int, dynamic_shared: int = 0) -> tuple[int, int]:
    """``(grid, block)`` of a 1-D launch covering ``n`` threads, for ``.forall(n)``."""
    if n < 0:
        raise LaunchError(f"forall needs n >= 0, got {n}")
    block = loaded.suggest_block_size(dynamic_shared)
    return max((n + block - 1) // block, 1), block
