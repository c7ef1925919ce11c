"""The exported C launcher: the header compiles as C99 and C++17 with -Wall -Werror for both
targets, and a C program built against the host export gives NumPy's results."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from kaiojit import aot
from kaiojit.aot.cheader import cuda_include_dir
from kaiojit.runtime.backend import set_backend
from tests.aot import kernels as K

SAXPY = "void(float32[::1], float32[::1], float32[::1], float32, int32)"
SUM = "void(float32[::1], float32[::1])"
TMAP = "void(tensormap(float32, 2), float64[:, :], complex128, bfloat16)"
CC = shutil.which(os.environ.get("CC", "cc"))
CXX = shutil.which("c++") or shutil.which("g++")

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "kaiojit_kernels.h"

static float *load(const char *path, long n)
{
    float *p = (float *)malloc(sizeof(float) * (size_t)n);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, sizeof(float), (size_t)n, f) != (size_t)n) exit(3);
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    float a = (float)atof(argv[2]);
    float *x = load(argv[3], n), *y = load(argv[4], n), *out = load(argv[5], n);
    float *sums = load(argv[5], (n + 63) / 64);
    int64_t shape[1] = {n}, nsums[1] = {(n + 63) / 64};
    kaiojit_launch_config c = {{(unsigned)((n + 127) / 128), 1, 1}, {128, 1, 1}, 0, NULL,
                               {0, 0, 0}};
    kaiojit_launch_config s = {{(unsigned)nsums[0], 1, 1}, {64, 1, 1}, 64 * sizeof(float),
                               NULL, {0, 0, 0}};
    int rc = kaiojit_saxpy__f32_1dC__f32_1dC__f32_1dC__f32__i32(&c, out, shape, x, shape,
                                                                y, shape, a, (int32_t)n);
    if (rc) return 10 + rc;
    rc = kaiojit_block_sum__f32_1dC__f32_1dC(&s, x, shape, sums, nsums);
    if (rc) return 20 + rc;
    FILE *f = fopen(argv[6], "wb");
    fwrite(out, sizeof(float), (size_t)n, f);
    fwrite(sums, sizeof(float), (size_t)nsums[0], f);
    fclose(f);
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_export(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("chost"))
    previous = set_backend("cpu")
    try:
        aot.export(out, {K.saxpy: [SAXPY], K.block_sum: [SUM]}, target="host")
    finally:
        set_backend(previous)
    return out


def _compile(args: list[str], cwd: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stderr}"


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_a_c_program_against_the_host_export_matches_numpy(host_export, tmp_path):
    with open(os.path.join(host_export, "main.c"), "w") as f:
        f.write(PROGRAM)
    _compile([CC, "-std=c99", "-Wall", "-Werror", "-o", "main", "main.c", "kaiojit_kernels.c",
              "-L.", "-lkaiojit_kernels", "-lpthread", "-lm", f"-Wl,-rpath,{host_export}"],
             host_export)
    rng = np.random.default_rng()
    n = int(rng.integers(1000, 5000))
    a = np.float32(rng.uniform(-2, 2))
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    for name, arr in (("x", x), ("y", y), ("poison", np.full(n, np.nan, np.float32))):
        arr.tofile(tmp_path / name)
    result = tmp_path / "result"
    done = subprocess.run([os.path.join(host_export, "main"), str(n), repr(float(a)),
                           str(tmp_path / "x"), str(tmp_path / "y"), str(tmp_path / "poison"),
                           str(result)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = np.fromfile(result, np.float32)
    np.testing.assert_allclose(got[:n], a * x + y, rtol=1e-6, atol=1e-6)
    nsums = (n + 63) // 64
    expect = np.pad(x, (0, nsums * 64 - n)).reshape(nsums, 64).sum(1)
    np.testing.assert_allclose(got[n:], expect, rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(CC is None or CXX is None, reason="no C or C++ compiler")
@pytest.mark.parametrize("target", ["host", "nvptx"])
def test_the_c_launcher_compiles_as_c99_and_cxx17(target, tmp_path):
    out = str(tmp_path / target)
    kernels = {K.saxpy: [SAXPY], K.scalars: [K_SCALARS], K.ranks: [K_RANKS]}
    flags = []
    if target == "nvptx":
        include = cuda_include_dir()
        if include is None and os.environ.get("CI") != "true":
            pytest.skip("no cuda.h (a CUDA toolkit or the nvidia-cuda-nvcc wheel)")
        assert include is not None, "CI must find cuda.h"
        flags = [f"-I{include}"]
        kernels[K.tile_copy] = [TMAP]
        aot.export(out, kernels, archs=["sm_90", "sm_90a"])
    else:
        previous = set_backend("cpu")
        try:
            aot.export(out, kernels, target="host")
        finally:
            set_backend(previous)
    header = open(os.path.join(out, "kaiojit_kernels.h")).read()
    assert "kaiojit_ranks__f32_1dC__f32_1dC__f32_2dC__f32_3dA__f32_2dF(" in header
    assert "const int64_t a3_strides[3]" in header  # layout 'A' passes its strides
    assert "uint16_t bf16," in header and "float c64_re,\n    float c64_im" in header
    _compile([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", *flags, "-c", "kaiojit_kernels.c",
              "-o", "k.o"], out)
    _compile([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", *flags, "-x", "c++", "-c",
              "kaiojit_kernels.c", "-o", "k_cxx.o"], out)
    if target == "nvptx":
        assert "const kaiojit_tensormap *src" in header


K_SCALARS = ("void(float64[::1], bool, int8, int16, int32, int64, uint8, uint16, uint32, "
             "uint64, float16, bfloat16, float32, float64, complex64, float8_e4m3fn, float8_e5m2)")
K_RANKS = ("void(float32[::1], float32[::1], float32[:, ::1], float32[:, :, :], "
           "float32[::1, :])")


COOP_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "kaiojit_kernels.h"

int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    unsigned blocks = (unsigned)atoi(argv[2]);
    float *x = (float *)malloc(sizeof(float) * (size_t)n), partial[64], out[1] = {0};
    FILE *f = fopen(argv[3], "rb");
    if (!x || !f || fread(x, sizeof(float), (size_t)n, f) != (size_t)n) return 3;
    fclose(f);
    int64_t shape[1] = {n}, np_[1] = {blocks}, one[1] = {1};
    kaiojit_launch_config c = {{blocks, 1, 1}, {256, 1, 1}, 0, NULL, {0, 0, 0}};
    int rc = kaiojit_grid_sum__f32_1dC__f32_1dC__f32_1dC(&c, x, shape, partial, np_, out, one);
    printf("%.9g\n", (double)out[0]);
    return rc;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_a_grid_synchronizing_kernel_runs_from_c(tmp_path):
    """numba's grid-sync example (a cooperative launch): every block on a thread of its own."""
    import importlib.util

    path = os.path.join(os.path.dirname(K.__file__), "..", "..", "examples", "grid_sync.py")
    spec = importlib.util.spec_from_file_location("example_c_grid_sync", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = str(tmp_path / "coop")
    previous = set_backend("cpu")
    try:
        manifest = aot.export(out, {example.grid_sum: ["void(float32[::1], float32[::1], "
                                                       "float32[::1])"]}, target="host")
    finally:
        set_backend(previous)
    assert manifest.entries[0].cooperative
    with open(os.path.join(out, "main.c"), "w") as f:
        f.write(COOP_PROGRAM)
    _compile([CC, "-std=c99", "-Wall", "-Werror", "-o", "main", "main.c", "kaiojit_kernels.c",
              "-L.", "-lkaiojit_kernels", "-lpthread", "-lm", f"-Wl,-rpath,{out}"], out)
    rng = np.random.default_rng()
    n = int(rng.integers(5000, 20000))
    x = rng.random(n, dtype=np.float32)
    x.tofile(tmp_path / "x")
    blocks = int(rng.integers(3, 9))
    done = subprocess.run([os.path.join(out, "main"), str(n), str(blocks), str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-5)
