"""The GPU C launcher takes a kernel's coarse entry by the JIT's and the Python loader's rule.

No GPU here: the generated source is compiled against the toolkit's ``cuda.h`` and linked to a
stand-in ``libcuda`` that records each launch (function, grid, block, the coarse entry's
``grid.x`` parameter) instead of running it; the same launches through ``kaiojit.aot.load`` on
the mock backend must pick the same function and grid.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import aot
from kaiojit.aot.cheader import c_parameters, cuda_include_dir
from kaiojit.runtime import launch as launch_module
from tests.aot import kernels as K

SAXPY = "void(float32[::1], float32[::1], float32[::1], float32, int32)"
CC = shutil.which(os.environ.get("CC", "cc"))

# A driver that loads nothing and runs nothing: each launch prints one line.
STUB_DRIVER = r"""
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static int context;
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)(void *)&context; return 0; }
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *image)
{
    *m = (CUmodule)(uintptr_t)image;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    *f = (CUfunction)(uintptr_t)name;
#ifdef FAIL_COARSE  /* a coarse entry the driver cannot find: said once a try */
    printf("get %s\n", name);
    if (strstr(name, "__coarse")) return CUDA_ERROR_NOT_FOUND;
#endif
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)a;
    *v = strstr((const char *)(uintptr_t)f, "__coarse") ? COARSE_MAX_THREADS : 1024;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
    (void)f; (void)a; (void)v;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
                                  void **extra)
{
    const char *name = (const char *)(uintptr_t)f;
    long long extent = -1;
    (void)extra;
    if (strstr(name, "__coarse")) memcpy(&extent, params[TRAILING], sizeof extent);
    printf("%s %u %u %lld\n", name, c->gridDimX, c->blockDimX, extent);
    return CUDA_SUCCESS;
}
"""

# Each four arguments a launch: grid.x, block.x, dynamic shared bytes, cluster.x.
PROGRAM = r"""
#include <stdlib.h>
#include "kaiojit_kernels.h"
int main(int argc, char **argv)
{
    static float data[4];  /* the stand-in driver reads no array */
    for (int i = 1; i + 3 < argc; i += 4) {
        unsigned gx = (unsigned)atoi(argv[i]), bx = (unsigned)atoi(argv[i + 1]);
        unsigned cl = (unsigned)atoi(argv[i + 3]);
        int64_t shape[1] = {(int64_t)gx * bx};
        kaiojit_launch_config c = {{gx, 1, 1}, {bx, 1, 1}, (size_t)atoi(argv[i + 2]), NULL,
                                   {cl, cl ? 1 : 0, cl ? 1 : 0}};
        int rc = kaiojit_saxpy__f32_1dC__f32_1dC__f32_1dC__f32__i32(
            &c, data, shape, data, shape, data, shape, 2.0f, (int32_t)shape[0]);
        if (rc) return 10 + rc;
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An nvptx export of saxpy and a C program of it, linked to the stand-in driver."""
    if CC is None:
        pytest.skip("no C compiler")
    include = cuda_include_dir()
    if include is None and os.environ.get("CI") != "true":
        pytest.skip("no cuda.h (a CUDA toolkit or the nvidia-cuda-nvcc wheel)")
    assert include is not None, "CI must find cuda.h"
    out = str(tmp_path_factory.mktemp("ccoarse"))
    manifest = aot.export(out, {K.saxpy: [SAXPY]}, archs=["sm_90"])
    entry = manifest.entries[0]
    assert entry.coarse_symbol == entry.symbol + "__coarse4"
    trailing = len(c_parameters(entry)[1])  # the coarse entry's grid.x: after the arguments
    programs = {}
    for variant, max_threads in (("1024", 1024), ("256", 256), ("fail", 1024)):
        where = os.path.join(out, variant)
        os.makedirs(where)
        for name, text in (("stub.c", STUB_DRIVER), ("main.c", PROGRAM)):
            with open(os.path.join(where, name), "w") as f:
                f.write(text)
        _cc(["-shared", "-fPIC", f"-I{include}", f"-DTRAILING={trailing}",
             f"-DCOARSE_MAX_THREADS={max_threads}", *(["-DFAIL_COARSE"] if variant == "fail"
                                                       else []),
             "-o", "libcuda.so", "stub.c"], where)
        _cc(["-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{include}", f"-I{out}", "-o",
             "main", "main.c", os.path.join(out, "kaiojit_kernels.c"), "-L.", "-lcuda",
             f"-Wl,-rpath,{where}"], where)
        programs[variant] = os.path.join(where, "main")
    return out, entry, programs


def _cc(args: list[str], cwd: str) -> None:
    done = subprocess.run([CC, *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"cc {' '.join(args)}\n{done.stderr}"


def _c_output(program: str, launches: list[tuple[int, int, int, int]],
              min_threads: int | None) -> list[list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "KAIOJIT_COARSE_MIN_THREADS"}
    # the stand-in driver before any real one (a GPU machine's LD_LIBRARY_PATH, searched
    # before the program's runpath, may hold the driver's libcuda.so)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [os.path.dirname(program), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])])
    if min_threads is not None:
        env["KAIOJIT_COARSE_MIN_THREADS"] = str(min_threads)
    done = subprocess.run([program, *(str(v) for launch in launches for v in launch)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines()]


def _c_launches(program: str, launches: list[tuple[int, int, int, int]],
                min_threads: int | None) -> list[tuple[str, int, int, int]]:
    rows = _c_output(program, launches, min_threads)
    return [(name, int(g), int(b), int(e)) for name, g, b, e in rows]


def test_the_c_launcher_takes_the_coarse_entry_as_the_loader_does(built, mock, monkeypatch):
    out, entry, programs = built
    own, coarse = entry.symbol, entry.coarse_symbol
    rng = np.random.default_rng()
    threshold = 64 * int(rng.integers(40, 80))  # KAIOJIT_COARSE_MIN_THREADS, as a user sets it
    big = threshold // 64 + int(rng.integers(1, 30))  # blocks of 64: past it, not a multiple of 4
    launches = [(3, 64, 0, 0), (threshold // 64, 64, 0, 0), (big, 64, 0, 0),
                (big, 64, 256, 0), (big // 2 + 1, 128, 0, 0)]
    got = _c_launches(programs["1024"], launches, threshold)
    assert got == [(own, 3, 64, -1), (coarse, (threshold // 64 + 3) // 4, 64, threshold // 64),
                   (coarse, (big + 3) // 4, 64, big), (own, big, 64, -1),
                   (coarse, (big // 2 + 4) // 4, 128, big // 2 + 1)]
    # the Python loader, on the mock backend, with the same threshold: the same choices
    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", threshold)
    mod = aot.load(out)
    for gx, bx, shared, _ in launches:
        n = gx * bx
        x = kj.to_device(rng.random(n, np.float32))
        mod.saxpy.launch(x, x, x, np.float32(2), np.int32(n), grid=gx, block=bx,
                         shared_mem=shared, stream=None)
    assert [(launch.kernel, launch.grid[0], launch.block[0]) for launch in mock.launches] \
        == [row[:3] for row in got]


def test_a_cluster_a_large_block_and_the_default_threshold_keep_the_own_entry(built):
    _, entry, programs = built
    own, coarse = entry.symbol, entry.coarse_symbol
    # a cluster: the kernel's own entry, whatever the size
    assert _c_launches(programs["1024"], [(64, 64, 0, 1)], 0) == [(own, 64, 64, -1)]
    # a block the coarse entry's registers do not allow (it says 256 threads at most)
    assert _c_launches(programs["256"], [(64, 512, 0, 0), (64, 256, 0, 0)], 0) == [
        (own, 64, 512, -1), (coarse, 16, 256, 64)]
    # unset: the JIT's default, 4194304 threads (2^22)
    assert _c_launches(programs["1024"], [(16383, 256, 0, 0), (16384, 256, 0, 0)], None) == [
        (own, 16383, 256, -1), (coarse, 4096, 256, 16384)]


def test_a_coarse_entry_that_does_not_load_leaves_the_own_entry(built):
    """Tried once (per context), as the Python loader tries it once per device."""
    _, entry, programs = built
    own, coarse = entry.symbol, entry.coarse_symbol
    rows = _c_output(programs["fail"], [(64, 256, 0, 0), (96, 256, 0, 0)], 0)
    assert rows == [["get", own], ["get", coarse], [own, "64", "256", "-1"],
                    [own, "96", "256", "-1"]]
