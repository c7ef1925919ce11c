"""The cpu backend's checked mode, on the runtime's side: the switch, each worker's sanitizer
state (``SAN_*`` in ``kaiojit/target.py``) and the report of a launch's findings.

A checked kernel is the host target's separate compile variant (``TargetSpec(kind="host",
sanitize=True)``, instrumented by ``kaiojit/lower/host_sanitize.py``). Before each launch every
worker's state gets a new epoch for the launch and its finding record cleared; afterwards the
first finding of the first worker that has one (workers run the grid's blocks in order, the
first worker the first blocks) is raised as one :class:`kaiojit.KernelError`, with a count of
the launch's other findings. See docs/sanitizer.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from kaiojit import target as H
from kaiojit.errors import KernelError, source_position

ENV = "KAIOJIT_SANITIZE"
TABLE_ENTRIES = 1 << 15        # the global-memory table: 2 MiB per worker
SHARED_WORDS = 4               # shadow words per byte of shared memory (host_sanitize)
TABLE_WORDS = 8
QUIET_READ_ONLY, QUIET_PRIVATE = 1, 2  # kaiojit.lower.host_sanitize's
EPOCH_LIMIT = 1 << 31          # epochs are 32 bits in a packed access: start over before
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
TOOLS = {H.SAN_KIND_BOUNDS: "memcheck", H.SAN_KIND_RACE: "racecheck",
         H.SAN_KIND_INIT: "initcheck", H.SAN_KIND_SYNC: "synccheck"}
HAZARDS = {H.HAZARD_RAW: ("read-after-write", "read", "wrote"),
           H.HAZARD_WAR: ("write-after-read", "wrote", "read"),
           H.HAZARD_WAW: ("write-after-write", "wrote", "wrote"),
           H.HAZARD_BLOCKS: ("write-after-write", "wrote", "wrote")}


def sanitize_from_env(environ=os.environ) -> bool:
    """``KAIOJIT_SANITIZE``: 1/true/yes/on checks cpu-backend kernels, 0/false/no/off (or
    unset) does not; anything else is a ValueError naming the variable."""
    value = environ.get(ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{ENV}={environ.get(ENV)!r}: expected 1 or 0 (or true/false, on/off, "
                     "yes/no)")


def is_checked(host: Any) -> bool:
    """Whether a host image is the checked variant (its first site says so)."""
    sites = host.sites
    return bool(sites) and sites[0].get("kind") == "sanitize"


_NATIVE: dict[str, int] | None = None  # the shadow functions' addresses, once compiled
_NATIVE_ENGINE: Any = None  # what owns their code
_NATIVE_LOCK = threading.Lock()


def register_symbols() -> None:
    """Make the shadow functions that checked kernels call (``kaiojit_san_*``) known to
    MCJIT's symbol resolution: compiled once per process, at the first checked load."""
    global _NATIVE, _NATIVE_ENGINE
    from llvmlite import binding as llvm

    with _NATIVE_LOCK:
        if _NATIVE is None:
            from kaiojit.sanitizer_shadow import native_module
            from kaiojit.target import host_target_machine

            tm = host_target_machine()
            ref = llvm.parse_assembly(native_module(llvm.get_process_triple(),
                                                    str(tm.target_data)))
            ref.verify()
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
            pb.getModulePassManager().run(ref, pb)
            engine = llvm.create_mcjit_compiler(ref, tm)
            engine.finalize_object()
            _NATIVE_ENGINE = engine
            _NATIVE = {fn.name: engine.get_function_address(fn.name)
                       for fn in ref.functions if not fn.is_declaration}
    for name, address in _NATIVE.items():
        llvm.add_symbol(name, address)


