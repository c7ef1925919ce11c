"""Cold start: from a fresh interpreter (or a C program) to the first kernel's result.

    PYTHONPATH=. python benchmarks/cold_start.py [--runs 9] [--target host|nvptx] [--arch sm_90]

Four ways of running saxpy over 65,536 float32 once, each in fresh processes, median of
``--runs``: (a) ``@kj.jit`` compiling it, (b) ``@kj.jit(cache=True)`` finding it in a warm disk
cache, (c) ``kaiojit.aot.load`` of an export, and (d) a C program linked against the export's
launcher. The time is from just before the process is spawned to the moment the result has
been checked (the child prints its wall clock then). ``--target host`` (the default without a
GPU) runs the cpu backend; ``--target nvptx`` the GPU, with the C program on the driver API.
The child of (c) also reports whether llvmlite was imported (it must not be). Row (0) is the
floor every row pays (the interpreter, NumPy and the same host work, no kaiojit), so the
script also prints kaiojit's own part of (c) against (b).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SIG = "void(float32[::1], float32[::1], float32[::1], float32, int32)"
N = 1 << 16

KERNEL = r"""
import kaiojit as kj

@kj.jit(cache=CACHE)
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]
"""

CHILD = r"""
import json, sys, time
import numpy as np
mode, where = sys.argv[1], sys.argv[2]
if mode == "numpy":  # the floor every row pays: the interpreter, NumPy, the same host work
    n = %d
    x = np.arange(n, dtype=np.float32)
    assert np.array_equal(2 * x + np.ones(n, np.float32), 2 * x + 1)
    print(json.dumps({"done": time.time(), "llvmlite": False}))
    sys.exit(0)
import kaiojit as kj
if mode == "aot":
    import kaiojit.aot as aot
    kernel = aot.load(where).saxpy
else:
    sys.path.insert(0, where)
    from kern import saxpy as kernel
