"""The fast launch of every kind of launch on the mock backend: ``kernel[grid, block]`` as a plain
function, PyTorch- and CuPy-like arrays and their fallbacks, kj.constexpr kernels, kj.autotune's
chosen configuration, the builtin-function trampoline and KAIOJIT_LAUNCH. Each fast launch is
compared with the bytes the general path packs for the same arguments."""

from __future__ import annotations

import ctypes
import gc
import types

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime.native import launchrecord
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.native.fastlaunch import source_of
from kaiojit.runtime.mock import MockBackend
from kaiojit.errors import TypingError
from tests.runtime.fake_arrays import CArray, Tensor, ndarray

RNG = np.random.default_rng()


@pytest.fixture(params=["native", "ex", "ctypes"])
def mock(request):
    backend = MockBackend(device_count=2, launch_mode=request.param)
    previous = set_backend(backend)
    yield backend
    set_backend(previous)


def saxpy_py(out, x, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + out[i]


def scaled_py(out, x, a, STEP: kj.constexpr):
    i = kj.grid(1) * STEP
    if i < x.shape[0]:
        out[i] = a * x[i]


@pytest.fixture
def saxpy():
    return kj.jit(saxpy_py)  # a dispatcher of its own: no launcher of another test's backend


@pytest.fixture
def scaled():
    return kj.jit(scaled_py)


def device(n, dtype=np.float32):
    return kj.to_device(RNG.standard_normal(n).astype(dtype))


def general_bytes(mock, kernel, grid, block, args):
    """What the general path packs for ``args`` (the kernel's loaded form, called directly)."""
    loaded = kernel.loaded_kernel(tuple(args))
    assert loaded.backend is mock
    loaded.launch(grid, block, None, 0, tuple(kernel.passed_args(tuple(args))))
    return mock.launches[-1].params


def test_getitem_returns_the_fast_function(mock, saxpy):
    n = int(RNG.integers(100, 900))
    launcher = saxpy[3, 128]
    launcher(device(n), device(n), np.float32(RNG.uniform(-4, 4)), np.int32(n))
    fast = saxpy[3, 128]
    assert isinstance(fast, types.FunctionType) and fast is launcher.fast
    assert saxpy[3, 128] is fast  # cached: no lookup work beyond the config's
    text = source_of(fast)
    assert text.count("if (") == 1 and text.count("PACK(") == 1  # one guard, one pack
    for _ in range(3):
        n = int(RNG.integers(100, 900))
        args = (device(n), device(n), np.float32(RNG.uniform(-4, 4)), np.int32(n))
        before = mock.fast_launches
        saxpy[3, 128](*args)
        assert mock.fast_launches == before + 1
        assert mock.launches[-1].params == general_bytes(mock, saxpy, 3, 128, args)


def test_a_value_the_format_cannot_pack_goes_through_the_general_path(mock):
    @kj.jit("void(float32[::1, align=16], int64, float32)")
    def k(out, m, a):
        out[0] = a + m
    out = device(4)
    launcher = k[1, 1]
    launcher(out, 5, 1.5)
    fast, rebuilds = launcher.fast, launcher.rebuilds
    before = mock.fast_launches
    k[1, 1](out, 2**63 + 5, 1e300)  # beyond int64 and float32: wrapped and inf, as C does
    assert mock.fast_launches == before
    assert mock.launches[-1].params[2] == (5 - 2**63).to_bytes(8, "little", signed=True)
    assert mock.launches[-1].params[3] == np.float32(np.inf).tobytes()
    assert launcher.fast is fast and launcher.rebuilds == rebuilds  # no rebuild for a value
    k[1, 1](out, -7, 2.5)
    assert mock.fast_launches == before + 1


def test_a_kept_older_fast_form_hands_over_to_the_newer_one(mock, saxpy):
    n = int(RNG.integers(100, 900))
    launcher = saxpy[2, 64]
    launcher(device(n), device(n), np.float32(1.5), np.int32(n))
    old = saxpy[2, 64]
    launcher(device(n, np.float64), device(n, np.float64), np.float64(2.5), np.int32(n))
    assert saxpy[2, 64] is not old and len(saxpy.signatures) >= 2
    before = mock.fast_launches
    args = (device(n, np.float64), device(n, np.float64), np.float64(-0.5), np.int32(n))
    old(*args)  # misses, hands the call to the launcher's form for these classes
    assert mock.fast_launches == before + 1
    assert mock.launches[-1].params == general_bytes(mock, saxpy, 2, 64, args)


@pytest.mark.parametrize("kind", [Tensor, ndarray, CArray], ids=["torch", "cupy", "cupy-c-getters"])
def test_foreign_arrays_take_the_fast_path_and_fall_back(mock, kind, saxpy):
    n = int(RNG.integers(64, 512))
    a = np.float32(RNG.uniform(-4, 4))
    launcher = saxpy[1, 64]
    launcher(kind(device(n)), kind(device(n)), a, np.int32(n))
    assert launcher.fast is not None
    out, x = kind(device(n)), kind(device(n))
    before = mock.fast_launches
    saxpy[1, 64](out, x, a, np.int32(n))
    assert mock.fast_launches == before + 1
    params = mock.launches[-1].params
    assert params[0] == out.array.ptr.to_bytes(8, "little")
    assert params[2] == x.array.ptr.to_bytes(8, "little") and params[3] == n.to_bytes(8, "little")
    # another device: the general path refuses it, naming the devices
    with pytest.raises(TypeError, match=r"parameter 'x': the array is on device 1, the launch "
                                        r"is on device 0"):
        saxpy[1, 64](out, kind(x.array, device=1), a, np.int32(n))
    # another dtype: another specialization, launched by the general path
    wide = kind(device(n, np.float64))
    saxpy[1, 64](out, wide, a, np.int32(n))
    assert "float64[::1, align=16]" in {str(t) for s in saxpy.signatures for t in s.args}
    # unaligned (sliced off by one element): the unaligned specialization
    shifted = kind(device(n + 1)[1:])
    saxpy[1, 64](out, shifted, a, np.int32(n))
    assert mock.launches[-1].params[2] == shifted.array.ptr.to_bytes(8, "little")
    assert "float32[::1]" in {str(t) for s in saxpy.signatures for t in s.args}
    # not contiguous: layout 'A', its stride passed in bytes
    strided = device(2 * n)[::2]
    saxpy[1, 64](out, Tensor(strided, contiguous=False) if kind is Tensor else kind(strided),
                 a, np.int32(n))
    assert mock.launches[-1].params[4] == (8).to_bytes(8, "little")
    # back to the first kinds: fast again
    before = mock.fast_launches
    saxpy[1, 64](out, x, a, np.int32(n))
    saxpy[1, 64](out, x, a, np.int32(n))
    assert mock.fast_launches >= before + 1


def test_cupy_vectors_read_ndim_and_size_and_fall_back_on_another_rank(mock, saxpy):
    n = int(RNG.integers(64, 512))
    out, x = ndarray(device(n)), ndarray(device(n))
    launcher = saxpy[1, 64]
    launcher(out, x, np.float32(1.5), np.int32(n))
    text = source_of(launcher.fast)
    assert "a1.ndim == 1" in text and "a1.size" in text and "a1.shape" not in text
    m = int(RNG.integers(64, 512))
    y = ndarray(device(m))
    before = mock.fast_launches
    saxpy[1, 64](out, y, np.float32(1.5), np.int32(n))
    assert mock.fast_launches == before + 1
    assert mock.launches[-1].params[3] == m.to_bytes(8, "little")  # y's length, from size
    flat = device(4 * m)
    x2 = ndarray(flat)
    x2.shape, x2.strides = (4, m), (4 * m, 4)  # a 2-D view: not this kernel's rank
    # the general path specializes saxpy for it, whose `a * x[i]` is then an array
    line = next(i for i, ln in enumerate(open(__file__), 1) if "out[i] = a * x[i]" in ln)
    with pytest.raises(TypingError, match=rf"test_fastlaunch_kinds.py:{line}:18: unsupported "
                                          r"operand types for \*: float32 and an array "
                                          r"float32\[::1\]"):
        saxpy[1, 64](out, x2, np.float32(1.5), np.int32(n))
    assert mock.fast_launches == before + 1


def test_contiguity_changed_in_place_falls_back(mock, saxpy):
    n = int(RNG.integers(64, 512))
    out, x = Tensor(device(n)), Tensor(device(n))
    launcher = saxpy[1, 32]
    launcher(out, x, np.float32(2.0), np.int32(n))
    x.contiguous = False  # the same object, now saying it is not contiguous: tested each launch
    before, count = mock.fast_launches, len(mock.launches)
    saxpy[1, 32](out, x, np.float32(2.0), np.int32(n))
    assert mock.fast_launches == before and len(mock.launches) == count + 1  # general path
    x.contiguous = True
    saxpy[1, 32](out, x, np.float32(2.0), np.int32(n))
    assert mock.fast_launches == before + 1


def test_device_arrays_and_tensors_alternate_on_their_own_fast_forms(mock, saxpy):
    n = int(RNG.integers(64, 512))
    arrays = (device(n), device(n))
    tensors = (Tensor(device(n)), Tensor(device(n)))
    for args in (arrays, tensors):
        saxpy[1, 128](*args, np.float32(1.0), np.int32(n))
    before = mock.fast_launches
    for _ in range(3):
        for args in (arrays, tensors):
            saxpy[1, 128](*args, np.float32(1.0), np.int32(n))
    assert mock.fast_launches == before + 6


def test_constexpr_kernels_take_the_fast_path(mock, scaled):
    n = int(RNG.integers(100, 900))
    out, x = device(n), device(n)
    a = np.float32(RNG.uniform(-4, 4))
    scaled[2, 64](out, x, a, 4)
    fast = scaled[2, 64]
    assert isinstance(fast, types.FunctionType)
    entries = mock.fast_launches
    for _ in range(4):
        scaled[2, 64](out, x, a, 4)
    assert mock.fast_launches == entries + 4
    assert mock.launches[-1].params == general_bytes(mock, scaled, 2, 64, (out, x, a, 4))
    assert len(mock.launches[-1].params) == 5  # STEP is compiled in, not passed
    for other in (2, 8):  # other values: other specializations
        scaled[2, 64](out, x, a, other)
    assert mock.fast_launches == entries + 4
    assert len(scaled.signatures) == 3


def test_constexpr_values_of_other_types_or_signs_are_other_kernels(mock):
    @kj.jit
    def k(out, C: kj.constexpr):
        out[0] = C
    out = device(2)
    for value in (0.0, -0.0, 1, True, 1.0):
        k[1, 1](out, value)
        k[1, 1](out, value)
    assert len(k.signatures) == 5 and mock.fast_launches == 5


def test_autotuned_kernels_take_the_fast_path(mock):
    entries = []

    @kj.autotune(configs=[kj.Config(block=64, constants={"STEP": 1}),
                          kj.Config(block=32, constants={"STEP": 2})],
                 key=["a"], grid=lambda args: (4 // args["STEP"],), cache=False,
                 timer=lambda run, config, stream: float(config.constants["STEP"]))
    @kj.jit
    def tuned(out, x, a, STEP: kj.constexpr):
        i = kj.grid(1) * STEP
        if i < x.shape[0]:
            out[i] = a * x[i]
    general = tuned._call

    def counted(*args):
        entries.append(args)
        return general(*args)
    tuned._call = counted
    n = int(RNG.integers(100, 900))
    out, x, a = device(n), device(n), np.float32(RNG.uniform(-4, 4))
    tuned(out, x, a)
    assert len(entries) == 1
    before = mock.fast_launches
    for _ in range(5):
        x = device(n)
        tuned(out, x, a)
    assert len(entries) == 1 and mock.fast_launches == before + 5
    last = mock.launches[-1]
    assert last.grid == (4, 1, 1) and last.block == (64, 1, 1)
    assert last.params == general_bytes(mock, tuned.kernel, (4,), 64, (out, x, a, 1))
    tuned(out, x, np.float32(a + 1))  # another key value: the general path chooses for it
    assert len(entries) == 2
    tuned(out, device(n, np.float64), a)  # another kind, same key: the fast form misses
    assert len(entries) == 3
    tuned(out, x, a, stream=None)
    assert len(entries) == 3


def test_the_builtin_trampoline_calls_the_record_entry():
    seen = []

    def entry(config, function, params, extra):
        c = launchrecord.LaunchConfigStruct.from_address(config)
        seen.append(((c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY,
                     c.blockDimZ), c.sharedMemBytes, function, params, extra))
        return status
    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p)(entry)
    grid = tuple(int(g) for g in RNG.integers(1, 1000, 3))
    block = tuple(int(b) for b in RNG.integers(1, 16, 3))
    function, params = (int(v) for v in RNG.integers(1, 2**40, 2))
    record, _ = launchrecord.make_record(ctypes.cast(callback, ctypes.c_void_p).value, function,
                                         grid, block, 96, 0, params)
    launch = launchrecord.native_launcher(record, callback)
    del record, callback
    gc.collect()  # the builtin keeps what the record points into alive
    for status in (0, int(RNG.integers(1, 999))):
        assert launch() == status
    assert seen[-1] == (grid, block, 96, function, params, None)
    assert type(launch).__name__ == "builtin_function_or_method"
    with pytest.raises(TypeError, match="takes no arguments"):
        launch(1)


def test_launch_mode_values():
    assert launchrecord.launch_mode(None) == "native"
    assert launchrecord.launch_mode(" EX ") == "ex"
    assert [launchrecord.launch_mode(m) for m in ("ctypes", "bindings")] == ["ctypes", "bindings"]
    with pytest.raises(ValueError, match=r"KAIOJIT_LAUNCH='fastest': use one of native, ex, "
                                         r"ctypes, bindings"):
        launchrecord.launch_mode("fastest")


def test_bindings_mode_has_no_fast_form(saxpy):
    backend = MockBackend(launch_mode="bindings")
    previous = set_backend(backend)
    try:
        n = int(RNG.integers(10, 100))
        launcher = saxpy[1, 32]
        for _ in range(2):
            launcher(device(n), device(n), np.float32(1.0), np.int32(n))
        assert launcher.fast is None and backend.fast_launches == 0
        assert len(backend.launches) == 2
    finally:
        set_backend(previous)
