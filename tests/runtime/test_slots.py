"""Slot layout and packing: the seed runtime's cases, and every scalar kind's bytes."""

from __future__ import annotations

import struct
import threading

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit import types as kt
from kaiojit.runtime.args import ArgPacker
from kaiojit.runtime.slots import ArgSlots, SlotLayout
from kaiojit.runtime.tensormap import TensorMap

from .ptx_kernels import image

RNG = np.random.default_rng(1234)


def test_a_tensormap_between_two_arguments_shifts_neither():
    layout = SlotLayout.for_kinds(["ptr", "tensormap", "uint32"])
    assert len(layout.kinds) == 3, "one parameter per argument, not per slot"
    assert layout.first_slot == (0, 8, 24)  # the map starts on a 64-byte boundary
    slots = ArgSlots(layout)
    assert slots.address % 64 == 0
    assert slots.param_addresses()[1] % 64 == 0
    tm_bytes = RNG.integers(0, 256, 128, dtype=np.uint8).tobytes()
    slots.write_int(0, 0xDEADBEEF, 2**64 - 1)
    slots.write_bytes(8, tm_bytes)
    slots.write_int(24, 7, 2**32 - 1)
    assert slots.all_param_bytes() == (
        struct.pack("<Q", 0xDEADBEEF), tm_bytes, struct.pack("<I", 7))


def test_params_array_points_at_each_first_slot():
    layout = SlotLayout.for_kinds(["int8", "tensormap", "float64", "tensormap"])
    slots = ArgSlots(layout)
    addresses = slots.param_addresses()
    assert [a - slots.address for a in addresses] == [8 * s for s in layout.first_slot]
    assert layout.first_slot == (0, 8, 24, 32)


def test_a_zero_length_argument_still_gets_a_slot(mock):
    # A kernel without parameters still has storage, and a 0-d signature element gets a slot.
    assert SlotLayout.for_kinds([]).slot_count == 1
    packer = ArgPacker([kt.ArrayType(kt.float32, 1, "C"), kt.int32], ["empty", "n"])
    slots = ArgSlots(packer.layout)
    empty = rt.device_array(0, np.float32)
    packer.pack(slots, (empty, 9), 0)
    ptr, shape, n = slots.all_param_bytes()
    assert struct.unpack("<Q", ptr)[0] == empty.ptr
    assert struct.unpack("<q", shape)[0] == 0
    assert struct.unpack("<i", n)[0] == 9


SCALAR_CASES = [
    (kt.bool_, True, b"\x01"), (kt.bool_, False, b"\x00"),
    (kt.int8, -2, struct.pack("<b", -2)), (kt.int16, -300, struct.pack("<h", -300)),
    (kt.int32, -(2**31), struct.pack("<i", -(2**31))), (kt.int64, -5, struct.pack("<q", -5)),
    (kt.uint8, 255, b"\xff"), (kt.uint16, 65535, struct.pack("<H", 65535)),
    (kt.uint32, 2**32 - 1, struct.pack("<I", 2**32 - 1)),
    (kt.uint64, 2**64 - 1, struct.pack("<Q", 2**64 - 1)),
    (kt.float16, 1.5, np.float16(1.5).tobytes()), (kt.float32, 0.1, np.float32(0.1).tobytes()),
    (kt.float64, 0.1, struct.pack("<d", 0.1)),
    (kt.int32, np.int32(-7), struct.pack("<i", -7)), (kt.float32, 3, np.float32(3).tobytes()),
    (kt.int16, 70000, struct.pack("<H", 70000 & 0xFFFF)),  # wraps, as a C cast does
]


