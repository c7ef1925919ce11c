"""The kernel parameter layout: where each parameter's bytes sit in the launch's slot storage.

One rule, read by both sides of a launch: the runtime's slot packer
(:class:`kaiojit.runtime.slots.SlotLayout`) writes arguments where it says, and the host
lowering (:mod:`kaiojit.lower.host_module`) reads the cpu backend's parameters from there.
Every parameter owns one 8-byte slot, except a CUtensorMap, which owns 16 consecutive slots
(128 bytes) and is still one parameter; it starts on a 64-byte boundary, as
``.param .align 64 .b8 p[128]`` wants, inside storage that is itself 64-byte aligned.
A value narrower than its slot sits in the slot's low bytes (little-endian), the rest zero.
This module imports only :mod:`kaiojit.types`.
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiojit.types import PARAM_PTR, PARAM_TENSORMAP, SCALARS

SLOT_BYTES = 8
TENSORMAP_BYTES = 128
TENSORMAP_SLOTS = TENSORMAP_BYTES // SLOT_BYTES
STORAGE_ALIGN = 64  # the storage's alignment, and a tensor map's inside it
TENSORMAP_ALIGN_SLOTS = STORAGE_ALIGN // SLOT_BYTES

# Bytes the driver reads for each parameter kind (``kaiojit.types.param_parts`` names them).
PARAM_BYTES: dict[str, int] = {name: t.itemsize for name, t in SCALARS.items()}
PARAM_BYTES[PARAM_PTR] = 8
PARAM_BYTES[PARAM_TENSORMAP] = TENSORMAP_BYTES


def align_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple``."""
    return (n + multiple - 1) // multiple * multiple


def slot_offsets(kinds: Iterable[str]) -> tuple[tuple[int, ...], int]:
    """The first slot of each parameter of the given kinds, in order, and how many slots the
    storage needs (at least one). An unknown kind is a ``ValueError``."""
    first, slot = [], 0
    for kind in kinds:
        if kind not in PARAM_BYTES:
            raise ValueError(f"unknown kernel parameter kind {kind!r}")
        if kind == PARAM_TENSORMAP:
            slot = align_up(slot, TENSORMAP_ALIGN_SLOTS)
            first.append(slot)
            slot += TENSORMAP_SLOTS
        else:
            first.append(slot)
            slot += 1
    return tuple(first), max(slot, 1)


__all__ = ["PARAM_BYTES", "SLOT_BYTES", "STORAGE_ALIGN", "TENSORMAP_ALIGN_SLOTS",
           "TENSORMAP_BYTES", "TENSORMAP_SLOTS", "align_up", "slot_offsets"]
