"""Faults a ``debug=True`` kernel recorded on the GPU, reported at the next synchronization.

A debug kernel's module holds a ``kaiojit_fault`` record (``kaiojit/lower/gpu_faults.py``):
the first out-of-bounds index of its launches, with the site (file, line, array) and the
block and thread. The first launch of such a kernel on a device puts its module on the
backend's watch list; when the host next waits for the device (``kj.synchronize()``, a
stream's ``synchronize()``, a synchronous copy to the host), every watched record is read
back with ``cuModuleGetGlobal`` and ``cuMemcpyDtoH``; a recorded fault is cleared and raised
as :class:`kaiojit.KernelError`, worded as the cpu backend words it.
"""

from __future__ import annotations

import ctypes
from typing import Any

from kaiojit.errors import KernelError
from kaiojit.runtime.driver import check
from kaiojit.target import (
    ERR_BOUNDS, FAULT_BLOCK, FAULT_EXTENT, FAULT_GLOBAL, FAULT_INDEX, FAULT_KIND, FAULT_SITE,
    FAULT_THREAD, FAULT_WORDS,
)


def bounds_message(kernel: str, site: dict, index: int, extent: int, block: tuple,
                   thread: tuple) -> str:
    """How an out-of-bounds index is reported, on every backend."""
    where = f"{site['filename']}:{site['line']}" if site.get("filename") else "an unknown line"
    source = f"\n    {site['source_line'].strip()}" if site.get("source_line") else ""
    return (f"kernel {kernel!r}: index {index} is out of bounds for dimension {site['dim']} of "
            f"array {site['array']!r} (size {extent}) at {where}, block {block}, thread "
            f"{thread}{source}")


def fault_error(kernel: str, sites: tuple, record: list[int]) -> KernelError:
    """The KernelError of a filled ``kaiojit_fault`` record (signed 64-bit words)."""
    assert record[FAULT_KIND] == ERR_BOUNDS, record
    site = sites[record[FAULT_SITE]]
    block = tuple(record[FAULT_BLOCK:FAULT_BLOCK + 3])
    thread = tuple(record[FAULT_THREAD:FAULT_THREAD + 3])
    return KernelError(bounds_message(kernel, site, record[FAULT_INDEX],
                                      record[FAULT_EXTENT], block, thread))


class FaultWatch:
    """The debug kernels' records on one backend: ``(device, module) -> (address, name,
    sites)``, filled at their first launch on each device."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], tuple[int, str, tuple]] = {}
        self.checking = False

    def __bool__(self) -> bool:
        return bool(self.records)

    def watch(self, backend: Any, device: int, module: Any, image: Any) -> None:
        key = (device, id(module))  # a module lives as long as its loaded kernel
        if key in self.records:
            return
        pushed = backend._on_device(device)
        try:
            address, _ = check(backend.drv.cuModuleGetGlobal(module, FAULT_GLOBAL.encode()),
                               f"kernel {image.name!r}: its fault record")
        finally:
            if pushed:
                backend._pop()
        self.records[key] = (int(address), image.py_name, tuple(image.fault_sites))

    def check(self, backend: Any) -> None:
        """Raise the first recorded fault (clearing it); called after the host waited."""
        if self.checking:
            return
        self.checking = True
        try:
            drv = backend.drv
            words = (ctypes.c_int64 * FAULT_WORDS)()
            for (device, _), (address, name, sites) in list(self.records.items()):
                pushed = backend._on_device(device)
                try:
                    check(drv.cuMemcpyDtoH(ctypes.addressof(words), address,
                                           ctypes.sizeof(words)), "reading a fault record")
                    if words[FAULT_KIND] == 0:
                        continue
                    check(drv.cuMemsetD8(address, 0, ctypes.sizeof(words)),
                          "clearing a fault record")
                finally:
                    if pushed:
                        backend._pop()
                raise fault_error(name, sites, list(words))
        finally:
            self.checking = False
