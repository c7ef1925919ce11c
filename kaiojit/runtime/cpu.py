"""The cpu backend: kernels compiled for the host (``kaiojit/lower/host.py``) to object code,
loaded by ``kaiojit/runtime/hostjit.py`` and run natively.

Memory is host memory (NumPy buffers kept alive by the backend), so ``DeviceArray``, copies,
DLPack and the argument packer work unchanged. Streams run their work synchronously (a launch
has finished when it returns); events record host times. A launch checks its configuration
with the GPU's rules and limits, packs the arguments into the runtime's 8-byte slots, and runs
the grid's blocks natively, split between worker threads (one per core, at most two halves of
the grid each call; ctypes releases the GIL while native code runs). Faults detected in native
code (debug bounds checks, divergent barriers) raise :class:`kaiojit.KernelError`.

The backend protocol is implemented in full; what a host cannot do is a clear error: PTX
modules and tensor maps need the cuda backend, and there is no generated fast launch (a
launch's native work outweighs the general path's few microseconds).
"""

from __future__ import annotations

import ctypes
import faulthandler
import itertools
import os
import queue
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from kaiojit.errors import CudaError, KernelError, LaunchError, source_position
from kaiojit.runtime import clusters, cooperative, sanitizer
from kaiojit.runtime.args import ArgPacker
from kaiojit.runtime.backend import DeviceLimits, Dim3, FastLaunchBinding, LaunchConfig
from kaiojit.runtime.faults import assert_message, bounds_message, raise_error
from kaiojit.runtime.hostjit import load_host_image
from kaiojit.runtime.launch import ConfigCache, check_launch_config, launch_bound
from kaiojit.runtime.slots import ArgSlots, ThreadSlots
from kaiojit.target import HostImage, TargetSpec

KDL_CPU = 1
PRINT_BUFFER_BYTES = 1 << 20          # like CUDA's default printf FIFO
WORKER_STACK_BYTES = 512 << 20        # block mode keeps one copy of every variable per thread
SMALL_LAUNCH_THREADS = 1 << 15        # fast-path launches smaller than this run on the caller
ALIGN = 256
SHARED_ALIGN = 1024                   # the 128B TMA swizzle pattern repeats every 1024 bytes


class _Worker:
    """A thread with a large stack that runs native calls handed to it."""

    def __init__(self, index: int):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        previous = threading.stack_size()
        threading.stack_size(WORKER_STACK_BYTES)
        try:
            self.thread = threading.Thread(target=self._loop, name=f"kaiojit-cpu-{index}",
                                           daemon=True)
            self.thread.start()
        finally:
            threading.stack_size(previous)

    def _loop(self) -> None:
        while True:
            fn, args, done = self.jobs.get()
            try:
                fn(*args)
            finally:
                done.release()

    def submit(self, fn, args, done: threading.Semaphore) -> None:
        self.jobs.put((fn, args, done))