class WorkerState:
    """One worker's sanitizer state and shadows (kept between launches: epochs tell old
    records from new ones, so nothing is cleared per launch but the finding record)."""

    def __init__(self) -> None:
        self.words = np.zeros(H.SAN_WORDS, np.int64)
        self.table = np.zeros(TABLE_ENTRIES * TABLE_WORDS, np.int64)
        self.shadow = np.zeros(0, np.int64)
        self.warp_sync = np.zeros(H.SAN_MAX_THREADS, np.int64)
        self.words[H.SAN_WARP_SYNC] = self.warp_sync.ctypes.data
        self.words[H.SAN_TABLE] = self.table.ctypes.data
        self.words[H.SAN_TABLE_MASK] = TABLE_ENTRIES - 1
        self.address = self.words.ctypes.data

    def begin_launch(self, shared_base: int, shared_bytes: int, quiet: int,
                     unwritten: np.ndarray | None = None) -> None:
        w = self.words
        if shared_bytes * SHARED_WORDS > self.shadow.size:
            self.shadow = np.zeros(shared_bytes * SHARED_WORDS, np.int64)
        if w[H.SAN_EPOCH] > EPOCH_LIMIT:  # start the epochs over, and so every record
            self.shadow.fill(0)
            self.table.fill(0)
            self.warp_sync.fill(0)
            w[H.SAN_EPOCH] = 0
        w[H.SAN_EPOCH] += 1
        w[H.SAN_LAUNCH_EPOCH] = w[H.SAN_EPOCH]
        w[H.SAN_SHARED_BASE] = shared_base
        w[H.SAN_SHARED_BYTES] = shared_bytes
        w[H.SAN_SHARED_SHADOW] = self.shadow.ctypes.data
        w[H.SAN_COUNTS:H.SAN_BARRIER_EPOCH] = 0  # the finding record
        w[H.SAN_QUIET] = quiet
        w[H.SAN_UNINIT] = 0 if unwritten is None else unwritten.ctypes.data
        w[H.SAN_UNINIT_COUNT] = 0 if unwritten is None else unwritten.size // 3


class UnwrittenMemory:
    """A checked backend's allocations that nothing has written all of yet (what global
    initcheck knows): per allocation its size and, once part of it is written, a byte per
    byte (1: written). Host copies and memsets mark what they write; a checked launch passes
    the allocations its array arguments touch (``SAN_UNINIT``), its stores mark bytes and its
    reads of unmarked ones are findings. An allocation leaves once all of it is written, or
    when memory is handed to code that the checks do not see (a kernel run unchecked, an
    export to NumPy or DLPack): it then counts as written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sizes: dict[int, int] = {}
        self._bits: dict[int, np.ndarray] = {}
        self._pending: list[int] = []  # forgotten while the lock was held (see forget)

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """The lock, with the allocations forgotten meanwhile dropped first."""
        with self._lock:
            while self._pending:
                self._forget(self._pending.pop())
            yield

    def __bool__(self) -> bool:
        return bool(self._sizes)

    def allocated(self, ptr: int, nbytes: int) -> None:
        if nbytes > 0:
            with self._held():
                self._sizes[ptr] = nbytes

    def forget(self, ptr: int) -> None:
        """The allocation at or around ``ptr`` counts as written from now on. A freed array's
        finalizer calls this, and the garbage collector may run it on a thread that holds the
        lock (inside any method here, where a list is built): then the pointer waits for the
        lock's next holder instead of deadlocking. An allocation is only ever made under the
        lock, after the waiting pointers are dropped, so a reused address is not forgotten."""
        if not self._lock.acquire(blocking=False):
            self._pending.append(ptr)  # atomic under the GIL
            return
        try:
            while self._pending:
                self._forget(self._pending.pop())
            self._forget(ptr)
        finally:
            self._lock.release()

    def _forget(self, ptr: int) -> None:
        for base in self._overlapping(ptr, ptr + 1):
            self._drop(base)

    def clear(self) -> None:
        """Everything counts as written (memory went where the checks do not see)."""
        with self._held():
            self._sizes.clear()
            self._bits.clear()

    def written(self, ptr: int, nbytes: int) -> None:
        if not self._sizes or nbytes <= 0:
            return
        with self._held():
            for base in self._overlapping(ptr, ptr + nbytes):
                size = self._sizes[base]
                lo, hi = max(ptr - base, 0), min(ptr + nbytes - base, size)
                if lo == 0 and hi == size:
                    self._drop(base)
                    continue
                bits = self._bitmap(base)
                bits[lo:hi] = 1
                if bits.all():
                    self._drop(base)

    def for_launch(self, ranges: list[tuple[int, int]]) -> tuple[np.ndarray, list[int]] | None:
        """The (base, end, bitmap) triples of the allocations that ``ranges`` (a launch's
        array arguments) touch, and their bases; None if there are none."""
        if not self._sizes:
            return None
        with self._held():
            bases = sorted({base for lo, hi in ranges for base in self._overlapping(lo, hi)})
            if not bases:
                return None
            table = np.zeros(3 * len(bases), np.int64)
            for k, base in enumerate(bases):
                table[3 * k:3 * k + 3] = (base, base + self._sizes[base],
                                          self._bitmap(base).ctypes.data)
        return table, bases

    def after_launch(self, bases: list[int], seen: bool) -> None:
        """A launch over ``bases`` ended: drop what it wrote all of, or (``seen`` False: its
        writes were not all watched) all of them."""
        with self._held():
            for base in bases:
                bits = self._bits.get(base)
                if not seen or (bits is not None and bits.all()):
                    self._drop(base)

    def _overlapping(self, lo: int, hi: int) -> list[int]:
        return [base for base, size in self._sizes.items() if base < hi and lo < base + size]

    def _bitmap(self, base: int) -> np.ndarray:
        bits = self._bits.get(base)
        if bits is None:
            bits = self._bits[base] = np.zeros(self._sizes[base], np.uint8)
        return bits

    def _drop(self, base: int) -> None:
        self._sizes.pop(base, None)
        self._bits.pop(base, None)


class QuietPlan:
    """How a kernel's launches find which arrays need no racecheck (``SAN_QUIET``): its array
    arguments' byte ranges, read from the launch's slots, must not overlap (the lowering's
    read-only and thread-private arrays are then race-free), and thread-private ones need a
    one-dimensional launch as well."""

    def __init__(self, arg_types: tuple, layout: Any) -> None:
        from kaiojit import types as T

        self.arrays = []  # (first slot, ndim, itemsize, passes strides)
        k = 0
        for t in arg_types:
            if isinstance(t, T.ArrayType):
                self.arrays.append((layout.first_slot[k], t.ndim, t.dtype.itemsize,
                                    t.passes_strides))
            k += len(T.param_parts(t))
        self.slots = layout.slot_count

    def bits(self, slots_address: int, grid: tuple, block: tuple) -> int:
        ranges = self.ranges(slots_address)
        ranges.sort()
        if any(ranges[i + 1][0] < ranges[i][1] for i in range(len(ranges) - 1)):
            return 0  # arguments overlap: every access is checked
        one_dim = grid[1] == grid[2] == block[1] == block[2] == 1
        return QUIET_READ_ONLY | (QUIET_PRIVATE if one_dim else 0)

    def ranges(self, slots_address: int) -> list[tuple[int, int]]:
        """The byte ranges of the launch's array arguments (none for empty ones)."""
        words = (ctypes.c_int64 * self.slots).from_address(slots_address)
        ranges = []
        for first, ndim, itemsize, strided in self.arrays:
            shape = [words[first + 1 + d] for d in range(ndim)]
            if 0 in shape:
                continue
            if strided:
                strides = [words[first + 1 + ndim + d] for d in range(ndim)]
                low = sum(min(0, (n - 1) * st) for n, st in zip(shape, strides))
                high = sum(max(0, (n - 1) * st) for n, st in zip(shape, strides)) + itemsize
            else:
                low, high = 0, itemsize * int(np.prod(shape))
            ptr = words[first]
            ranges.append((ptr + low, ptr + high))
        return ranges