@pytest.mark.parametrize("t, value, expected", SCALAR_CASES)
def test_every_scalar_kind_writes_its_bytes(t, value, expected):
    packer = ArgPacker([kt.int64, t, kt.int64], ["before", "x", "after"])
    slots = ArgSlots(packer.layout)
    packer.pack(slots, (-1, value, 2**62), 0)
    before, got, after = slots.all_param_bytes()
    assert got == expected
    assert struct.unpack("<q", before)[0] == -1
    assert struct.unpack("<q", after)[0] == 2**62
    # the rest of the slot stays zero: the driver reads only the parameter's bytes anyway
    start = packer.layout.first_slot[1] * 8
    assert bytes(slots.raw[start + len(expected) : start + 8]) == bytes(8 - len(expected))


def test_random_scalars_round_trip():
    types = [kt.int8, kt.uint16, kt.int32, kt.uint64, kt.float32, kt.float64]
    packer = ArgPacker(types, [f"a{i}" for i in range(len(types))])
    slots = ArgSlots(packer.layout)
    for _ in range(50):
        values = [int(RNG.integers(-128, 128)), int(RNG.integers(0, 2**16)),
                  int(RNG.integers(-(2**31), 2**31)), int(RNG.integers(0, 2**63)) * 2 + 1,
                  float(RNG.standard_normal()), float(RNG.standard_normal())]
        packer.pack(slots, values, 0)
        got = slots.all_param_bytes()
        fmts = ["<b", "<H", "<i", "<Q", "<f", "<d"]
        for fmt, v, g in zip(fmts, values, got):
            want = struct.pack(fmt, v)
            assert g == want


def test_array_parameters_are_pointer_shape_and_byte_strides(mock):
    host = RNG.standard_normal((6, 8)).astype(np.float32)
    a = rt.to_device(host)
    view = a[1:5, ::3]  # layout 'A': strides travel
    packer = ArgPacker([kt.parse_type("float32[:, :]"), kt.parse_type("float32[:, ::1]")],
                       ["v", "c"])
    slots = ArgSlots(packer.layout)
    packer.pack(slots, (view, a), 0)
    words = [struct.unpack("<q", b)[0] for b in slots.all_param_bytes()]
    assert words == [a.ptr + 1 * 32, 4, 3, 32, 12, a.ptr, 6, 8]
    assert np.array_equal(view.copy_to_host(), host[1:5, ::3])


def test_contiguous_array_passed_to_a_strided_parameter_gets_its_strides(mock):
    a = rt.device_array((3, 5), np.float64, order="F")
    packer = ArgPacker([kt.parse_type("float64[:, :]")], ["a"])
    slots = ArgSlots(packer.layout)
    packer.pack(slots, (a,), 0)
    words = [struct.unpack("<q", b)[0] for b in slots.all_param_bytes()]
    assert words == [a.ptr, 3, 5, 8, 24]


def test_tensormap_parameter_bytes(mock):
    tm = TensorMap.tiled(rt.device_array((32, 64), np.float32), box=(8, 16))
    packer = ArgPacker([kt.int32, kt.tensormap, kt.float32], ["a", "tm", "b"])
    slots = ArgSlots(packer.layout)
    packer.pack(slots, (5, tm, 2.5), 0)
    a, got, b = slots.all_param_bytes()
    assert got == tm.bytes and len(got) == 128
    assert a == struct.pack("<i", 5) and b == struct.pack("<f", 2.5)


def test_threads_launching_at_once_do_not_mix_arguments(mock):
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n)\n{ ret; }"
    loaded = mock.load_kernel(image("k", ptx, "void(int64, float64, int32)", "a b c"))
    errors = []

    def worker(tid: int) -> None:
        try:
            for i in range(300):
                loaded.launch(1, 32, tid, 0, (tid * 1000 + i, float(tid) + i / 1000, -tid))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(mock.launches) == 8 * 300
    for launch in mock.launches:
        tid = launch.stream
        a = struct.unpack("<q", launch.params[0])[0]
        b = struct.unpack("<d", launch.params[1])[0]
        c = struct.unpack("<i", launch.params[2])[0]
        i = a - tid * 1000
        assert 0 <= i < 300 and b == float(tid) + i / 1000 and c == -tid
