"""Backend selection, the PTX version table and TensorMap constraints (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit.runtime.tensormap import TensorMap, tiled_fields

ROOT = __file__.rsplit("/tests/", 1)[0]


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    full_env = {**os.environ, "PYTHONPATH": ROOT, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=60)


def test_import_does_not_load_the_driver_bindings():
    r = _run("import sys, kaiojit.runtime; print('cuda.bindings' in sys.modules)")
    assert r.stdout.strip() == "False", r.stderr


class _FakeDriver:
    """A driver library whose ``cuInit`` returns ``init`` and which counts ``count`` devices."""

    def __init__(self, init: int, count: int):
        self.init, self.count = init, count

    def cuInit(self, flags: int) -> int:  # the driver API's names
        return self.init

    def cuDeviceGetCount(self, out) -> int:
        out._obj.value = self.count
        return 0


@pytest.mark.parametrize("library, sees", [
    (OSError("libcuda.so.1: cannot open shared object file"), False),
    (_FakeDriver(init=100, count=0), False),  # CUDA_ERROR_NO_DEVICE from cuInit
    (_FakeDriver(init=0, count=0), False),
    (_FakeDriver(init=0, count=2), True),
])
def test_the_driver_library_is_asked_before_the_bindings(monkeypatch, library, sees):
    """The cheap answer: whether the driver library loads and counts a device, by ctypes."""
    import ctypes

    from kaiojit.runtime import driver

    def load(name):
        assert name == driver.DRIVER_LIBRARY
        if isinstance(library, OSError):
            raise library
        return library

    monkeypatch.setattr(ctypes, "CDLL", load)
    assert driver.driver_sees_devices() is sees


def test_environment_chooses_the_backend():
    r = _run("import kaiojit.runtime as rt; print(rt.backend())", KAIOJIT_BACKEND="CPU")
    assert r.stdout.strip() == "cpu", r.stderr
    r = _run("import kaiojit.runtime as rt; print(rt.backend())", KAIOJIT_BACKEND="mock",
             KAIOJIT_MOCK_BACKEND="1")
    assert r.stdout.strip() == "mock", r.stderr


def test_unknown_backend_name():
    r = _run("import kaiojit.runtime as rt; rt.backend()", KAIOJIT_BACKEND="tpu")
    assert r.stderr.strip().splitlines()[-1] == \
        "ValueError: KAIOJIT_BACKEND='tpu': takes one of cpu, cuda"


def test_the_mock_backend_is_not_chosen_by_accident():
    """The mock backend runs no kernel: KAIOJIT_BACKEND=mock alone is an error, not a
    program whose kernels silently do nothing."""
    r = _run("import kaiojit.runtime as rt; rt.backend()", KAIOJIT_BACKEND="mock")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "ValueError: KAIOJIT_BACKEND='mock': takes one of cpu, cuda; the mock backend runs no "
        "kernel and is for kaiojit's own tests, which set KAIOJIT_MOCK_BACKEND=1 beside it")


@pytest.mark.skipif(rt.is_cuda_available(), reason="checks the machine without CUDA")
def test_forcing_cuda_without_a_device_is_a_clear_cuda_error():
    r = _run("import kaiojit.runtime as rt; rt.backend()", KAIOJIT_BACKEND="cuda")
    assert "kaiojit.errors.CudaError: CUDA_ERROR_NO_DEVICE: no usable CUDA device" in r.stderr
    assert "KAIOJIT_BACKEND=cpu" in r.stderr


@pytest.mark.skipif(rt.is_cuda_available(), reason="checks the machine without CUDA")
def test_default_without_cuda_is_cpu_and_says_so():
    code = ("import logging; logging.basicConfig(level=logging.INFO)\n"
            "import kaiojit.runtime as rt\n"
            "try:\n    rt.backend()\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    r = _run(code)
    assert "no usable CUDA device, using the cpu backend" in r.stderr
    cpu_exists = __import__("importlib").util.find_spec("kaiojit.runtime.cpu") is not None
    if not cpu_exists:
        assert "ERR the cpu backend is not available" in r.stdout


def test_register_backend_plugs_in_a_factory():
    from kaiojit.runtime.backend import register_backend, set_backend
    from kaiojit.runtime.mock import MockBackend

    class Named(MockBackend):
        name = "custom"

    register_backend("custom", Named)
    previous = set_backend("custom")
    try:
        assert rt.backend() == "custom"
    finally:
        set_backend(previous)


@pytest.mark.parametrize("version, ptx", [
    (11040, (7, 4)), (12000, (8, 0)), (12010, (8, 1)), (12040, (8, 4)), (12050, (8, 5)),
    (12060, (8, 5)), (12070, (8, 6)), (12080, (8, 7)), (12090, (8, 8)), (13000, (9, 0)),
    (13010, (9, 1)), (13050, (9, 5)), (14000, (9, 5)),
])
def test_ptx_version_for_driver(version, ptx):
    from kaiojit.runtime.driver import ptx_version_for_driver

    assert ptx_version_for_driver(version) == ptx


GOOD = dict(ptr=0x10000, shape=(64, 128), strides=(512, 4), dtype="float32", box=(16, 32))


@pytest.mark.parametrize("change, message", [
    (dict(shape=(2,) * 6, strides=(4,) * 6, box=(1,) * 6),
     "rank: a tensor map has 1 to 5 dimensions, the array has 6"),
    (dict(ptr=0x10008), "global address: 0x10008 is not 16-byte aligned"),
    (dict(strides=(520, 4)), "strides: dimension 0 has a stride of 520 bytes; tensor map "
                             "strides must be positive multiples of 16 below 2**40"),
    (dict(strides=(512, 8)), "strides: the last dimension must be contiguous (stride 4 bytes), "
                             "got 8"),
    (dict(box=(16, 257)), "box: box[1] = 257; box sizes must be 1 to 256"),
    (dict(box=(0, 32)), "box: box[0] = 0; box sizes must be 1 to 256"),
    (dict(box=(16, 3)), "box: the innermost box row is 12 bytes; it must be a multiple of "
                        "16 bytes"),
    (dict(box=(16, 64), swizzle="128B"), "box: the innermost box row is 256 bytes, more than "
                                         "the 128-byte swizzle span"),
    (dict(element_strides=(1, 9)), "element_strides: element_strides[1] = 9; each must be 1 "
                                   "to 8"),
    (dict(swizzle="256B"), "swizzle must be None or one of 'none', 32, 64, 128, '32B', '64B', "
                           "'128B'; got '256B'"),
    (dict(box=(16,)), "box: (16,) has 1 dimensions, the array has 2"),
])
def test_tensormap_constraints_name_what_is_broken(change, message):
    args = {**GOOD, **change}
    with pytest.raises(ValueError) as info:
        tiled_fields(args["ptr"], args["shape"], args["strides"], args["dtype"], args["box"],
                     swizzle=args.get("swizzle"), element_strides=args.get("element_strides"))
    assert str(info.value) == message


def test_tensormap_fields_are_innermost_first():
    f = tiled_fields(**GOOD, swizzle=128)
    assert f["dims"] == (128, 64) and f["strides"] == (512,) and f["box"] == (32, 16)
    assert f["swizzle"] == "CU_TENSOR_MAP_SWIZZLE_128B"
    assert f["dtype"] == "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"


def test_tensormap_tiled_on_the_mock(mock):
    a = rt.device_array((64, 128), np.float16)
    tm = TensorMap.tiled(a, box=(64, 64), swizzle="128B")
    assert len(tm.bytes) == 128 and tm.array is a
    other = TensorMap.tiled(a, box=(32, 64), swizzle="128B")
    assert other.bytes != tm.bytes
    with pytest.raises(TypeError, match=r"TensorMap.tiled needs a device array, got ndarray"):
        TensorMap.tiled(np.zeros((4, 4)), box=(4, 4))


def test_ptx_entry_parameter_count_must_match_the_signature():
    from kaiojit.runtime.cuda import check_entry_params

    from .ptx_kernels import TENSORMAP_ARRAY_PTX, TENSORMAP_PTX, scalars_ptx

    check_entry_params(scalars_ptx(), "scalars", 14)
    check_entry_params(TENSORMAP_ARRAY_PTX, "tmap", 4)
    with pytest.raises(ValueError, match=r"^kernel 'tmap': its PTX entry takes 3 parameters, "
                                         r"its signature packs 4$"):
        check_entry_params(TENSORMAP_PTX, "tmap", 4)


@pytest.mark.skipif(rt.is_cuda_available(), reason="checks the machine without CUDA")
@pytest.mark.parametrize("choice", ["cuda", "all"])
def test_pytest_asked_for_cuda_without_a_device_is_a_usage_error(tmp_path, choice):
    """A CI job that lost its GPU must not go green by skipping every kernel test."""
    import importlib.metadata
    import os

    (tmp_path / "test_one.py").write_text("def test_one(kj_backend):\n    assert kj_backend\n")
    registered = any(ep.value == "kaiojit.testing"
                     for ep in importlib.metadata.entry_points(group="pytest11"))
    plugin = [] if registered else ["-p", "kaiojit.testing"]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin,
                        f"--kaiojit-backend={choice}", str(tmp_path / "test_one.py")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 4, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"ERROR: --kaiojit-backend={choice}: no usable CUDA device on "
                               "this machine ("), r.stderr
    assert lines[0].endswith("; use --kaiojit-backend=cpu"), r.stderr
