"""Compile time: import + first compile_ptx of saxpy, then a second kernel, in fresh processes.

    python benchmarks/compile_time.py [--runs 7] [--numba-path DIR]

Each run is a new Python process (only the bytecode cache is warm, as after an install: a
first, untimed run fills it), timing ``import`` of the package, the first
``compile_ptx`` (saxpy) and the next one (a shared-memory reduction), and a third with
libdevice math. numba-cuda's ``cuda.compile_ptx`` is timed on the same kernels when it is
importable (``--numba-path`` adds a directory, e.g. one ``pip install --target`` filled).
Medians are printed; the goal is kaiojit <= 0.25x numba-cuda for import + first compile and
<= 0.5x for the second kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNELS = '''
import math
{imports}

def saxpy(out, x, y, a, n):
    i = g.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]

def block_sum(out, x, n):
    buf = g.shared.array(256, {f32})
    t = g.threadIdx.x
    i = g.grid(1)
    buf[t] = x[i] if i < n else 0.0
    g.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        g.syncthreads()
        s //= 2
    if t == 0:
        g.atomic.add(out, 0, buf[0])

def softplus(out, x, n):
    i = g.grid(1)
    if i < n:
        out[i] = math.log1p(math.exp(x[i]))
'''

KAIOJIT = dict(imports="import kaiojit as g", f32="g.float32")
NUMBA = dict(imports="from numba import cuda as g, float32", f32="float32")

SIGS = {
    "saxpy": "void(float32[::1], float32[::1], float32[::1], float32, int32)",
    "block_sum": "void(float32[::1], float32[::1], int32)",
    "softplus": "void(float32[::1], float32[::1], int32)",
}

CHILD = '''
import json, sys, time
t0 = time.perf_counter()
{import_line}
t1 = time.perf_counter()
import bench_kernels as k
times = {{"import": t1 - t0}}
for name, sig in {sigs!r}.items():
    t = time.perf_counter()
    {compile_call}
    times[name] = time.perf_counter() - t
print(json.dumps(times))
'''


def run_once(tool: str, workdir: str, extra_path: str | None) -> dict:
    """One fresh process. Bytecode is cached (in a prefix directory outside the tree), as it is
    for an installed package; PYTHONDONTWRITEBYTECODE would otherwise recompile every module."""
    if tool == "kaiojit":
        import_line = "import kaiojit as kj"
        compile_call = "kj.compile_ptx(getattr(k, name), sig, arch='sm_90')"
    else:
        import_line = "from numba import cuda"
        compile_call = "cuda.compile_ptx(getattr(k, name), sig, cc=(9, 0))"
    code = CHILD.format(import_line=import_line, compile_call=compile_call, sigs=SIGS)
    env = dict(os.environ)
    paths = [workdir, ROOT] if tool == "kaiojit" else [workdir] + ([extra_path] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("KAIOJIT_DUMP", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(workdir, "pycache")
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{tool} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def numba_available(extra_path: str | None) -> bool:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path
    r = subprocess.run([sys.executable, "-c", "from numba import cuda"], env=env,
                       capture_output=True)
    return r.returncode == 0


def measure(tool: str, runs: int, extra_path: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        names = KAIOJIT if tool == "kaiojit" else NUMBA
        with open(os.path.join(tmp, "bench_kernels.py"), "w") as f:
            f.write(textwrap.dedent(KERNELS.format(**names)))
        run_once(tool, tmp, extra_path)  # warm-up: writes the bytecode cache
        samples = [run_once(tool, tmp, extra_path) for _ in range(runs)]
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--numba-path", default=os.environ.get("NUMBA_CUDA_PATH"))
    args = ap.parse_args()
    results = {"kaiojit": measure("kaiojit", args.runs, None)}
    if numba_available(args.numba_path):
        results["numba-cuda"] = measure("numba-cuda", args.runs, args.numba_path)
    print(f"median of {args.runs} fresh processes, seconds")
    print(f"{'':12}{'import':>9}{'saxpy':>9}{'imp+1st':>9}{'2nd':>9}{'math':>9}")
    for tool, r in results.items():
        print(f"{tool:12}{r['import']:9.3f}{r['saxpy']:9.3f}{r['import'] + r['saxpy']:9.3f}"
              f"{r['block_sum']:9.3f}{r['softplus']:9.3f}")
    if "numba-cuda" in results:
        k, n = results["kaiojit"], results["numba-cuda"]
        first = (k["import"] + k["saxpy"]) / (n["import"] + n["saxpy"])
        second = k["block_sum"] / n["block_sum"]
        print(f"ratio kaiojit/numba-cuda: import+first {first:.2f}x (goal <= 0.25x), "
              f"second kernel {second:.2f}x (goal <= 0.5x), math kernel "
              f"{k['softplus'] / n['softplus']:.2f}x")


if __name__ == "__main__":
    main()
