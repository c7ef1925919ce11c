"""Faults a ``debug=True`` kernel recorded on the GPU, reported at the next synchronization.

A debug kernel's module holds a ``kaiojit_fault`` record (``kaiojit/lower/gpu_faults.py``):
the first out-of-bounds index or failed ``assert`` of its launches, with the site (file, line,
and the array or the assert's message) and the block and thread. The first launch of such a
kernel on a device puts its module on the backend's watch list; when the host next waits for
the device (``kj.synchronize()``, a stream's ``synchronize()``, a synchronous copy to the
host), every watched record is read back (on the cuda backend with ``cuModuleGetGlobal`` and
``cuMemcpyDtoH``); a recorded fault is cleared and raised as :class:`kaiojit.KernelError`,
worded as the cpu backend words it. A debug kernel with a ``raise`` (numba's exceptions) does
not wait for a later wait: its launch synchronizes and raises there, as numba's does
(``kaiojit/runtime/launch.py``).
"""

from __future__ import annotations

import ctypes
from typing import Any

from kaiojit.errors import CudaError, KernelError, raised_exception, source_position
from kaiojit.target import (
    ERR_ASSERT,
    ERR_BOUNDS,
    ERR_RAISE,
    FAULT_BLOCK,
    FAULT_EXTENT,
    FAULT_GLOBAL,
    FAULT_INDEX,
    FAULT_KIND,
    FAULT_SITE,
    FAULT_THREAD,
    FAULT_WORDS,
)


def _where(site: dict) -> tuple[str, str]:
    """``file:line`` of a site, and its source line as a message ends with it."""
    where = (source_position(site["filename"], site["line"]) if site.get("filename")
             else "an unknown line")
    source = f"\n    {site['source_line'].strip()}" if site.get("source_line") else ""
    return where, source


def bounds_message(kernel: str, site: dict, index: int, extent: int, block: tuple,
                   thread: tuple) -> str:
    """How an out-of-bounds index is reported, on every backend."""
    where, source = _where(site)
    return (f"kernel {kernel!r}: index {index} is out of bounds for dimension {site['dim']} of "
            f"array {site['array']!r} (size {extent}) at {where}, block {block}, thread "
            f"{thread}{source}")


def assert_message(kernel: str, site: dict, block: tuple, thread: tuple) -> str:
    """How a failed ``assert`` is reported, on every backend."""
    where, source = _where(site)
    text = f": {site['message']}" if site.get("message") else ""
    return (f"kernel {kernel!r}: assertion failed at {where}, block {block}, thread {thread}"
            f"{text}{source}")


def raise_error(kernel: str, site: dict, block: tuple, thread: tuple) -> BaseException:
    """The exception a kernel's ``raise`` recorded (kaiojit/frontend/raising.py), on every
    backend, worded as numba words it."""
    where = (f"In function {kernel!r}, file {site['filename']}, line {site['line']}, "
             if site.get("filename") else "")
    return raised_exception(site["exception"], tuple(site["args"]),
                            f"{where}tid={list(thread)} ctaid={list(block)}")


def fault_error(kernel: str, sites: tuple, record: list[int]) -> BaseException:
    """The KernelError of a filled ``kaiojit_fault`` record (signed 64-bit words)."""
    kind = record[FAULT_KIND]
    assert kind in (ERR_BOUNDS, ERR_ASSERT, ERR_RAISE), record
    site = sites[record[FAULT_SITE]]
    block = tuple(record[FAULT_BLOCK:FAULT_BLOCK + 3])
    thread = tuple(record[FAULT_THREAD:FAULT_THREAD + 3])
    if kind == ERR_RAISE:
        return raise_error(kernel, site, block, thread)
    if kind == ERR_ASSERT:
        return KernelError(assert_message(kernel, site, block, thread))
    return KernelError(bounds_message(kernel, site, record[FAULT_INDEX],
                                      record[FAULT_EXTENT], block, thread))


class FaultWatch:
    """The debug kernels' records on one backend: ``(device, module) -> (address, name,
    sites)``, filled at their first launch on each device. A backend that keeps one has
    ``module_global(module, name, device)`` (an address), ``read_device(dst, address, nbytes,
    device)`` and ``zero_device(address, nbytes, device)``, synchronous and not themselves
    checking faults. A launch of a kernel without ``debug=True`` never reaches this class, and
    a wait reads nothing while no debug kernel ran (``bool(watch)`` is False)."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], tuple[int, str, tuple]] = {}
        self.checking = False
        self.pending: list[KernelError] = []  # faults of modules unloaded before a wait

    def __bool__(self) -> bool:
        return bool(self.records) or bool(self.pending)

    def watch(self, backend: Any, device: int, module: Any, image: Any) -> None:
        key = (device, id(module))  # a module lives as long as its loaded kernel
        if key in self.records:
            return
        address = backend.module_global(module, FAULT_GLOBAL, device)
        self.records[key] = (int(address), image.py_name, tuple(image.fault_sites))

    def forget(self, backend: Any, device: int, module: Any) -> None:
        """Stop watching a module about to be unloaded: its record's memory goes with it (a
        later read would fail) and a module loaded later may reuse the Python object's id.
        A fault it recorded is read now and raised at the next wait, so it is not lost."""
        entry = self.records.pop((device, id(module)), None)
        if entry is None:
            return
        address, name, sites = entry
        words = (ctypes.c_int64 * FAULT_WORDS)()
        try:
            backend.read_device(ctypes.addressof(words), address, ctypes.sizeof(words), device)
        except CudaError:  # the context is going away (a sticky error, interpreter exit)
            return
        if words[FAULT_KIND] != 0:
            self.pending.append(fault_error(name, sites, list(words)))

    def check(self, backend: Any) -> None:
        """Raise the first recorded fault (clearing it); called after the host waited."""
        if self.checking:
            return
        if self.pending:
            raise self.pending.pop(0)
        self.checking = True
        try:
            words = (ctypes.c_int64 * FAULT_WORDS)()
            for (device, _), (address, name, sites) in list(self.records.items()):
                backend.read_device(ctypes.addressof(words), address, ctypes.sizeof(words),
                                    device)
                if words[FAULT_KIND] == 0:
                    continue
                backend.zero_device(address, ctypes.sizeof(words), device)
                raise fault_error(name, sites, list(words))
        finally:
            self.checking = False
