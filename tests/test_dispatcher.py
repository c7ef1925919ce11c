"""@kj.jit objects on the mock backend: specialization, eager signatures, inspection, launch
configuration and argument errors. Nothing here needs a GPU."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import launch as launch_module
from kaiojit import types as T
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend

from tests.located import is_kaiojit_file


@pytest.fixture
def mock():
    backend = MockBackend()
    previous = set_backend(backend)
    yield backend
    set_backend(previous)


@pytest.fixture
def below_coarse_threshold(monkeypatch):
    """These launches check the user's grid: below the threshold at which a kernel's coarse
    entry takes a quarter of the blocks, whatever KAIOJIT_COARSE_MIN_THREADS says."""
    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", 1 << 22)


def saxpy_py(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def fresh(n, dtype=np.float32):
    rng = np.random.default_rng()
    return kj.to_device(rng.standard_normal(n).astype(dtype))


def test_lazy_specializes_once_per_signature(mock):
    k = kj.jit(saxpy_py)
    x, y, out = fresh(64), fresh(64), fresh(64)
    assert k.signatures == []
    k[1, 64](out, x, y, np.float32(2.0), np.int32(64))
    k[1, 64](out, x, y, np.float32(3.0), np.int32(64))
    assert len(k.signatures) == 1
    assert str(k.signatures[0]) == \
        "void(float32[::1, align=16], float32[::1, align=16], float32[::1, align=16], float32, int32)"
    k[1, 64](out, x, y, 2.0, 64)  # Python float and int: float64 and int64
    assert [str(s) for s in k.signatures][1] == \
        "void(float32[::1, align=16], float32[::1, align=16], float32[::1, align=16], float64, int64)"
    assert len(mock.launches) == 3


def test_launch_packs_arguments_in_order(mock, below_coarse_threshold):
    k = kj.jit(saxpy_py)
    rng = np.random.default_rng()
    n = int(rng.integers(10, 1000))
    a = np.float32(rng.uniform(-5, 5))
    x, y, out = fresh(n), fresh(n), fresh(n)
    k[(n + 31) // 32, 32](out, x, y, a, np.int32(n))
    launch = mock.launches[-1]
    assert launch.grid == ((n + 31) // 32, 1, 1) and launch.block == (32, 1, 1)
    ptrs = [struct.unpack("<Q", launch.params[i])[0] for i in (0, 2, 4)]
    assert ptrs == [out.__cuda_array_interface__["data"][0],
                    x.__cuda_array_interface__["data"][0], y.__cuda_array_interface__["data"][0]]
    assert [struct.unpack("<q", launch.params[i])[0] for i in (1, 3, 5)] == [n, n, n]
    assert struct.unpack("<f", launch.params[6])[0] == a
    assert struct.unpack("<i", launch.params[7])[0] == n


def test_strided_array_passes_strides(mock):
    def k2(out, m):
        i, j = kj.grid(2)
        out[i, j] = m[i, j]
    k = kj.jit(k2)
    rng = np.random.default_rng()
    host = rng.standard_normal((8, 6)).astype(np.float64)
    m = kj.to_device(host)
    out = kj.to_device(host[:, ::2].copy())
    k[1, (8, 3)](out, m[:, ::2])
    sig = k.signatures[-1]
    # out's rows are 24 bytes (not aligned), m's 48 (aligned)
    assert sig.args == (T.float64[:, ::1], T.float64[:, :].with_align(16))
    params = mock.launches[-1].params
    # out: ptr + 2 shape; m: ptr + 2 shape + 2 strides in bytes
    assert len(params) == 3 + 5
    assert [struct.unpack("<q", params[i])[0] for i in (4, 5)] == [8, 3]
    assert [struct.unpack("<q", params[i])[0] for i in (6, 7)] == \
        [host.strides[0], host.strides[1] * 2]


def test_eager_string_signature_compiles_at_decoration(mock):
    k = kj.jit("void(float32[::1], float32[::1], float32[::1], float32, int32)")(saxpy_py)
    assert [str(s) for s in k.signatures] == [
        "void(float32[::1], float32[::1], float32[::1], float32, int32)"]
    x, y, out = fresh(16), fresh(16), fresh(16)
    k[1, 16](out, x, y, 2.0, 16)  # converted to the declared float32 and int32
    assert len(k.signatures) == 1
    launch = mock.launches[-1]
    assert struct.unpack("<f", launch.params[6])[0] == 2.0
    assert struct.unpack("<i", launch.params[7])[0] == 16
    with pytest.raises(TypeError, match="no signature accepts"):
        k[1, 16](out, fresh(16, np.float64), y, 2.0, 16)


def test_eager_from_annotations():
    def k3(out: kj.float32[::1], n: kj.int32):
        i = kj.grid(1)
        if i < n:
            out[i] = 1.0
    k = kj.jit(k3)
    assert [str(s) for s in k.signatures] == ["void(float32[::1], int32)"]
    assert ".entry k3_" in k.inspect_ptx(k.signatures[0])


def test_signature_list_and_compile_result():
    k = kj.jit(["void(float32[::1], float32[::1], float32[::1], float32, int32)",
                "void(float64[::1], float64[::1], float64[::1], float64, int64)"])(saxpy_py)
    assert len(k.signatures) == 2
    ck = k.compile("void(float64[::1], float64[::1], float64[::1], float64, int64)")
    assert ck.signature.args[0] == T.float64[::1]
    assert ck.name.startswith("saxpy_py_") and f".entry {ck.name}(" in ck.ptx
    assert "fma.rn.f64" in ck.ptx
    assert "define ptx_kernel void" in ck.llvm
    llvm_all = k.inspect_llvm()
    assert set(llvm_all) == set(k.signatures)


def test_wrong_argument_count_names_parameters(mock):
    k = kj.jit(saxpy_py)
    x = fresh(8)
    with pytest.raises(TypeError, match=r"takes 5 arguments \(out, x, y, a, n\), got 2"):
        k[1, 8](x, x)


def test_unsupported_argument_names_parameter(mock):
    k = kj.jit(saxpy_py)
    x = fresh(8)
    with pytest.raises(TypeError, match="parameter 'a'"):
        k[1, 8](x, x, x, "two", 8)


def test_kernel_called_without_configuration():
    k = kj.jit(saxpy_py)
    with pytest.raises(TypeError, match=r"saxpy_py\[grid, block\]"):
        k(1, 2, 3, 4, 5)


def test_bad_configuration_shape():
    k = kj.jit(saxpy_py)
    with pytest.raises(TypeError, match="launch configuration"):
        k[1]


def test_launch_method_and_forall(mock, below_coarse_threshold):
    k = kj.jit(saxpy_py)
    n = 1000
    x, y, out = fresh(n), fresh(n), fresh(n)
    k.launch(out, x, y, np.float32(1), np.int32(n), grid=4, block=(256,), shared_mem=0)
    assert mock.launches[-1].grid == (4, 1, 1)
    k.forall(n)(out, x, y, np.float32(1), np.int32(n))
    last = mock.launches[-1]
    assert last.block[0] * last.grid[0] >= n and last.block[0] <= 256
    with pytest.raises(kj.LaunchError):
        k.forall(0)


def test_device_function_cannot_be_launched_or_called():
    @kj.jit(device=True)
    def axpy(a, x, y):
        return a * x + y
    with pytest.raises(TypeError, match="only be called from a kernel"):
        axpy(1.0, 2.0, 3.0)


def test_device_function_specializations_listed():
    @kj.jit(device=True)
    def twice(v):
        return v * 2

    @kj.jit
    def user(out, a, b):
        out[0] = twice(a) + twice(b)

    user.compile("void(float64[::1], int32, float32)")
    sigs = {str(s) for s in twice.signatures}
    assert sigs == {"int32(int32)", "float32(float32)"}


def test_launcher_objects_are_reused():
    k = kj.jit(saxpy_py)
    assert k[4, 128] is k[4, 128]
    assert k[4, 128] is not k[4, 64]


def test_compile_ptx_needs_no_device_and_picks_arch():
    ptx = kj.compile_ptx(saxpy_py, "void(float32[::1], float32[::1], float32[::1], float32, int32)",
                         arch="sm_80")
    assert ".target sm_80" in ptx
    assert ".version 7.0" in ptx or ".version 8" in ptx


def test_unknown_jit_option():
    with pytest.raises(TypeError, match="unknown option"):
        kj.jit(fastmaths=True)


def test_compile_error_at_launch_points_at_user_line(mock):
    import inspect
    import traceback

    def bad(out, x, n):
        i = kj.grid(1)
        if i < n:
            out[i] = x[i] + "one"

    k = kj.jit(bad)
    x = fresh(8)
    with pytest.raises(kj.TypingError) as info:
        k[1, 8](x, x, np.int32(8))
    line = inspect.getsourcelines(bad)[1] + 3
    assert str(info.value).startswith(f"{__file__}:{line}:22: unsupported operand types for +")
    frames = traceback.extract_tb(info.value.__traceback__)
    internal = [f for f in frames if is_kaiojit_file(f.filename)]
    assert len(internal) <= 1  # the launch call itself, nothing below it