def launch_error(kernel: Any, config: Any, states: list[WorkerState],
                 fatal: KernelError | None) -> KernelError | None:
    """The KernelError of a launch's findings (the first in full, then how many more), or
    ``fatal`` (a divergent barrier, an assert...) alone, or None."""
    counts = {kind: 0 for kind in TOOLS}
    first = None
    for state in states:
        w = state.words
        for kind in TOOLS:
            counts[kind] += int(w[H.SAN_COUNTS + kind - 1])
        if first is None and w[H.SAN_KIND]:
            first = w
    if first is None:
        return fatal
    text = describe(kernel, config, first)
    counts[int(first[H.SAN_KIND])] -= 1  # the rest
    rest = [f"{n} {TOOLS[kind]}" for kind, n in counts.items() if n]
    if fatal is not None:
        rest.append(f"then: {fatal}")
    total = sum(counts.values()) + (fatal is not None)
    if total:
        text += (f"\n(and {total} more finding{'s' * (total != 1)} in this launch: "
                 f"{'; '.join(rest)})")
    return KernelError(text)


def _coords(linear: int, dims: tuple) -> tuple[int, int, int]:
    x, y, _ = dims
    return (linear % x, linear // x % y, linear // (x * y))


def _where(site: dict) -> str:
    if not site.get("filename"):
        return "an unknown line"
    return source_position(site["filename"], site["line"])  # a notebook's cell by its number


def _source(site: dict) -> str:
    return f"\n    {site['source_line'].strip()}" if site.get("source_line") else ""


def _space(site: dict) -> str:
    space = site.get("space", "unknown")
    return "" if space == "unknown" else f"{space} "


def describe(kernel: Any, config: Any, w: np.ndarray) -> str:
    """One finding, in full."""
    sites = kernel.host.sites
    kind = int(w[H.SAN_KIND])
    site = sites[int(w[H.SAN_SITE])]
    block = _coords(int(w[H.SAN_FIRST_BLOCK]), config.grid)
    thread = _coords(int(w[H.SAN_THREAD]), config.block)
    ndim = int(w[H.SAN_NDIM])
    index = tuple(int(v) for v in w[H.SAN_INDEX:H.SAN_INDEX + ndim])
    shape = tuple(int(v) for v in w[H.SAN_SHAPE:H.SAN_SHAPE + ndim])
    head = f"kernel {kernel.name!r}: {TOOLS[kind]}: "
    if kind == H.SAN_KIND_BOUNDS:
        dim = int(w[H.SAN_DETAIL])
        return (f"{head}index {index[dim]} is out of bounds for dimension {dim} of array "
                f"{site['array']!r} (size {shape[dim]}): index {index} of a {_space(site)}"
                f"array of shape {shape} at {_where(site)}, block {block}, thread {thread}"
                f"{_source(site)}")
    if kind == H.SAN_KIND_INIT and int(w[H.SAN_DETAIL]) == H.INIT_GLOBAL:
        return (f"{head}read of uninitialized global memory: array {site['array']!r} at "
                f"index {index} (shape {shape}) at {_where(site)}, block {block}, thread "
                f"{thread}: no kernel or copy wrote this element of its kj.device_array "
                f"before{_source(site)}")
    if kind == H.SAN_KIND_INIT:
        return (f"{head}read of uninitialized shared memory: array {site['array']!r} at "
                f"index {index} (shape {shape}) at {_where(site)}, block {block}, thread "
                f"{thread}: no thread of the block wrote it before{_source(site)}")
    if kind == H.SAN_KIND_RACE:
        hazard, mine, theirs = HAZARDS[int(w[H.SAN_DETAIL])]
        other = int(w[H.SAN_OTHER])
        other_site = sites[other & H.SAN_SITE_MASK]
        other_thread = _coords(other >> H.SAN_THREAD_SHIFT & 0x7FF, config.block)
        if int(w[H.SAN_DETAIL]) == H.HAZARD_BLOCKS:
            other_block = _coords(int(w[H.SAN_OTHER_BLOCK]), config.grid)
            return (f"{head}{hazard} hazard between blocks on {_space(site)}array "
                    f"{site['array']!r} at index {index} (shape {shape}): thread {thread} of "
                    f"block {block} {mine} it at {_where(site)}, and thread {other_thread} of "
                    f"block {other_block} {theirs} it at {_where(other_site)} in the same "
                    f"launch{_source(site)}{_source(other_site)}")
        return (f"{head}{hazard} hazard on {_space(site)}array {site['array']!r} at index "
                f"{index} (shape {shape}) in block {block}: thread {thread} {mine} it at "
                f"{_where(site)}, and thread {other_thread} {theirs} it at "
                f"{_where(other_site)}, with no barrier between them{_source(site)}"
                f"{_source(other_site)}")
    detail = int(w[H.SAN_DETAIL])
    mask, missing = detail & 0xFFFFFFFF, detail >> 32 & 0xFFFFFFFF
    lane = int(w[H.SAN_THREAD]) % 32
    warp = int(w[H.SAN_THREAD]) // 32
    if missing == 1 << lane and not mask & (1 << lane):
        why = f"its own lane {lane} is not in the mask"
    else:
        lanes = [i for i in range(32) if missing >> i & 1]
        why = (f"lane{'s' * (len(lanes) > 1)} {_ranges(lanes)} of warp {warp}, named by the "
               f"mask, did not call it")
    return (f"{head}{site['op']}() with mask {mask:#010x} at {_where(site)}, block {block}, "
            f"thread {thread}: {why}{_source(site)}")


def _ranges(lanes: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, start = [], None
    for i, lane in enumerate(lanes):
        if start is None:
            start = lane
        if i + 1 == len(lanes) or lanes[i + 1] != lane + 1:
            out.append(str(start) if start == lane else f"{start}-{lane}")
            start = None
    return ", ".join(out)


__all__ = ["ENV", "UnwrittenMemory", "WorkerState", "is_checked", "launch_error", "register_symbols",
           "sanitize_from_env"]