class _LaunchBuffers(threading.local):
    """Per calling thread: worker contexts, shared memory, the launch state, the print buffer."""

    def __init__(self) -> None:
        from kaiojit import target as H

        self.launch = np.zeros(H.LAUNCH_WORDS, np.int64)
        self.prints = np.zeros(PRINT_BUFFER_BYTES, np.uint8)
        self.ctx = [np.zeros(H.CTX_WORDS, np.int64) for _ in range(2)]
        self.shared = [np.zeros(0, np.uint8), np.zeros(0, np.uint8)]
        # each worker's cluster state when it runs its blocks alone, and the one the blocks of
        # a cluster share when they run together (kaiojit/runtime/clusters.py)
        self.cluster = [np.zeros(H.CLUSTER_WORDS, np.int64) for _ in range(2)]
        self.together = np.zeros(H.CLUSTER_WORDS, np.int64)
        self.checks: list[sanitizer.WorkerState] = []  # the checked variant's, per worker
        self.launch[H.LAUNCH_PRINT_CAP] = PRINT_BUFFER_BYTES
        self.launch[H.LAUNCH_PRINT_BUF] = self.prints.ctypes.data
        for ctx in self.ctx:
            ctx[H.CTX_LAUNCH] = self.launch.ctypes.data

    def ensure_workers(self, n: int) -> None:
        """Contexts and shared memory for ``n`` workers (a cooperative launch has a worker per
        block)."""
        from kaiojit import target as H

        while len(self.ctx) < n:
            ctx = np.zeros(H.CTX_WORDS, np.int64)
            ctx[H.CTX_LAUNCH] = self.launch.ctypes.data
            self.ctx.append(ctx)
            self.shared.append(np.zeros(0, np.uint8))
            self.cluster.append(np.zeros(H.CLUSTER_WORDS, np.int64))

    def checks_for(self, parts: int) -> list[sanitizer.WorkerState]:
        """The sanitizer states of the first ``parts`` workers (made on first use)."""
        while len(self.checks) < parts:
            self.checks.append(sanitizer.WorkerState())
        return self.checks[:parts]

    def shared_for(self, worker: int, nbytes: int) -> int:
        buf = self.shared[worker]
        if buf.size < nbytes + SHARED_ALIGN:
            buf = self.shared[worker] = np.zeros(nbytes + SHARED_ALIGN, np.uint8)
        return (buf.ctypes.data + SHARED_ALIGN - 1) // SHARED_ALIGN * SHARED_ALIGN


class CpuKernel:
    """A host-compiled kernel ready to launch (what ``backend.load_kernel`` returns)."""

    def __init__(self, backend: CpuBackend, image: Any):
        self.backend = backend
        self.image = image
        self.host = image.image  # the HostImage: object code, static shared bytes, block mode
        self.code = load_host_image(self.host)  # the loaded native code, kept alive here
        self.name = image.py_name
        self.device = 0
        self.fn = self  # on its one device, the kernel is its own function handle
        self.packer = ArgPacker(image.signature.args, image.arg_names,
                                 written=getattr(image, "written_arrays", None))
        self._slots = ThreadSlots(self.packer.layout)
        self._configs = ConfigCache()
        self._run = self.code.run
        self.cooperative = cooperative.is_cooperative(image)  # it synchronizes its grid
        self.together = clusters.runs_together(self.host)  # it needs its cluster's blocks
        self._quiet: sanitizer.QuietPlan | None = None

    def quiet_plan(self) -> sanitizer.QuietPlan:
        """The checked variant's per-launch test of which arrays need no racecheck."""
        plan = self._quiet
        if plan is None:
            plan = self._quiet = sanitizer.QuietPlan(self.image.signature.args,
                                                     self.packer.layout)
        return plan

    def max_cooperative_grid_blocks(self, block: Any, dynamic_shared: int = 0) -> int:
        """The most blocks a cooperative launch may have: as many as the modeled GPU's SMs
        hold at once (each runs on a host thread of its own)."""
        return cooperative.max_cooperative_grid_blocks(self.backend, self, block, dynamic_shared)

    def on_device(self, device: int) -> CpuKernel:
        return self

    def attributes(self, device: int | None = None) -> dict[str, int]:
        return self.backend.function_attributes(self)

    def configure(self, grid: Any, block: Any, shared_mem: Any = 0, cluster: Any = None,
                  device: int | None = None) -> LaunchConfig:
        config = check_launch_config(grid, block, shared_mem, cluster, self.backend.limits,
                                     self.name, self.host.static_shared_bytes,
                                     launch_bound=launch_bound(self.image))
        if self.cooperative:
            limit = cooperative.cpu_max_blocks(
                config.block, self.host.static_shared_bytes + config.shared_mem)
            cooperative.check_cooperative_grid(self.name, config.grid, config.block, limit)
        return config

    def suggest_block_size(self, dynamic_shared: int = 0) -> int:
        return self.backend.occupancy_block_size(self, dynamic_shared)[1]

    def fast_path(self, grid: Any, block: Any, stream: Any, shared_mem: Any, plan: Any) -> None:
        """None: cpu launches have no generated fast form (see the module's docstring)."""

    def launch(self, grid: Any, block: Any, stream: Any, shared_mem: Any, args: Sequence[Any],
               cluster: Any = None) -> None:
        key = (grid, block, shared_mem, cluster)
        try:
            config = self._configs.get(key)
        except TypeError:  # unhashable (lists): check every time
            config = self.configure(grid, block, shared_mem, cluster)
        if config is None:
            config = self.configure(grid, block, shared_mem, cluster)
            self._configs.put(key, config)
        slots = self._slots.get()
        staged = self.packer.pack(slots, args, 0)
        self.backend.run_grid(self, config, slots.address)
        if staged is not None:
            for s in staged:
                s.copy_back(None)

    def __repr__(self) -> str:
        return f"<CpuKernel {self.name} {self.image.signature}>"


