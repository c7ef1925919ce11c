"""Argument slots: the memory ``cuLaunchKernel`` reads kernel parameters from.

Every kernel parameter owns one 8-byte slot, except a CUtensorMap, which owns 16 consecutive
slots (128 bytes) and is still one parameter. The storage is 64-byte aligned, and a tensor map
starts on a 64-byte boundary, as ``.param .align 64 .b8 p[128]`` wants. Next to the storage
sits a ``void*[]`` holding each parameter's first-slot address; its integer address is what
``cuLaunchKernel`` gets as ``kernelParams``. The layout is computed once per signature
(:class:`SlotLayout`); a launch only writes values into an :class:`ArgSlots` made from it.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass

from kaiojit.abi import PARAM_BYTES, SLOT_BYTES, STORAGE_ALIGN, align_up, slot_offsets
from kaiojit.types import ScalarType

_STRUCTS: dict[str, struct.Struct] = {}


def slot_struct(t: ScalarType) -> struct.Struct:
    """The ``struct.Struct`` that packs one slot of a (non-complex) scalar type."""
    fmt = t.slot_format
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct("<" + fmt)
    return s


@dataclass(frozen=True, slots=True)
class SlotLayout:
    """Where each parameter lives: ``first_slot[i]`` for parameter ``i`` of kind ``kinds[i]``."""

    kinds: tuple[str, ...]
    first_slot: tuple[int, ...]
    slot_count: int

    @classmethod
    def for_kinds(cls, kinds: tuple[str, ...] | list[str]) -> SlotLayout:
        kinds = tuple(kinds)
        first, count = slot_offsets(kinds)  # the rule the host lowering reads them by
        return cls(kinds, first, count)

    def param_bytes(self, i: int) -> int:
        return PARAM_BYTES[self.kinds[i]]


class ArgSlots:
    """One writable copy of a :class:`SlotLayout`: aligned storage plus the ``void*[]``.

    The typed views (``u64``, ``i64``, ``f64`` indexed by slot; ``f32`` indexed by 2*slot)
    are memoryviews over the same bytes: writing through them is the launch's only work.
    """

    __slots__ = ("layout", "_raw", "address", "u64", "f64", "f32", "raw", "_params", "params_address",
                 "params_pointer")

    def __init__(self, layout: SlotLayout):
        self.layout = layout
        nbytes = layout.slot_count * SLOT_BYTES
        self._raw = ctypes.create_string_buffer(nbytes + STORAGE_ALIGN)
        base = ctypes.addressof(self._raw)
        self.address = align_up(base, STORAGE_ALIGN)
        offset = self.address - base
        self.raw = memoryview(self._raw).cast("B")[offset : offset + nbytes]
        self.u64 = self.raw.cast("Q")
        self.f64 = self.raw.cast("d")
        self.f32 = self.raw.cast("f")
        n = len(layout.kinds)
        self._params = (ctypes.c_void_p * max(n, 1))()
        for i, s in enumerate(layout.first_slot):
            self._params[i] = self.address + s * SLOT_BYTES
        self.params_address = ctypes.addressof(self._params)
        self.params_pointer = ctypes.c_void_p(self.params_address)

    # --- writers, one per parameter kind; ``slot`` is a first-slot index --------------------

    def write_int(self, slot: int, value: int, mask: int) -> None:
        """An integer of any width, wrapped to its bits as C does (two's complement)."""
        self.u64[slot] = value & mask

    def write_scalar(self, slot: int, t: ScalarType, value) -> None:
        """A scalar of type ``t`` as its type packs it (``ScalarFacts.slot_format``, through
        ``encode`` where the type has one). Raises ``OverflowError`` (a float beyond its
        format's range) and ``struct.error`` as ``struct`` does."""
        if t.facts.encode is not None:
            value = t.facts.encode(value)
        slot_struct(t).pack_into(self.raw, slot * SLOT_BYTES, value)

    def write_bytes(self, slot: int, data: bytes) -> None:
        start = slot * SLOT_BYTES
        self.raw[start : start + len(data)] = data

    # --- reading back (mock backend, tests) --------------------------------------------------

    def param_bytes(self, i: int) -> bytes:
        """The bytes the driver would read for parameter ``i``."""
        start = self.layout.first_slot[i] * SLOT_BYTES
        return bytes(self.raw[start : start + self.layout.param_bytes(i)])

    def all_param_bytes(self) -> tuple[bytes, ...]:
        return tuple(self.param_bytes(i) for i in range(len(self.layout.kinds)))

    def param_addresses(self) -> tuple[int, ...]:
        return tuple(int(self._params[i] or 0) for i in range(len(self.layout.kinds)))


class ThreadSlots:
    """Per-thread :class:`ArgSlots` for one layout, so concurrent launches never share bytes.

    ``cuLaunchKernel`` copies the parameters before it returns, so one thread can reuse its
    slots launch after launch; only different threads need different storage.
    """

    __slots__ = ("layout", "_local")

    def __init__(self, layout: SlotLayout):
        self.layout = layout
        self._local = threading.local()

    def get(self) -> ArgSlots:
        try:
            return self._local.slots
        except AttributeError:
            slots = self._local.slots = ArgSlots(self.layout)
            return slots
