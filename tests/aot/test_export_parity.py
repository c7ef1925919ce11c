"""An exported kernel runs as the JIT's does: the loader's launches take the JIT's fast path,
a large grid takes the exported coarse entry, an aligned signature keeps its alignment, and the
cubins come from a named compiler (ptxas, or the driver's linker: the mock backend's here, the
real one in the gpu test) with the JIT's options, recorded in the manifest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import aot
from kaiojit.aot.exporter import ExportError
from kaiojit.runtime.backend import set_backend
from kaiojit.tools.binutils import find_tool
from tests.aot import kernels as K
from tests.test_bad_argument_frames import visible_kaiojit_frames

SAXPY = "void(float32[::1], float32[::1], float32[::1], float32, int32)"
ALIGNED = SAXPY.replace("[::1]", "[::1, align=16]")
SCALE = "void(float32[::1], float32[::1], int32)"
rng = np.random.default_rng()
CC = shutil.which(os.environ.get("CC", "cc"))


@kj.jit(lineinfo=True)
def scale_lines(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = 3 * x[i]


@pytest.fixture(scope="module")
def ptxas_export(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("parity"))
    aot.export(out, {K.saxpy: [SAXPY, ALIGNED]}, archs=["sm_90"], compiler="ptxas")
    return out


def _saxpy_args(n: int) -> tuple:
    x, y = (kj.to_device(rng.standard_normal(n, np.float32)) for _ in range(2))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    return out, x, y, np.float32(rng.uniform(0.5, 2)), np.int32(n)


def _manifest(directory: str) -> dict:
    with open(os.path.join(directory, "manifest.json")) as f:
        return json.load(f)


def test_a_repeated_loader_launch_is_the_jits_fast_form(ptxas_export, mock):
    mod = aot.load(ptxas_export)
    args = _saxpy_args(256)
    mod.saxpy[2, 128](*args)
    fast = mod.saxpy[2, 128]
    assert callable(fast) and fast.__name__.endswith("_fast_launch")
    K.saxpy[2, 128](*args)  # the JIT's launch of the same arguments, once general
    before = mock.fast_launches
    fast(*args)
    K.saxpy[2, 128](*args)  # and fast: it packs the same bytes
    assert mock.fast_launches == before + 2
    exported, jit = mock.launches[-2:]
    assert exported.params == jit.params and exported.grid == jit.grid == (2, 1, 1)
    assert exported.kernel == jit.kernel


def test_a_large_grid_launches_the_exported_coarse_entry(ptxas_export, mock):
    from kaiojit.runtime.launch import COARSE_MIN_THREADS

    entry = _manifest(ptxas_export)["entries"][1]  # the aligned one: the arrays are
    assert entry["coarse_symbol"] == entry["symbol"] + "__coarse4"
    coarse_cubin = os.path.join(ptxas_export, entry["coarse_cubins"]["sm_90"])
    with open(coarse_cubin, "rb") as f:
        assert f.read().startswith(b"\x7fELF")
    mod = aot.load(ptxas_export)
    blocks = COARSE_MIN_THREADS // 256
    args = _saxpy_args(64)  # the mock runs nothing: the grid need not fit the arrays
    mod.saxpy[blocks, 256](*args)
    K.saxpy[blocks, 256](*args)
    exported, jit = mock.launches[-2:]
    assert exported.kernel == jit.kernel == entry["coarse_symbol"]
    assert exported.grid == jit.grid == ((blocks + 3) // 4, 1, 1)
    assert exported.params == jit.params  # the user's grid extent last, in both
    with open(coarse_cubin, "rb") as f:
        assert f.read() in mock.loaded_images


def test_aligned_arrays_take_the_aligned_signature_and_others_are_refused_at_the_users_line(
        ptxas_export, mock):
    plain, aligned = (e["symbol"] for e in _manifest(ptxas_export)["entries"])
    mod = aot.load(ptxas_export)
    out, x, y, a, _ = _saxpy_args(257)
    mod.saxpy[1, 256](out, x, y, a, np.int32(256))
    assert mock.launches[-1].kernel == aligned  # the best match, as the JIT specializes
    mod.saxpy[1, 256](out[1:], x[1:], y[1:], a, np.int32(256))  # 4 bytes past 16
    assert mock.launches[-1].kernel == plain
    only_aligned = aot.load(_only_aligned_export(ptxas_export))
    with pytest.raises(TypeError) as err:
        only_aligned.saxpy[1, 256](out[1:], x[1:], y[1:], a, np.int32(256))
    assert "saxpy was exported for void(float32[::1, align=16]" in str(err.value)
    assert "none accepts (float32[::1], float32[::1], float32[::1], float32, int32)" in \
        str(err.value)
    assert visible_kaiojit_frames(err.value) == []


def _only_aligned_export(directory: str) -> str:
    out = directory + "_aligned"
    if not os.path.exists(out):
        previous = set_backend("cpu")
        try:
            aot.export(out, {K.saxpy: [ALIGNED]}, archs=["sm_90"], compiler="ptxas")
        finally:
            set_backend(previous)
    return out


def test_the_manifest_names_the_ptxas_that_made_the_cubins(ptxas_export):
    manifest = _manifest(ptxas_export)
    assert manifest["compiler"] == "ptxas"
    release = subprocess.run([find_tool("ptxas"), "--version"], capture_output=True,
                             text=True).stdout
    number = manifest["compiler_version"].split()[1]
    assert manifest["compiler_version"].startswith("ptxas ") and f"release {number}," in release
    assert manifest["format"] == 3


def test_ptxas_keeps_the_line_table_as_the_jit_asks_the_driver(tmp_path):
    aot.export(str(tmp_path), {K.saxpy: [SAXPY], scale_lines: [SCALE]}, archs=["sm_90"],
               compiler="ptxas")
    entries = {e["kernel"]: e for e in _manifest(str(tmp_path))["entries"]}
    with open(tmp_path / entries["scale_lines"]["cubins"]["sm_90"], "rb") as f:
        assert b".nv_debug_line_sass" in f.read()
    with open(tmp_path / entries["saxpy"]["cubins"]["sm_90"], "rb") as f:
        assert b".nv_debug_line_sass" not in f.read()


def test_the_driver_compiler_links_with_the_jits_options(tmp_path, mock):
    manifest = aot.export(str(tmp_path), {K.saxpy: [SAXPY], scale_lines: [SCALE]},
                          archs=["sm_80", "sm_90a"], compiler="driver")
    assert (manifest.compiler, manifest.compiler_version) == ("driver", "mock driver")
    # per arch, each kernel and its coarse entry; line info asked for scale_lines' alone
    assert all(e.coarse_symbol for e in manifest.entries)
    assert sorted(mock.links) == sorted([(arch, e.kernel == "scale_lines")
                                         for e in manifest.entries for arch in ("sm_80", "sm_90a")
                                         for _ in range(2)])
    mod = aot.load(str(tmp_path))
    assert "cubins by mock driver" in repr(mod)
    args = _saxpy_args(128)
    mod.saxpy[1, 128](*args)
    entry = manifest.entries[0]
    with open(tmp_path / entry.cubins["sm_90a"], "rb") as f:
        assert mock.loaded_images[-1] == f.read()
    assert mock.launches[-1].kernel == entry.symbol


def test_a_cubin_the_driver_refuses_names_its_compiler(tmp_path, mock):
    manifest = aot.export(str(tmp_path), {K.saxpy: [SAXPY]}, archs=["sm_90"],
                          compiler="driver")
    with open(tmp_path / manifest.entries[0].cubins["sm_90"], "wb") as f:
        f.write(b"not an image")
    mod = aot.load(str(tmp_path))
    with pytest.raises(aot.ArtifactError) as err:
        mod.saxpy[1, 64](*_saxpy_args(64))
    assert str(err.value).startswith(
        f"saxpy: {SAXPY}: the driver refused its sm_90 cubin (made by mock driver): "
        "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid")
    assert visible_kaiojit_frames(err.value) == []


def test_a_compiler_that_is_not_there_is_named(tmp_path):
    previous = set_backend("cpu")
    try:
        with pytest.raises(ExportError, match=r"compiler='driver' links with the CUDA driver, "
                                              r"which this process does not use \(it runs the "
                                              r"cpu backend\)"):
            aot.export(str(tmp_path), {K.saxpy: [SAXPY]}, compiler="driver")
        with pytest.raises(ValueError, match="compiler must be one of 'auto', 'ptxas', "
                                             "'driver', got 'nvcc'"):
            aot.export(str(tmp_path), {K.saxpy: [SAXPY]}, compiler="nvcc")
    finally:
        set_backend(previous)


def test_the_command_line_takes_the_compiler_and_names_it(tmp_path):
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    command = [sys.executable, "-m", "kaiojit", "aot",
               os.path.join(root, "tests", "aot", "kernels.py") + ":saxpy", "--sig", ALIGNED,
               "--arch", "sm_90", "-o", str(tmp_path / "out")]
    env = dict(os.environ, PYTHONPATH=root, KAIOJIT_BACKEND="cpu")
    done = subprocess.run([*command, "--compiler", "ptxas"], capture_output=True, text=True,
                          cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    version = _manifest(str(tmp_path / "out"))["compiler_version"]
    assert f"(sm_90, cubins by {version}) to " in done.stdout
    assert "kaiojit_saxpy__f32_1dCa16__f32_1dCa16__f32_1dCa16__f32__i32" in done.stdout
    bad = subprocess.run([*command, "--compiler", "driver"], capture_output=True, text=True,
                         cwd=root, env=env)
    assert bad.returncode == 1
    assert "aot: compiler='driver' links with the CUDA driver, which this process does not " \
        "use (it runs the cpu backend)" in bad.stderr


def test_an_eager_signature_without_align_takes_the_fast_path_for_aligned_arrays(mock):
    @kj.jit(SAXPY)
    def eager(out, x, y, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    args = _saxpy_args(128)
    eager[1, 128](*args)
    before = mock.fast_launches
    eager[1, 128](*args)
    assert mock.fast_launches == before + 1


def test_a_read_only_array_is_taken_where_the_kernel_only_reads_it(tmp_path):
    import warnings

    previous = set_backend("cpu")
    try:
        manifest = aot.export(str(tmp_path), {K.saxpy: [SAXPY]}, target="host")
        assert manifest.entries[0].written_arrays == ["out"]
        mod = aot.load(str(tmp_path))
        x = rng.standard_normal(300, np.float32)
        y = rng.standard_normal(300, np.float32)
        x.flags.writeable = False
        out = np.full(300, np.nan, np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the copies of NumPy arrays, as for @kj.jit
            mod.saxpy[3, 128](out, x, y, np.float32(2), np.int32(300))
            np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
            out.flags.writeable = False
            with pytest.raises(ValueError) as err:
                mod.saxpy[3, 128](out, x, y, np.float32(2), np.int32(300))
    finally:
        set_backend(previous)
    assert "parameter 'out': the kernel writes this array, and the NumPy array passed is " \
        "read-only" in str(err.value)
    assert visible_kaiojit_frames(err.value) == []


TUNED_CONFIGS = [kj.Config(block=(b,), constants={"U": u}) for b, u in ((256, 1), (128, 2))]


@kj.autotune(configs=TUNED_CONFIGS, key=["n"], grid=(4,))
@kj.jit
def tuned_scale(out, x, n, U: kj.constexpr):
    for k in range(U):
        i = kj.grid(1) * U + k
        if i < n:
            out[i] = 2 * x[i]


def test_an_exported_autotuned_kernel_repeats_its_launch_through_the_fast_form(tmp_path, mock):
    set_backend("cpu")
    try:
        manifest = aot.export(str(tmp_path), {tuned_scale: [SCALE.replace("int32", "int64")]},
                              archs=["sm_90"], compiler="ptxas")
    finally:
        set_backend(mock)
    tuned = aot.load(str(tmp_path)).tuned_scale
    x = kj.to_device(rng.standard_normal(1024, np.float32))
    out = kj.to_device(np.full(1024, np.nan, np.float32))
    tuned(out, x, np.int64(1024))  # never tuned: the first config
    general = mock.launches[-1]
    assert general.kernel == manifest.entries[0].symbol and general.block == (256, 1, 1)
    before = mock.fast_launches
    tuned(out, x, np.int64(1024))
    assert mock.fast_launches == before + 1 and mock.launches[-1] == general
    tuned(out, x, np.int64(512))  # another key: the general path, then its own fast form
    assert mock.fast_launches == before + 1
    assert mock.launches[-1].params != general.params


@pytest.mark.gpu
@pytest.mark.parametrize("compiler", ["ptxas", "driver"])
def test_each_compilers_cubin_computes_what_the_jit_does(tmp_path, compiler):
    if kj.backend() != "cuda":
        pytest.skip("needs the cuda backend")
    major, minor = kj.runtime.get_backend().compute_capability(0)
    arch = f"sm_{major}{minor}"
    aot.export(str(tmp_path), {K.saxpy: [ALIGNED]}, archs=[arch], compiler=compiler)
    mod = aot.load(str(tmp_path))
    assert _manifest(str(tmp_path))["compiler"] == compiler
    n = 1 << 23  # past the coarse threshold: both entries run
    out, x, y, a, _ = _saxpy_args(n)
    want = kj.to_device(np.full(n, np.nan, np.float32))
    for grid in ((n + 255) // 256, 8):  # the coarse entry, then the kernel's own
        mod.saxpy[grid, 256](out, x, y, a, np.int32(grid * 256))
        K.saxpy[grid, 256](want, x, y, a, np.int32(grid * 256))
        assert np.array_equal(out.copy_to_host(), want.copy_to_host())


ALIGNED_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kaiojit_kernels.h"

int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    float a = (float)atof(argv[2]);
    float *buf = (float *)aligned_alloc(16, sizeof(float) * (size_t)(3 * n + 16));
    float *x = buf, *y = buf + n + 4, *out = buf + 2 * n + 8;  /* n a multiple of 4 */
    FILE *f = fopen(argv[3], "rb");
    if (!buf || !f || fread(x, sizeof(float), (size_t)n, f) != (size_t)n ||
        fread(y, sizeof(float), (size_t)n, f) != (size_t)n ||
        fread(out, sizeof(float), (size_t)n, f) != (size_t)n) return 3;
    fclose(f);
    int64_t shape[1] = {n - 1};
    kaiojit_launch_config c = {{(unsigned)((n + 127) / 128), 1, 1}, {128, 1, 1}, 0, NULL,
                               {0, 0, 0}};
    int refused = kaiojit_saxpy__f32_1dCa16__f32_1dCa16__f32_1dCa16__f32__i32(
        &c, out, shape, x + 1, shape, y, shape, a, (int32_t)(n - 1));
    shape[0] = n;
    int rc = kaiojit_saxpy__f32_1dCa16__f32_1dCa16__f32_1dCa16__f32__i32(
        &c, out, shape, x, shape, y, shape, a, (int32_t)n);
    f = fopen(argv[4], "wb");
    fwrite(out, sizeof(float), (size_t)n, f);
    fclose(f);
    return refused == 1 && rc == 0 ? 0 : 10 + refused * 4 + rc;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_the_c_launcher_refuses_unaligned_data_for_an_aligned_signature(tmp_path):
    out = tmp_path / "export"
    previous = set_backend("cpu")
    try:
        aot.export(str(out), {K.saxpy: [ALIGNED]}, target="host")
    finally:
        set_backend(previous)
    (out / "main.c").write_text(ALIGNED_PROGRAM)
    built = subprocess.run([CC, "-std=c11", "-Wall", "-Werror", "-o", "main", "main.c",
                            "kaiojit_kernels.c", "-L.", "-lkaiojit_kernels", "-lpthread", "-lm",
                            f"-Wl,-rpath,{out}"], capture_output=True, text=True, cwd=out)
    assert built.returncode == 0, built.stderr
    n = 4 * int(rng.integers(250, 1000))
    a = np.float32(rng.uniform(-2, 2))
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    np.concatenate([x, y, np.full(n, np.nan, np.float32)]).tofile(tmp_path / "inputs")
    done = subprocess.run([str(out / "main"), str(n), repr(float(a)), str(tmp_path / "inputs"),
                           str(tmp_path / "result")], capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr)  # 1 for x + 1, then 0
    np.testing.assert_allclose(np.fromfile(tmp_path / "result", np.float32), a * x + y,
                               rtol=1e-6, atol=1e-6)
