"""Ahead-of-time export and the loader without the JIT (kaiojit.aot), on the cpu backend
(host libraries) and the mock backend (cubins), with PTX and cubins checked by ptxas."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import aot
from kaiojit.aot.exporter import ExportError, c_function_name
from kaiojit.aot.loader import choose_arch
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend
from tests.aot import kernels as K

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAXPY = "void(float32[::1], float32[::1], float32[::1], float32, int32)"
SCALARS = ("void(float64[::1], bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
           "float16, bfloat16, float32, float64, complex64, float8_e4m3fn, float8_e5m2)")
RANKS = ("void(float32[::1], float32[::1], float32[:, ::1], float32[:, :, :], "
         "float32[::1, :])")
SUM = "void(float32[::1], float32[::1])"


@pytest.fixture
def cpu():
    previous = set_backend("cpu")
    yield kj.runtime.get_backend()
    set_backend(previous)


@pytest.fixture(scope="module")
def host_export(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("host"))
    previous = set_backend("cpu")
    try:
        aot.export(out, {K.saxpy: [SAXPY], K.scalars: [SCALARS], K.ranks: [RANKS],
                         K.block_sum: [SUM], K.oob: ["void(float32[::1], int64)"]},
                   target="host")
    finally:
        set_backend(previous)
    return out


@pytest.fixture(scope="module")
def gpu_export(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gpu"))
    aot.export(out, {K.saxpy: [SAXPY, SAXPY.replace("[::1]", "[:]")]},
               archs=["sm_80", "sm_90", "sm_90a"])
    return out


def test_saxpy_reloaded_on_the_cpu_matches_numpy(host_export, cpu):
    rng = np.random.default_rng()
    mod = aot.load(host_export)
    n = int(rng.integers(300, 3000))
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    a = np.float32(rng.uniform(-2, 2))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    mod.saxpy[(n + 127) // 128, 128](out, kj.to_device(x), kj.to_device(y), a, np.int32(n))
    np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-6)


def test_every_scalar_dtype_arrives_intact(host_export, cpu):
    import ml_dtypes

    rng = np.random.default_rng()
    values = [True, np.int8(rng.integers(-128, 127)), np.int16(rng.integers(-30000, 30000)),
              np.int32(rng.integers(-2**31, 2**31 - 1)), np.int64(rng.integers(-2**40, 2**40)),
              np.uint8(rng.integers(0, 255)), np.uint16(rng.integers(0, 65535)),
              np.uint32(rng.integers(0, 2**32 - 1)), np.uint64(rng.integers(0, 2**40)),
              np.float16(rng.uniform(-100, 100)), ml_dtypes.bfloat16(rng.uniform(-100, 100)),
              np.float32(rng.standard_normal()), np.float64(rng.standard_normal()),
              np.complex64(complex(rng.standard_normal(), rng.standard_normal())),
              ml_dtypes.float8_e4m3fn(rng.uniform(-100, 100)),
              ml_dtypes.float8_e5m2(rng.uniform(-100, 100))]
    out = kj.to_device(np.full(17, np.nan))
    aot.load(host_export).scalars[1, 32](out, *values)
    c = complex(values[13])
    expect = [float(v) for v in values[:13]] + [c.real, c.imag] + [float(v) for v in values[14:]]
    np.testing.assert_array_equal(out.copy_to_host(), np.array(expect))


def test_arrays_of_each_rank_and_layout(host_export, cpu):
    rng = np.random.default_rng()
    n = int(rng.integers(20, 60))
    a1 = rng.standard_normal(n, np.float32)
    a2 = rng.standard_normal((n, 3), np.float32)
    a3 = rng.standard_normal((n, 8, 5), np.float32)[:, ::2, 1:]  # strided: layout 'A'
    f2 = np.asfortranarray(rng.standard_normal((n, 4), np.float32))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    with pytest.warns(kj.PerformanceWarning):  # NumPy arrays are staged, as for @kj.jit
        aot.load(host_export).ranks[1, 64](out, kj.to_device(a1), kj.to_device(a2), a3, f2)
    expect = a1 + a2.sum(1) + a3.sum((1, 2)) + f2.sum(1)
    np.testing.assert_allclose(out.copy_to_host(), expect, rtol=1e-5, atol=1e-5)


def test_dynamic_shared_memory_survives_export(host_export, cpu):
    rng = np.random.default_rng()
    block = 64
    x = rng.standard_normal(block * 5 - 7, np.float32)
    out = kj.to_device(np.full(5, np.nan, np.float32))
    aot.load(host_export).block_sum[5, block, 0, block * 4](kj.to_device(x), out)
    expect = np.pad(x, (0, 7)).reshape(5, block).sum(1)
    np.testing.assert_allclose(out.copy_to_host(), expect, rtol=1e-5, atol=1e-5)


def test_a_specialization_not_exported_names_the_ones_that_were(host_export, cpu):
    mod = aot.load(host_export)
    x = kj.to_device(np.ones(8, np.float64))
    with pytest.raises(TypeError) as e:
        mod.saxpy[1, 8](x, x, x, 1.0, 8)
    assert ("saxpy was exported for void(float32[::1], float32[::1], float32[::1], float32, "
            "int32); none accepts (float64[::1") in str(e.value)
    with pytest.raises(TypeError, match=r"saxpy\(\) takes 5 arguments \(out, x, y, a, n\), got 2"):
        mod.saxpy[1, 8](x, x)
    with pytest.raises(AttributeError, match="exports no kernel 'sxapy'; it has block_sum, oob,"):
        getattr(mod, "sxapy")


def test_a_stale_artifact_is_refused(tmp_path, host_export, cpu):
    import shutil

    stale = tmp_path / "stale"
    shutil.copytree(host_export, stale)
    manifest = json.loads((stale / "manifest.json").read_text())
    manifest["kaiojit_version"] = "0.0.1"
    (stale / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(aot.ArtifactError, match=r"exported by kaiojit 0\.0\.1, this is kaiojit"):
        aot.load(str(stale))
    with pytest.raises(aot.ArtifactError, match="is not a kaiojit export: it has no manifest"):
        aot.load(str(tmp_path))


def test_a_fault_in_exported_host_code_is_a_kernel_error(host_export, cpu):
    out = kj.to_device(np.zeros(4, np.float32))
    with pytest.raises(kj.KernelError) as e:
        aot.load(host_export).oob[1, 4](out, np.int64(4))
    lines, first = inspect.getsourcelines(K.oob.py_func)
    line = first + next(i for i, text in enumerate(lines) if "out[i + n]" in text)
    assert ("kernel 'oob': index 4 is out of bounds for dimension 0 of array 'out' (size 4) at "
            f"{K.__file__}:{line}, block (0, 0, 0), thread (0, 0, 0)") in str(e.value)


def test_the_loader_imports_neither_llvmlite_nor_the_source(host_export):
    """Nor the other backends' modules, nor ``logging`` and ``tempfile`` (cold start)."""
    code = f"""
import sys, numpy as np
before = set(sys.modules)  # what the interpreter and NumPy brought (site hooks differ by host)
import kaiojit as kj, kaiojit.aot as aot
mod = aot.load({host_export!r})
x = np.random.default_rng().standard_normal(100, np.float32)
out = kj.to_device(np.full(100, np.nan, np.float32))
mod.saxpy[1, 128](out, kj.to_device(x), kj.to_device(x), np.float32(3), np.int32(100))
assert np.allclose(out.copy_to_host(), 4 * x)
print(sorted(m for m in set(sys.modules) - before if m.startswith(
    ("llvmlite", "tests.aot", "kaiojit.compiler", "kaiojit.frontend", "kaiojit.lower",
     "kaiojit.runtime.cuda", "kaiojit.runtime.mock", "logging", "tempfile"))))
"""
    env = dict(os.environ, KAIOJIT_BACKEND="cpu", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


NO_DRIVER = """
import ctypes, os
class NoDriver(ctypes.CDLL):  # the CUDA driver library cannot load: a machine with no GPU
    def __init__(self, name, *args, **kwargs):
        if os.path.basename(str(name)) in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        super().__init__(name, *args, **kwargs)
ctypes.CDLL = NoDriver
"""


def test_without_a_driver_the_cpu_backend_runs_and_cuda_bindings_stay_unimported(host_export):
    """With no CUDA driver and no ``KAIOJIT_BACKEND``, the default backend is cpu, decided
    without importing ``cuda.bindings`` (tens of ms of a cold start): not by ``import kaiojit``,
    nor ``kj.to_device``, nor an AOT load and launch."""
    code = NO_DRIVER + f"""
import sys, numpy as np
def cuda_modules():
    return sorted(m for m in sys.modules if m == "cuda" or m.startswith("cuda."))
import kaiojit as kj, kaiojit.aot as aot
print("import", cuda_modules())
x = np.random.default_rng().standard_normal(100, np.float32)
y = np.random.default_rng().standard_normal(100, np.float32)
dx, dy, out = kj.to_device(x), kj.to_device(y), kj.to_device(np.full(100, np.nan, np.float32))
print("to_device", cuda_modules(), kj.backend())
aot.load({host_export!r}).saxpy[1, 128](out, dx, dy, np.float32(3), np.int32(100))
assert np.allclose(out.copy_to_host(), 3 * x + y)
print("launch", cuda_modules(), kj.runtime.is_cuda_available())
"""
    env = {k: v for k, v in os.environ.items() if k not in ("KAIOJIT_BACKEND",
                                                            "KAIOJIT_MOCK_BACKEND")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(env, PYTHONPATH=ROOT), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["import []", "to_device [] cpu", "launch [] False"]


def test_host_export_refuses_a_gpu_target_and_back(host_export, gpu_export, mock):
    with pytest.raises(aot.ArtifactError, match="holds kernels for host, which needs cpu; this "
                                                "process runs the mock backend"):
        aot.load(host_export)
    set_backend("cpu")
    with pytest.raises(aot.ArtifactError, match="holds kernels for nvptx, which needs a GPU"):
        aot.load(gpu_export)


def test_the_cubin_of_the_device_is_loaded(gpu_export, mock):
    mod = aot.load(gpu_export)
    x = kj.to_device(np.random.default_rng().standard_normal(64, np.float32))
    mod.saxpy[1, 64](x, x, x, np.float32(2), np.int32(64))
    manifest = json.loads(open(os.path.join(gpu_export, "manifest.json")).read())
    cubin = manifest["entries"][0]["cubins"]["sm_90"]
    assert mock.loaded_images == [open(os.path.join(gpu_export, cubin), "rb").read()]
    assert mock.launches[-1].grid == (1, 1, 1)


def test_a_newer_device_jits_the_ptx_and_an_older_one_is_refused(gpu_export):
    newer = MockBackend(compute_capability=(10, 0))
    previous = set_backend(newer)
    try:
        mod = aot.load(gpu_export)
        x = kj.to_device(np.ones(32, np.float32))
        mod.saxpy[1, 32](x, x, x, np.float32(2), np.int32(32))
        assert newer.loaded_images == []  # no sm_100 cubin: the sm_90 PTX, through the JIT
        set_backend(MockBackend(compute_capability=(7, 5)))
        mod = aot.load(gpu_export)
        with pytest.raises(aot.ArtifactError, match=r"exported for sm_80, sm_90, sm_90a; none "
                                                    r"runs on this device \(sm_75\)"):
            mod.saxpy[1, 32](kj.to_device(np.ones(32, np.float32)), x, x, np.float32(2),
                             np.int32(32))
    finally:
        set_backend(previous)


@pytest.mark.parametrize("archs,cc,cubin,expect", [
    (["sm_80", "sm_90", "sm_90a"], 90, True, "sm_90"),
    (["sm_80", "sm_90a"], 90, True, "sm_90a"),
    (["sm_80", "sm_90a"], 86, True, "sm_80"),
    (["sm_90a"], 100, True, None),
    (["sm_80", "sm_90a"], 100, False, "sm_80"),
    (["sm_90"], 89, False, None),
])
def test_choose_arch(archs, cc, cubin, expect):
    assert choose_arch(archs, cc, cubin) == expect


def test_cubins_are_elf_and_disassemble(gpu_export):
    from kaiojit.tools.binutils import find_tool

    manifest = json.loads(open(os.path.join(gpu_export, "manifest.json")).read())
    assert manifest["archs"] == ["sm_80", "sm_90", "sm_90a"]
    for entry in manifest["entries"]:
        for arch, name in entry["cubins"].items():
            data = open(os.path.join(gpu_export, name), "rb").read()
            assert data.startswith(b"\x7fELF"), name
            ptx = open(os.path.join(gpu_export, entry["ptx"][arch])).read()
            assert f".target {arch}" in ptx
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm is None and os.environ.get("CI") != "true":
        pytest.skip("no nvdisasm")
    cubin = os.path.join(gpu_export, manifest["entries"][0]["cubins"]["sm_90"])
    done = subprocess.run([nvdisasm, cubin], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert manifest["entries"][0]["symbol"] in done.stdout


def test_export_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ExportError, match="arch must look like 'sm_90', got 'gfx90a'"):
        aot.export(str(tmp_path), {K.saxpy: [SAXPY]}, archs=["gfx90a"])
    with pytest.raises(ExportError, match="kernel 'saxpy': no signature to export"):
        aot.export(str(tmp_path), {K.saxpy: []})
    with pytest.raises(TypeError, match=r"saxpy\(\) takes 5 arguments, the signature gives 2"):
        aot.export(str(tmp_path), {K.saxpy: ["void(float32[::1], int32)"]})


def test_c_function_names_are_readable():
    sig = kj.types.parse_signature(RANKS)
    assert c_function_name("ranks", sig) == \
        "kaiojit_ranks__f32_1dC__f32_1dC__f32_2dC__f32_3dA__f32_2dF"


def test_the_command_line_exports(tmp_path):
    out = tmp_path / "cli"
    done = subprocess.run(
        [sys.executable, "-m", "kaiojit", "aot", os.path.join(ROOT, "tests", "aot", "kernels.py")
         + ":saxpy", "--sig", SAXPY, "--arch", "sm_80,sm_90", "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr
    assert "saxpy: void(float32[::1], float32[::1], float32[::1], float32, int32) -> " \
           "kaiojit_saxpy__f32_1dC__f32_1dC__f32_1dC__f32__i32" in done.stdout
    assert sorted(os.listdir(out))[:2] == ["kaiojit_kernels.c", "kaiojit_kernels.h"]
    bad = subprocess.run([sys.executable, "-m", "kaiojit", "aot", "nofile.py:k", "--sig", SAXPY,
                          "-o", str(out)], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert bad.returncode != 0 and "no such file: nofile.py" in bad.stderr
