"""``kj.TensorMap.tiled`` on the cpu backend: the map's type (``tensormap(dtype, ndim)``), a
launch with a map of the wrong type, the encode cache and the constraints (no GPU needed)."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit import tma_host
from kaiojit import types as kt
from kaiojit.runtime.args import ArgPacker
from kaiojit.runtime.backend import get_backend, set_backend
from kaiojit.runtime.slots import ArgSlots
from kaiojit.runtime.tensormap import TensorMap

RNG = np.random.default_rng()


@pytest.fixture
def cpu():
    previous = set_backend("cpu")
    yield get_backend()
    set_backend(previous)


def device_random(shape, dtype) -> rt.DeviceArray:
    return rt.to_device(RNG.standard_normal(shape).astype(dtype))


def test_a_tiled_map_on_the_cpu_backend_is_the_host_encoding_of_the_array(cpu):
    a = device_random((48, 80), np.float16)
    tm = TensorMap.tiled(a, box=(16, 32), swizzle="64B", oob_fill="nan")
    m = tma_host.decode(tm.bytes)
    assert (m.address, m.rank, m.elem_size) == (a.ptr, 2, 2)
    assert m.dims == (80, 48) and m.strides == (160,) and m.box == (32, 16)
    assert (m.swizzle, m.oob_fill) == (2, 1)
    assert tm.type == kt.TensorMapType(kt.float16, 2) and tm.array is a
    assert repr(tm) == "<kj.TensorMap tensormap(float16, 2) box=(16, 32)>"


def test_tensormap_types_spell_and_parse():
    t = kt.parse_type("tensormap(float32, 3)")
    assert t == kt.tensormap(kt.float32, 3) and str(t) == "tensormap(float32, 3)"
    assert kt.parse_type("tensormap") is kt.tensormap and str(kt.tensormap) == "tensormap"
    sig = kt.parse_signature("void(float32[:, ::1], tensormap(f2, 2), tensormap)")
    assert [str(a) for a in sig.args] == ["float32[:, ::1]", "tensormap(float16, 2)",
                                          "tensormap"]
    assert kt.param_parts(t) == (kt.PARAM_TENSORMAP,)
    with pytest.raises(ValueError, match=r"a tensormap has 1 to 5 dimensions, got 6 in "):
        kt.parse_type("tensormap(float32, 6)")
    with pytest.raises(ValueError, match=r"a tensormap's dtype must be a real scalar type, got "
                                         r"kj.complex64 in"):
        kt.parse_type("tensormap(complex64, 2)")


def test_a_bare_tensormap_accepts_any_map_a_typed_one_its_own_type():
    f32x2 = kt.tensormap(kt.float32, 2)
    assert kt.tensormap.accepts(f32x2) and kt.tensormap.accepts(kt.tensormap)
    assert f32x2.accepts(f32x2) and f32x2.accepts(kt.tensormap)  # raw bytes: unchecked
    assert not f32x2.accepts(kt.tensormap(kt.float16, 2))
    assert not f32x2.accepts(kt.tensormap(kt.float32, 3))
    assert not f32x2.accepts(kt.float32)


def test_a_map_of_another_type_is_a_type_error_naming_the_parameter(cpu):
    packer = ArgPacker([kt.int32, kt.tensormap(kt.float32, 2), kt.float32], ["n", "tm", "x"])
    slots = ArgSlots(packer.layout)
    good = TensorMap.tiled(device_random((32, 32), np.float32), box=(8, 8))
    packer.pack(slots, (7, good, 1.5), 0)
    assert slots.all_param_bytes()[1] == good.bytes
    wrong_dtype = TensorMap.tiled(device_random((32, 32), np.float16), box=(8, 8))
    with pytest.raises(TypeError, match=r"^parameter 'tm' is a tensormap\(float32, 2\): got a "
                                        r"map of type tensormap\(float16, 2\) \(box \(8, 8\)\)$"):
        packer.pack(slots, (7, wrong_dtype, 1.5), 0)
    wrong_rank = TensorMap.tiled(device_random((4, 32, 32), np.float32), box=(1, 8, 8))
    with pytest.raises(TypeError, match=r"^parameter 'tm' is a tensormap\(float32, 2\): got a "
                                        r"map of type tensormap\(float32, 3\)"):
        packer.pack(slots, (7, wrong_rank, 1.5), 0)
    with pytest.raises(TypeError, match=r"^parameter 'tm' is a tensormap\(float32, 2\): got "
                                        r"bytes$"):
        packer.pack(slots, (7, good.bytes, 1.5), 0)
    bare = ArgPacker([kt.tensormap], ["tm"])
    bare.pack(ArgSlots(bare.layout), (wrong_rank,), 0)  # a bare parameter takes any map


def test_the_same_map_twice_is_encoded_once(cpu, monkeypatch):
    calls = []
    encode = cpu.encode_tensormap_tiled

    def counting(**fields):
        calls.append(fields)
        return encode(**fields)

    monkeypatch.setattr(cpu, "encode_tensormap_tiled", counting)
    a = device_random((64, 96), np.float32)
    shape = tuple(int(n) for n in RNG.integers(1, 9, 2)) + (32,)
    first = TensorMap.tiled(a, box=shape[1:], swizzle="128B")
    again = TensorMap.tiled(a, box=[np.int64(n) for n in shape[1:]], swizzle="128B")
    assert len(calls) == 1 and again.bytes == first.bytes and again.box == first.box
    TensorMap.tiled(a, box=shape[1:], swizzle="64B" if shape[2] * 4 <= 64 else None)
    TensorMap.tiled(a[8:], box=shape[1:], swizzle="128B")  # another address
    TensorMap.tiled(a, box=shape[1:], swizzle="128B", oob_fill="nan")
    assert len(calls) == 4
    b = device_random((64, 96), np.float32)  # same geometry, other memory
    assert TensorMap.tiled(b, box=shape[1:], swizzle="128B").bytes != first.bytes
    assert len(calls) == 5


class ForeignArray:
    """A CAI array at a made-up address: the same geometry under two backends."""

    def __init__(self, ptr: int, shape: tuple[int, ...]):
        self.ptr, self.shape = ptr, shape

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"data": (self.ptr, False), "shape": self.shape, "typestr": "<f4", "version": 3}


def test_a_cached_map_is_not_reused_on_another_backend(cpu, mock):
    array = ForeignArray(0x7F0000 + 16 * int(RNG.integers(0, 1000)), (64, 64))
    set_backend(cpu)
    on_cpu = TensorMap.tiled(array, box=(8, 32))
    assert tma_host.decode(on_cpu.bytes).address == array.ptr
    set_backend(mock)
    on_mock = TensorMap.tiled(array, box=(8, 32))
    assert on_mock.bytes != on_cpu.bytes
    assert on_mock.bytes == mock.encode_tensormap_tiled(**_fields(array))
    set_backend(cpu)
    assert TensorMap.tiled(array, box=(8, 32)).bytes == on_cpu.bytes


def _fields(array: ForeignArray) -> dict:
    from kaiojit.runtime.tensormap import tiled_fields

    return tiled_fields(array.ptr, array.shape, (256, 4), "float32", (8, 32))


@pytest.mark.parametrize("kwargs, message", [
    (dict(box=(8, 16), element_strides=(2, 2)),
     "element_strides: the innermost traversal stride must be 1 without interleave, got 2"),
    (dict(box=8), "box: a tuple of 2 sizes, got 8"),
    (dict(box=(8, 16), element_strides=3), "element_strides: a tuple of 2 strides, got 3"),
    (dict(box=(8, 8), interleave="16B"), "interleave: an interleaved tensor map needs rank >= 3"),
    (dict(box=(8, 8), oob_fill="nan"), "oob_fill: NaN fill needs a floating-point array"),
])
def test_bad_maps_name_the_constraint(cpu, kwargs, message):
    a = rt.to_device(RNG.integers(0, 100, (32, 64)).astype(np.int32))
    with pytest.raises(ValueError) as info:
        TensorMap.tiled(a, **kwargs)
    assert str(info.value) == message


def test_the_cpu_backend_refuses_interleaved_maps(cpu):
    a = device_random((4, 8, 64), np.float16)
    with pytest.raises(ValueError, match=r"^interleave: the cpu backend does not model "
                                         r"interleaved tensor maps; use interleave=None$"):
        TensorMap.tiled(a, box=(1, 8, 8), interleave="16B")
