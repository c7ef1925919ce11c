"""Cold start: from a fresh interpreter (or a C program) to the first kernel's result.

    PYTHONPATH=. python benchmarks/cold_start.py [--runs 9] [--target host|nvptx] [--arch sm_90]

Four ways of running saxpy over 65,536 float32 once, each in fresh processes, median of
``--runs``: (a) ``@kj.jit`` compiling it, (b) ``@kj.jit(cache=True)`` finding it in a warm disk
cache, (c) ``kaiojit.aot.load`` of an export, and (d) a C program linked against the export's
launcher. The time is from just before the process is spawned to the moment the result has
been checked (the child prints its wall clock then). ``--target host`` (the default without a
GPU) runs the cpu backend; ``--target nvptx`` the GPU, with the C program on the driver API.
The children choose their backend as a user's process does (no ``KAIOJIT_BACKEND``), unless
the target needs the other one (``--target host`` on a GPU machine).
The child of (c) also reports whether llvmlite was imported (it must not be). Row (0) is the
floor every row pays (the interpreter, NumPy and the same host work, no kaiojit), so the
script also prints kaiojit's own part of (c) against (b). Each row also gives the CPU time the
child used (user + system, from the OS's accounting of the finished child): on a machine
shared with other work the wall clock waits for the CPU, the CPU time does not. The children
of (a)-(c) also report the CPU time of their kaiojit part alone (from just after NumPy's import
to the checked result), which subtracts no floor.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
part = time.process_time()  # kaiojit's own part starts here: NumPy is imported
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
print(json.dumps({"done": time.time(), "llvmlite": "llvmlite" in sys.modules,
                  "part_cpu": time.process_time() - part}))
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


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(args: list[str], env: dict) -> dict:
    cpu = _cpu_of_children()
    start = time.time()
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    cpu = _cpu_of_children() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = result["done"] - start
    result["cpu"] = cpu
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

    default = "cuda" if kj.runtime.is_cuda_available() else "cpu"  # what a plain process picks
    target = opts.target or ("nvptx" if default == "cuda" else "host")
    backend = "cpu" if target == "host" else "cuda"
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("KAIOJIT_BACKEND", None)
    if backend != default:  # a user's process chooses by itself; only another backend is named
        env["KAIOJIT_BACKEND"] = backend
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
        cpus: dict[str, list[float]] = {k: [] for k in rows}
        llvmlite_in_aot = False
        parts: dict[str, list[float]] = {k: [] for k in rows}
        for _ in range(opts.runs):
            for name, (args, e) in rows.items():
                r = _timed(args, e)
                times[name].append(r["seconds"])
                cpus[name].append(r["cpu"])
                if "part_cpu" in r:
                    parts[name].append(r["part_cpu"])
                if name.startswith("(c)"):
                    llvmlite_in_aot |= r.get("llvmlite", False)
        shutil.rmtree(cache_dir, ignore_errors=True)
    how = "KAIOJIT_BACKEND set" if "KAIOJIT_BACKEND" in env else "chosen by default"
    print(f"target {target} ({backend} backend, {how}), saxpy over {N} float32, median of "
          f"{opts.runs} fresh processes, spawn to checked result:")
    medians = {k: statistics.median(v) for k, v in times.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    for name, m in medians.items():
        print(f"  {name:36s} {m * 1e3:8.1f} ms  (min {min(times[name]) * 1e3:.1f})  CPU "
              f"{cpu[name] * 1e3:7.1f} ms (min {min(cpus[name]) * 1e3:.1f})")
    for what, m in (("wall", medians), ("CPU", cpu)):
        aot, hit = m["(c) kaiojit.aot.load"], m["(b) @kj.jit(cache=True), a hit"]
        floor = m["(0) Python + NumPy alone (the floor)"]
        print(f"  {what}: (c) / (b) = {aot / hit:.2f} (goal <= 0.5); above the floor, "
              f"kaiojit's part (c - 0) / (b - 0) = {(aot - floor) / (hit - floor):.2f}")
    own = {k: statistics.median(v) for k, v in parts.items() if v}
    print("  kaiojit's own CPU time (NumPy imported, to the checked result): " + ", ".join(
        f"{k.split(')')[0]}) {v * 1e3:.1f} ms" for k, v in own.items()))
    aot, hit = own["(c) kaiojit.aot.load"], own["(b) @kj.jit(cache=True), a hit"]
    print(f"  kaiojit's own part, (c) / (b) = {aot / hit:.2f} (goal <= 0.5)")
    print(f"  llvmlite imported by (c): {llvmlite_in_aot}")


if __name__ == "__main__":
    main()
