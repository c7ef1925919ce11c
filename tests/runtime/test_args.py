"""typeof and the packer's errors, on the mock backend."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit import types as kt
from kaiojit.errors import PerformanceWarning
from kaiojit.runtime.args import ArgPacker
from kaiojit.runtime.slots import ArgSlots
from kaiojit.runtime.tensormap import TensorMap

from .ptx_kernels import image

EMPTY_PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n)\n{ ret; }"
RNG = np.random.default_rng(7)


class FakeCai:
    """A foreign device array speaking __cuda_array_interface__ v2."""

    def __init__(self, ptr, shape, typestr, strides=None, version=2):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": typestr, "strides": strides,
                                         "version": version}


class CaiProperty:
    def __init__(self, cai):
        self._cai = cai

    @property
    def __cuda_array_interface__(self):
        return self._cai


def test_typeof_python_and_numpy_scalars():
    assert rt.typeof(3) is kt.int64
    assert rt.typeof(2.5) is kt.float64
    assert rt.typeof(True) is kt.bool_
    for dtype in ["int8", "uint16", "int32", "uint64", "float16", "float32", "float64", "bool"]:
        assert rt.typeof(np.dtype(dtype).type(1)) == kt.from_dtype(dtype)


def test_typeof_python_ints_past_int64_is_an_error_not_a_wrap():
    lo, hi = -(1 << 63), (1 << 63) - 1
    for v in (lo, hi, int(RNG.integers(lo, hi, dtype=np.int64))):
        assert rt.typeof(v) is kt.int64
    with pytest.raises(TypeError, match=rf"^the Python int {hi + 1} does not fit int64, the type "
                                        r"a Python int is passed as \(np\.uint64\(\.\.\.\) "
                                        r"passes an unsigned one\)$"):
        rt.typeof(hi + 1)
    for v in (lo - 1, 1 << 64, -(1 << 70)):
        with pytest.raises(TypeError, match=rf"^the Python int {v} does not fit int64, the type "
                                            r"a Python int is passed as$"):
            rt.typeof(v)


def test_a_python_int_past_int64_names_the_parameter_after_fast_launches(mock):
    import kaiojit as kj

    @kj.jit
    def shift(out, s):
        out[0] = s >> 3

    out = rt.device_array(1, np.int64)
    small = int(RNG.integers(1, 1 << 40))
    shift[1, 1](out, small)
    shift[1, 1](out, small)  # the fast form now
    count = len(mock.launches)
    big = (1 << 63) + int(RNG.integers(1, 1 << 40))
    with pytest.raises(TypeError, match=rf"<locals>\.shift\(\): parameter 's': the Python int "
                                        rf"{big} does not fit int64"):
        shift[1, 1](out, big)
    assert len(mock.launches) == count  # nothing launched with a wrapped value
    shift[1, 1](out, np.uint64(big))  # the unsigned spelling: its own specialization
    assert big.to_bytes(8, "little") in mock.launches[-1].params


def test_typeof_numpy_layouts():
    a = np.zeros((4, 6), np.float32)
    assert str(rt.typeof(a)) == "float32[:, ::1]"
    assert str(rt.typeof(np.asfortranarray(a))) == "float32[::1, :]"
    assert str(rt.typeof(a[:, ::2])) == "float32[:, :]"
    assert str(rt.typeof(a[:, 1])) == "float32[:]"
    assert str(rt.typeof(a[1])) == "float32[::1]"  # 1-D contiguous is C
    assert str(rt.typeof(a[:, :1])) == "float32[:, :]"
    assert str(rt.typeof(np.zeros((1, 5), np.int8)[:, ::1])) == "int8[:, ::1]"


def test_typeof_cai_objects_v2_and_v3():
    # 16-byte aligned pointers and rows: align=16; a row of 3 float32s (12 bytes) is not
    assert str(rt.typeof(FakeCai(0x1000, (3, 4), "<f4"))) == "float32[:, ::1, align=16]"
    assert str(rt.typeof(FakeCai(0x1000, (4, 3), "<f4"))) == "float32[:, ::1]"
    assert str(rt.typeof(FakeCai(0x1004, (3, 4), "<f4"))) == "float32[:, ::1]"
    assert str(rt.typeof(FakeCai(0x1000, (3, 4), "<i8", (8, 24), 3))) == "int64[::1, :]"
    assert str(rt.typeof(FakeCai(0x1000, (3, 4), "<u2", (16, 4), 3))) == "uint16[:, :, align=16]"
    assert str(rt.typeof(CaiProperty({"data": (0x2000, False), "shape": (5,), "typestr": "<f8",
                                      "version": 3}))) == "float64[::1, align=16]"


def test_typeof_device_array_is_cached_and_tensormap(mock):
    a = rt.device_array((3, 4), np.float16)
    assert rt.typeof(a) is rt.typeof(a) and str(rt.typeof(a)) == "float16[:, ::1]"
    assert str(rt.typeof(a[:, 1:3])) == "float16[:, :]"
    tm = TensorMap.tiled(rt.device_array((16, 16), np.float32), box=(8, 8))
    assert rt.typeof(tm) == kt.TensorMapType(kt.float32, 2) and str(rt.typeof(tm)) == \
        "tensormap(float32, 2)"
    assert rt.typeof(TensorMap(tm.bytes)) is kt.tensormap  # raw bytes: untyped


def test_typeof_unsupported_object():
    with pytest.raises(TypeError, match=r"cannot pass an object of type builtins\.str"):
        rt.typeof("hello")


def _loaded(mock, sig, names):
    return mock.load_kernel(image("k", EMPTY_PTX, sig, names))


def test_wrong_number_of_arguments_names_the_missing_parameter(mock):
    k = _loaded(mock, "void(float32[::1], float32, int32)", "out a n")
    with pytest.raises(TypeError, match=r"^kernel takes 3 arguments, got 1: missing 'a', 'n'$"):
        k.launch(1, 1, None, 0, (rt.device_array(3, np.float32),))
    with pytest.raises(TypeError, match=r"kernel takes 3 arguments \(out, a, n\), got 4"):
        k.launch(1, 1, None, 0, (rt.device_array(3, np.float32), 1.0, 1, 2))
    assert mock.launches == []


def test_unsupported_object_names_the_parameter(mock):
    k = _loaded(mock, "void(float32[::1], float32, int32)", "out a n")
    out = rt.device_array(3, np.float32)
    with pytest.raises(TypeError, match=r"^parameter 'out' is an array \(float32\[::1\]\): "
                                        r"got list$"):
        k.launch(1, 1, None, 0, ([1, 2], 1.0, 1))
    with pytest.raises(TypeError, match=r"^parameter 'a' is float32: got str 'x'$"):
        k.launch(1, 1, None, 0, (out, "x", 1))
    with pytest.raises(TypeError, match=r"^parameter 'n' is int32: got float 1\.5, which is not "
                                        r"an integer$"):
        k.launch(1, 1, None, 0, (out, 1.0, 1.5))
    assert mock.launches == []


def test_wrong_array_type_names_the_parameter(mock):
    k = _loaded(mock, "void(float32[:, ::1])", "grid2d")
    with pytest.raises(TypeError, match=r"parameter 'grid2d' is float32\[:, ::1\]: got an array "
                                        r"of type float64\[:, ::1, align=16\]"):
        k.launch(1, 1, None, 0, (rt.device_array((2, 2), np.float64),))
    with pytest.raises(TypeError, match=r"got an array of type float32\[:, :, align=16\]"):
        k.launch(1, 1, None, 0, (rt.device_array((2, 4), np.float32)[:, ::2],))


def test_array_on_another_device_names_the_parameter():
    from kaiojit.runtime.backend import set_backend
    from kaiojit.runtime.mock import MockBackend

    mock = MockBackend(device_count=2)
    previous = set_backend(mock)
    try:
        with rt.device(1):
            on_1 = rt.device_array(4, np.float32)
        k = _loaded(mock, "void(float32[::1])", "buf")
        with pytest.raises(TypeError, match=r"^parameter 'buf': the array is on device 1, the "
                                            r"launch is on device 0$"):
            k.launch(1, 1, None, 0, (on_1,))
        with rt.device(1):
            k.launch(1, 1, None, 0, (on_1,))
        assert mock.launches[-1].device == 1
    finally:
        set_backend(previous)


def test_cai_object_packs_pointer_shape_strides(mock):
    k = _loaded(mock, "void(int32[:, :])", "m")
    k.launch(1, 1, None, 0, (FakeCai(0xABC00, (3, 5), "<i4", (40, 8), 3),))
    words = [struct.unpack("<q", p)[0] for p in mock.launches[-1].params]
    assert words == [0xABC00, 3, 5, 40, 8]


def test_numpy_arrays_are_copied_in_and_back_with_a_warning(mock):
    host = RNG.standard_normal(16).astype(np.float32)
    k = _loaded(mock, "void(float32[::1])", "data")
    # numba's words first (numba users filter the warning by them), then kaiojit's
    with pytest.warns(PerformanceWarning, match=r"^Host array used in CUDA kernel will incur "
                      r"copy overhead to/from device: parameter 'data' \(a NumPy array\) is "
                      r"copied"):
        k.launch(1, 1, None, 0, (host.copy(),))
    ptr = struct.unpack("<Q", mock.launches[-1].params[0])[0]
    assert ptr != host.ctypes.data  # a device copy was passed, not the host array


def test_numbas_warning_filter_silences_the_copy_warning(mock):
    import warnings

    host = RNG.standard_normal(4).astype(np.float32)
    k = _loaded(mock, "void(float32[::1])", "data")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="Host array used in CUDA kernel")
        k.launch(1, 1, None, 0, (host.copy(),))
    assert not [w for w in caught if issubclass(w.category, PerformanceWarning)]


def test_numpy_copy_back_writes_results_into_the_host_array(mock):
    host = RNG.standard_normal(8).astype(np.float64)
    expected = host * 3

    class Tripling(type(mock)):
        def launch_typed(self, fn, grid, block, shared, stream, slots, cluster=None):
            ptr = struct.unpack("<Q", slots.param_bytes(0))[0]
            n = struct.unpack("<q", slots.param_bytes(1))[0]
            view = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_double * n).from_address(ptr))
            view *= 3

    from kaiojit.runtime.backend import set_backend

    backend = Tripling()
    previous = set_backend(backend)
    try:
        k = backend.load_kernel(image("k", EMPTY_PTX, "void(float64[::1])", "x"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PerformanceWarning)
            k.launch(1, 1, None, 0, (host,))
        assert np.array_equal(host, expected)
    finally:
        set_backend(previous)


def test_bool_and_numpy_scalar_arguments(mock):
    k = _loaded(mock, "void(bool, float16, uint8)", "flag h b")
    k.launch(1, 1, None, 0, (np.bool_(True), np.float16(-2.0), np.uint8(200)))
    assert mock.launches[-1].params == (b"\x01", np.float16(-2.0).tobytes(), b"\xc8")


def test_packer_names_default_to_positions():
    packer = ArgPacker([kt.int32], None)
    with pytest.raises(TypeError, match=r"parameter 'arg0' is int32"):
        packer.pack(ArgSlots(packer.layout), ("no",), 0)