class HostModule:
    """A host image loaded into this process: its native code and the image's entry."""

    __slots__ = ("code", "image")

    def __init__(self, image: HostImage, code: Any):
        self.image = image
        self.code = code


class HostFunction:
    """A host module's entry, what ``launch_typed`` runs (read as a CpuKernel is)."""

    __slots__ = ("_run", "host", "name")

    def __init__(self, name: str, code: Any):
        self.name = name
        self.host = code.image  # the HostImage, as CpuKernel.host
        self._run = code.run


class CpuBackend:
    """The GpuBackend protocol on the host: one device, 0."""

    name = "cpu"
    debug_sync = False
    closing = False

    def __init__(self, workers: int | None = None, sanitize: bool | None = None) -> None:
        # the checked mode: kernels compile to the host's checked variant (docs/sanitizer.md)
        self.sanitize = sanitizer.sanitize_from_env() if sanitize is None else bool(sanitize)
        self.unwritten = sanitizer.UnwrittenMemory()  # global initcheck's (checked mode only)
        self.limits = DeviceLimits()
        self._lock = threading.Lock()
        self._unfreed: list[int] = []  # freed while the lock was held (see free)
        self._buffers: dict[int, np.ndarray] = {}
        self._handles = itertools.count(0x10, 0x10)
        self._events: dict[int, float | None] = {}
        # the loaded kernels in use, by id of their compiled kernel (which each one holds, so
        # the id is not reused while it lives); weak: a dropped kernel's code is freed
        self._kernels: weakref.WeakValueDictionary[int, CpuKernel] = weakref.WeakValueDictionary()
        self._load_lock = threading.Lock()
        self._local = _LaunchBuffers()
        self._crew = cooperative.CpuCrew()  # the threads of cooperative launches
        n = workers if workers is not None else min(os.cpu_count() or 1, 2)
        self._workers = [_Worker(i) for i in range(max(n, 1))]
        self.limits = replace(self.limits, multiprocessor_count=len(self._workers))
        if not faulthandler.is_enabled():
            try:  # a crash in generated code then prints where it happened, not nothing
                faulthandler.enable()
            except (RuntimeError, ValueError, AttributeError, OSError):
                pass

    # --- devices ---------------------------------------------------------------------------------
    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def select_device(self, device: int) -> None:
        _check_device(device)

    set_default_device = select_device

    def device_limits(self, device: int) -> DeviceLimits:
        return self.limits

    def compute_capability(self, device: int) -> tuple[int, int]:
        return (9, 0)

    def target_spec(self, device: int | None = None) -> TargetSpec:
        return TargetSpec(kind="host", sanitize=self.sanitize)

    # --- code --------------------------------------------------------------------------------------
    def load_kernel(self, kernel: Any) -> CpuKernel:
        if not isinstance(getattr(kernel, "image", None), HostImage):
            raise TypeError(f"kernel {kernel.name!r} was not compiled for the host")
        loaded = self._kernels.get(id(kernel))
        if loaded is None or loaded.image is not kernel:
            with self._load_lock:  # not self._lock: a finalizer's free() may run meanwhile
                loaded = self._kernels.get(id(kernel))
                if loaded is None or loaded.image is not kernel:
                    loaded = self._kernels[id(kernel)] = CpuKernel(self, kernel)
        return loaded

    def load_module(self, image: HostImage, device: int) -> HostModule:
        """Link a host image's object code into this process. PTX text is a CudaError: it
        needs the driver's JIT, the cuda backend's."""
        _check_device(device)
        if not isinstance(image, HostImage):
            raise CudaError("CUDA_ERROR_NOT_SUPPORTED",
                            f"the cpu backend loads host images (kaiojit.target.HostImage), got "
                            f"{type(image).__name__}; PTX needs the cuda backend "
                            "(KAIOJIT_BACKEND=cuda on a machine with a GPU)")
        return HostModule(image, load_host_image(image))

    def unload_module(self, module: HostModule, device: int) -> None:
        """Nothing to do: the native code is freed with the last function that uses it."""

    def get_function(self, module: HostModule, name: str, device: int) -> HostFunction:
        if name != module.image.entry:
            raise CudaError("CUDA_ERROR_NOT_FOUND", "named symbol not found",
                            f"kernel {name!r}; the host module's entry is "
                            f"{module.image.entry!r}")
        return HostFunction(name, module.code)

    def function_attributes(self, fn: CpuKernel | HostFunction) -> dict[str, int]:
        return {"max_threads_per_block": self.limits.max_threads_per_block,
                "shared_bytes": fn.host.static_shared_bytes, "local_bytes": 0, "registers": 0,
                "const_bytes": 0}

    def set_dynamic_shared(self, fn: Any, nbytes: int) -> None:
        pass

    def occupancy_block_size(self, fn: Any, dynamic_shared: int) -> tuple[int, int]:
        return 1, 256

    def launch_typed(self, fn: CpuKernel | HostFunction, grid: Dim3, block: Dim3,
                     shared_mem: int, stream: int, slots: ArgSlots,
                     cluster: Dim3 | None = None) -> None:
        config = check_launch_config(grid, block, shared_mem, cluster, self.limits, fn.name,
                                     fn.host.static_shared_bytes)
        self.run_grid(fn, config, slots.address)

    def fast_launch_binding(self, fn: Any, grid: Dim3, block: Dim3, shared_mem: int,
                            stream: int, slots: ArgSlots) -> FastLaunchBinding | None:
        """None: cpu launches have no generated fast form (see the module's docstring)."""

    def run_grid(self, kernel: CpuKernel, config: Any, slots_address: int) -> None:
        """Run every block of a checked configuration; raise KernelError on a fault."""
        from kaiojit import target as H

        gx, gy, gz = config.grid
        bx, by, bz = config.block
        nblocks = gx * gy * gz
        local = self._local
        launch = local.launch
        launch[H.LAUNCH_ERROR] = 0
        launch[H.LAUNCH_PRINT_USED] = 0
        host = kernel.host
        shared_bytes = host.static_shared_bytes + config.shared_mem
        block_mode = host.uses_block_mode
        threads = nblocks * bx * by * bz
        parts = 1 if nblocks == 1 or (not block_mode and threads < SMALL_LAUNCH_THREADS) \
            else min(len(self._workers), 2)
        coop = getattr(kernel, "cooperative", None)
        if coop is None:  # a HostFunction of the module API: its image says
            coop = any(site["kind"] == cooperative.GRID_SYNC_SITE for site in host.sites)
        together = False  # the blocks of each cluster at once (kaiojit/runtime/clusters.py)
        if clusters.cluster_size(config.cluster) > 1:
            together = getattr(kernel, "together", None)
            if together is None:  # a HostFunction of the module API: its image says
                together = clusters.runs_together(host)
        if coop:  # a grid barrier: every block on a thread of its own, all at once
            if together:
                raise LaunchError(f"kernel {kernel.name!r} synchronizes its grid and uses its "
                                  "cluster's blocks: the cpu backend runs one or the other")
            launch[H.LAUNCH_GRID_BARRIER] = 0
            parts = nblocks
            local.ensure_workers(parts)
        elif together:  # a cluster's blocks at once, a thread each
            parts = clusters.cluster_size(config.cluster)
            local.ensure_workers(parts)
        bounds = [nblocks * i // parts for i in range(parts + 1)]
        checks = local.checks_for(parts) if sanitizer.is_checked(host) else None
        quiet = 0
        unwritten = None
        if self.unwritten:
            if isinstance(kernel, CpuKernel):
                unwritten = self.unwritten.for_launch(kernel.quiet_plan().ranges(slots_address))
            else:  # the module API's launch: which memory it writes is not known
                self.unwritten.clear()
        if checks is not None and isinstance(kernel, CpuKernel):
            quiet = kernel.quiet_plan().bits(slots_address, config.grid, config.block)
        calls = []
        for w in range(parts):
            ctx = local.ctx[w]
            ctx[H.CTX_GRID:H.CTX_GRID + 3] = config.grid
            ctx[H.CTX_BLOCK:H.CTX_BLOCK + 3] = config.block
            ctx[H.CTX_SHARED] = local.shared_for(w, shared_bytes)
            ctx[H.CTX_DYN_BYTES] = config.shared_mem
            if checks is not None:
                checks[w].begin_launch(int(ctx[H.CTX_SHARED]), shared_bytes, quiet,
                                       None if unwritten is None else unwritten[0])
                ctx[H.CTX_CHECK] = checks[w].address
            if not together:
                clusters.set_alone(ctx, local.cluster[w], config.cluster)
            calls.append((slots_address, ctx.ctypes.data, bounds[w], bounds[w + 1]))
        run = kernel._run
        if parts == 1 and not block_mode:
            run(*calls[0])
        elif coop:
            self._crew.run(run, calls, bx * by * bz, launch)
        elif together:
            clusters.run_clusters(self._crew, run, slots_address, local.ctx[:parts], config,
                                  local.together, launch)
        else:
            done = threading.Semaphore(0)
            for w, call in enumerate(calls):
                self._workers[w].submit(run, call, done)
            for _ in calls:
                done.acquire()
        used = int(launch[H.LAUNCH_PRINT_USED])
        if used:
            text = local.prints[:min(used, PRINT_BUFFER_BYTES)].tobytes()
            sys.stdout.write(text.decode("utf-8", "replace"))
            if used > PRINT_BUFFER_BYTES:
                sys.stdout.write(f"[kaiojit: print output of {kernel.name} truncated: "
                                 f"{used - PRINT_BUFFER_BYTES} bytes lost]\n")
            sys.stdout.flush()
        if unwritten is not None:
            self.unwritten.after_launch(
                unwritten[1], checks is not None and host.sites[0].get("writes_seen", False))
        fatal = kernel_error(kernel, config, launch) if launch[H.LAUNCH_ERROR] else None
        if checks is not None:
            fatal = sanitizer.launch_error(kernel, config, checks, fatal)
        if fatal is not None:
            raise fatal

    # --- memory ------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        # sizes round up to 16 bytes, as the driver's (a TMA store may write to the boundary)
        buf = np.empty(-(-max(nbytes, 1) // 16) * 16 + ALIGN, np.uint8)
        ptr = (buf.ctypes.data + ALIGN - 1) // ALIGN * ALIGN
        with self._lock:
            self._drop_unfreed()
            self._buffers[ptr] = buf
        if self.sanitize:
            self.unwritten.allocated(ptr, nbytes)
        return ptr

    def free(self, ptr: int, device: int) -> None:
        # an array's finalizer: the garbage collector may run it on a thread that holds the
        # lock (where it builds a tuple); then the buffer waits for the lock's next holder
        if self._lock.acquire(blocking=False):
            try:
                self._drop_unfreed()
                self._buffers.pop(ptr, None)
            finally:
                self._lock.release()
        else:
            self._unfreed.append(ptr)  # atomic under the GIL; the buffer lives until then
        self.unwritten.forget(ptr)

    def _drop_unfreed(self) -> None:
        while self._unfreed:
            self._buffers.pop(self._unfreed.pop(), None)

    @property
    def live_allocations(self) -> int:
        with self._lock:
            self._drop_unfreed()
            return len(self._buffers)

    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            ctypes.memmove(dst, src, nbytes)
            self.unwritten.written(dst, nbytes)

    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            ctypes.memmove(dst, src, nbytes)

    memcpy_dtod = memcpy_htod

    def memcpy_peer(self, dst: int, dst_device: int, src: int, src_device: int, nbytes: int,
                    stream: int | None = None) -> None:
        _check_device(dst_device)
        _check_device(src_device)
        self.memcpy_dtod(dst, src, nbytes)

    def can_access_peer(self, device: int, peer: int) -> bool:
        _check_device(device)
        _check_device(peer)
        return True

    def enable_peer_access(self, device: int, peer: int) -> bool:
        return self.can_access_peer(device, peer)

    def memset(self, ptr: int, byte: int, nbytes: int, stream: int | None = None) -> None:
        if nbytes:
            ctypes.memset(ptr, byte, nbytes)
            self.unwritten.written(ptr, nbytes)

    def pointer_device(self, ptr: int) -> int:
        with self._lock:
            self._drop_unfreed()
            for base, buf in self._buffers.items():
                if base <= ptr < base + buf.size:
                    return 0
        return -1

    def dlpack_device_type(self) -> int:
        return KDL_CPU

    # --- streams and events (work is done when a launch returns) ------------------------------------
    def synchronize(self) -> None:
        pass

    def stream_create(self) -> int:
        return next(self._handles)

    def stream_destroy(self, stream: int) -> None:
        pass

    def stream_synchronize(self, stream: int) -> None:
        pass

    def stream_wait_event(self, stream: int, event: int) -> None:
        pass

    def event_create(self, timing: bool = True) -> int:
        handle = next(self._handles)
        self._events[handle] = None
        return handle

    def event_destroy(self, event: int) -> None:
        self._events.pop(event, None)

    def event_record(self, event: int, stream: int) -> None:
        self._events[event] = time.perf_counter()

    def event_synchronize(self, event: int) -> None:
        pass

    def event_elapsed_ms(self, start: int, end: int) -> float:
        t0, t1 = self._events.get(start), self._events.get(end)
        if t0 is None or t1 is None:
            raise CudaError("CUDA_ERROR_INVALID_HANDLE", "an event was not recorded")
        return (t1 - t0) * 1000.0

    def encode_tensormap_tiled(self, *, dtype: str, rank: int, address: int,
                               dims: tuple[int, ...], strides: tuple[int, ...],
                               box: tuple[int, ...], element_strides: tuple[int, ...],
                               interleave: str, swizzle: str, l2_promotion: str,
                               oob_fill: str) -> bytes:
        """kaiojit's host encoding of the map (``kaiojit.tma_host``), which the host tile
        copies read."""
        from kaiojit import tma_host

        if interleave != "CU_TENSOR_MAP_INTERLEAVE_NONE":
            raise ValueError("interleave: the cpu backend does not model interleaved tensor "
                             "maps; use interleave=None")
        return tma_host.encode_tiled(
            dtype=dtype, rank=rank, address=address, dims=dims, strides=strides, box=box,
            element_strides=element_strides, interleave=interleave, swizzle=swizzle,
            l2_promotion=l2_promotion, oob_fill=oob_fill)


def _check_device(device: int) -> None:
    if device != 0:
        raise ValueError(f"no device {device}: the cpu backend has one device, 0")


def named_barrier_message(kernel: str, op: str, arrived: int, count: int, where: str) -> str:
    """Why a named barrier stopped the block: its last phase cannot complete any more."""
    return (f"kernel {kernel!r}: {op}() at {where}: only {arrived} of its {count} threads (a "
            "warp counts 32) arrived in its last phase and every thread of the block has run "
            "up to here: on the GPU this hangs. (The cpu backend runs the threads of an if's "
            "branch before the other branch's: an arrive must come before the sync it "
            "completes in program order.)")


def kernel_error(kernel: CpuKernel, config: Any, launch: np.ndarray) -> BaseException:
    """The KernelError for the fault native code recorded in ``launch`` (a kernel's
    ``raise``: the exception it raised)."""
    from kaiojit import target as H

    site = kernel.host.sites[int(launch[H.LAUNCH_SITE])]
    gx, gy, _ = config.grid
    bx, by, _ = config.block
    lb, lt = int(launch[H.LAUNCH_BLOCK]), int(launch[H.LAUNCH_THREAD])
    block = (lb % gx, lb // gx % gy, lb // (gx * gy))
    thread = (lt % bx, lt // bx % by, lt // (bx * by))
    where = (source_position(site["filename"], site["line"]) if site["filename"]
             else "an unknown line")
    source = f"\n    {site['source_line'].strip()}" if site["source_line"] else ""
    if launch[H.LAUNCH_ERROR] == H.ERR_RAISE:
        return raise_error(kernel.name, site, block, thread)
    if launch[H.LAUNCH_ERROR] == H.ERR_ASSERT:
        msg = assert_message(kernel.name, site, block, thread)
    elif launch[H.LAUNCH_ERROR] == H.ERR_BOUNDS:
        msg = bounds_message(kernel.name, site, int(launch[H.LAUNCH_INDEX]),
                             int(launch[H.LAUNCH_EXTENT]), block, thread)
    elif launch[H.LAUNCH_ERROR] == H.ERR_CLUSTER_RANK:
        msg = clusters.rank_message(kernel.name, site["op"], int(launch[H.LAUNCH_INDEX]),
                                    int(launch[H.LAUNCH_EXTENT]), f"{where}, block {block}, "
                                    f"thread {thread}{source}")
    elif launch[H.LAUNCH_ERROR] == H.ERR_CLUSTER_STUCK or (
            launch[H.LAUNCH_ERROR] == H.ERR_MBARRIER_STUCK
            and clusters.cluster_size(config.cluster) > 1):
        msg = clusters.stuck_message(kernel.name, site["op"], clusters.cluster_size(
            config.cluster), f"{where}, block {block}, thread {thread}{source}")
    elif launch[H.LAUNCH_ERROR] in (H.ERR_TMA, H.ERR_MBARRIER_STUCK):
        from kaiojit.tma_host import device_fault

        msg = device_fault(kernel.name, site["op"], int(launch[H.LAUNCH_ERROR]) == H.ERR_TMA,
                           int(launch[H.LAUNCH_INDEX]), f"{where}, block {block}, thread "
                           f"{thread}{source}")
    elif launch[H.LAUNCH_ERROR] == H.ERR_NAMED_BARRIER:
        msg = named_barrier_message(kernel.name, site["op"], int(launch[H.LAUNCH_INDEX]),
                                    int(launch[H.LAUNCH_EXTENT]), f"{where}, block {block}, "
                                    f"thread {thread}{source}")
    else:
        msg = (f"kernel {kernel.name!r}: divergent {site['op']}() in block {block}: some threads "
               f"of the block reached the barrier at {where} and thread {thread} did not (a "
               f"barrier must be reached by every thread of the block that has not returned)"
               f"{source}")
    return KernelError(msg)


__all__ = ["CpuBackend", "CpuKernel", "HostFunction", "HostModule"]