n = %d
x = np.arange(n, dtype=np.float32)
y = np.ones(n, np.float32)
out = kj.to_device(np.full(n, np.nan, np.float32))
kernel[(n + 255) // 256, 256](out, kj.to_device(x), kj.to_device(y), np.float32(2), np.int32(n))
assert np.array_equal(out.copy_to_host(), 2 * x + y)
print(json.dumps({"done": time.time(), "llvmlite": "llvmlite" in sys.modules}))
""" % (N, N)

C_HOST = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kaiojit_kernels.h"
int main(void) {
    enum { N = %d };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    float *out = malloc(N * sizeof(float));
    int64_t shape[1] = {N};
    kaiojit_launch_config c = {{(N + 255) / 256, 1, 1}, {256, 1, 1}, 0, NULL, {0, 0, 0}};
    struct timespec t;
    for (int i = 0; i < N; i++) { x[i] = (float)i; y[i] = 1.0f; }
    if (kaiojit_saxpy__f32_1dC__f32_1dC__f32_1dC__f32__i32(&c, out, shape, x, shape, y, shape,
                                                           2.0f, N)) return 1;
    for (int i = 0; i < N; i++) if (out[i] != 2.0f * (float)i + 1.0f) return 2;
    clock_gettime(CLOCK_REALTIME, &t);
    printf("{\"done\": %%.6f}\n", (double)t.tv_sec + t.tv_nsec * 1e-9);
    return 0;
}
""" % N

C_CUDA = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda.h>
#include "kaiojit_kernels.h"
int main(void) {
    enum { N = %d };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    float *out = malloc(N * sizeof(float));
    int64_t shape[1] = {N};
    kaiojit_launch_config c = {{(N + 255) / 256, 1, 1}, {256, 1, 1}, 0, NULL, {0, 0, 0}};
    CUdevice dev; CUcontext ctx; CUdeviceptr dx, dy, dout;
    struct timespec t;
    for (int i = 0; i < N; i++) { x[i] = (float)i; y[i] = 1.0f; }
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev)
        || cuCtxSetCurrent(ctx)) return 3;
    if (cuMemAlloc(&dx, N * 4) || cuMemAlloc(&dy, N * 4) || cuMemAlloc(&dout, N * 4)) return 4;
    cuMemcpyHtoD(dx, x, N * 4); cuMemcpyHtoD(dy, y, N * 4);
    if (kaiojit_saxpy__f32_1dC__f32_1dC__f32_1dC__f32__i32(&c, (void *)dout, shape, (void *)dx,
                                                           shape, (void *)dy, shape, 2.0f, N))
        return 1;
    if (cuMemcpyDtoH(out, dout, N * 4)) return 5;
    for (int i = 0; i < N; i++) if (out[i] != 2.0f * (float)i + 1.0f) return 2;
    clock_gettime(CLOCK_REALTIME, &t);
    printf("{\"done\": %%.6f}\n", (double)t.tv_sec + t.tv_nsec * 1e-9);
    return 0;
}
""" % N


def _timed(args: list[str], env: dict) -> dict:
    start = time.time()
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = result["done"] - start
    return result


def _cuda_flags() -> list[str]:
    """Compiler flags for the C program on the driver API: cuda.h's directory and -lcuda (the
    toolkit's link stub when no libcuda.so is on the linker's path)."""
    from kaiojit.aot.cheader import cuda_include_dir

    include = cuda_include_dir()
    if include is None:
        raise SystemExit("no cuda.h: set CUDA_HOME to a CUDA toolkit for row (d)")
    stubs = os.path.join(os.path.dirname(include), "lib64", "stubs")
    return [f"-I{include}", *([f"-L{stubs}"] if os.path.isdir(stubs) else []), "-lcuda"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--target", choices=["host", "nvptx"], default=None)
    parser.add_argument("--arch", default="sm_90")
    opts = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    import kaiojit as kj

    target = opts.target or ("nvptx" if kj.backend() == "cuda" else "host")
    backend = "cpu" if target == "host" else "cuda"
    env = dict(os.environ, PYTHONPATH=root, KAIOJIT_BACKEND=backend)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as after an install: bytecode cached
    with tempfile.TemporaryDirectory(prefix="kaiojit-cold-") as tmp:
        jit_dir, cache_dir, cache_src, export = (os.path.join(tmp, d) for d in
                                                 ("jit", "cache", "cache_src", "export"))
        for d, cache in ((jit_dir, False), (cache_src, True)):
            os.makedirs(d)
            with open(os.path.join(d, "kern.py"), "w") as f:
                f.write(KERNEL.replace("CACHE", str(cache)))
        child = os.path.join(tmp, "child.py")
        with open(child, "w") as f:
            f.write(CHILD)
        sys.path.insert(0, jit_dir)
        from kern import saxpy

        kj.runtime.set_backend(backend)
        kj.aot.export(export, {saxpy: [SIG]}, archs=[opts.arch], target=target)
        program = os.path.join(export, "main")
        with open(program + ".c", "w") as f:
            f.write(C_HOST if target == "host" else C_CUDA)
        libs = (["-L" + export, "-lkaiojit_kernels", "-lpthread", f"-Wl,-rpath,{export}"]
                if target == "host" else _cuda_flags())
        subprocess.run(["cc", "-O2", "-o", program, program + ".c",
                        os.path.join(export, "kaiojit_kernels.c"), f"-I{export}", *libs, "-lm"],
                       check=True)
        cache_env = dict(env, KAIOJIT_CACHE_DIR=cache_dir)
        _timed([sys.executable, child, "jit", cache_src], cache_env)  # fills the cache
        _timed([sys.executable, child, "aot", export], env)  # bytecode of kaiojit.aot cached
        rows = {"(0) Python + NumPy alone (the floor)": ([sys.executable, child, "numpy", ""],
                                                         env),
                "(a) @kj.jit, compiling": ([sys.executable, child, "jit", jit_dir], env),
                "(b) @kj.jit(cache=True), a hit": ([sys.executable, child, "jit", cache_src],
                                                   cache_env),
                "(c) kaiojit.aot.load": ([sys.executable, child, "aot", export], env),
                "(d) C program, exported launcher": ([program], env)}
        times: dict[str, list[float]] = {k: [] for k in rows}
        llvmlite_in_aot = False
        for _ in range(opts.runs):
            for name, (args, e) in rows.items():
                r = _timed(args, e)
                times[name].append(r["seconds"])
                if name.startswith("(c)"):
                    llvmlite_in_aot |= r.get("llvmlite", False)
        shutil.rmtree(cache_dir, ignore_errors=True)
    print(f"target {target} ({backend} backend), saxpy over {N} float32, median of "
          f"{opts.runs} fresh processes, spawn to checked result:")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, m in medians.items():
        print(f"  {name:36s} {m * 1e3:8.1f} ms  (min {min(times[name]) * 1e3:.1f})")
    aot, hit = medians["(c) kaiojit.aot.load"], medians["(b) @kj.jit(cache=True), a hit"]
    floor = medians["(0) Python + NumPy alone (the floor)"]
    print(f"  (c) / (b) = {aot / hit:.2f} (goal <= 0.5); above the floor: kaiojit's part "
          f"(c - 0) / (b - 0) = {(aot - floor) / (hit - floor):.2f}; llvmlite imported by (c): "
          f"{llvmlite_in_aot}")


if __name__ == "__main__":
    main()
