"""The cpu backend against numba's CUDA simulator, same kernels and inputs, in one run.

Two kernels over 16,384 float32: saxpy (128 blocks of 128 threads) and a 128-thread block sum
in shared memory with barriers. kaiojit's times are medians of many launches after a warm-up
(compile excluded); the simulator (``NUMBA_ENABLE_CUDASIM=1``, in a subprocess: this script
with ``--simulator``) runs each kernel once after a small warm-up launch, as it takes seconds.
Every result is checked against NumPy before it is timed. Give numba's directory with
``KAIOJIT_NUMBA_PYTHONPATH`` when it is not installed where python finds it. The figures are
appended to benchmarks/RESULTS.md with the date and the machine.

    PYTHONPATH=. python benchmarks/cpu_backend.py [--no-record]
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

N = 16384
TPB = 128
REPS = 200
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


# --- the simulator side (a subprocess) ---------------------------------------------------------------

def run_simulator(inputs: str) -> None:
    global cuda, float32  # the simulator swaps in its fake cuda module through globals
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba import cuda, float32

    @cuda.jit
    def saxpy(out, x, y, a, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    @cuda.jit
    def block_sum(out, x):
        sm = cuda.shared.array(128, float32)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        sm[t] = x[i]
        cuda.syncthreads()
        s = 64
        while s > 0:
            if t < s:
                sm[t] += sm[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            out[cuda.blockIdx.x] = sm[0]

    data = np.load(inputs)
    x, y, a = data["x"], data["y"], np.float32(data["a"])
    out = np.full(N, np.nan, np.float32)
    sums = np.full(N // TPB, np.nan, np.float32)
    saxpy[1, TPB](out, x, y, a, TPB)          # warm-up: one block
    block_sum[1, TPB](sums, x)
    t0 = time.perf_counter()
    saxpy[N // TPB, TPB](out, x, y, a, N)
    t1 = time.perf_counter()
    block_sum[N // TPB, TPB](sums, x)
    t2 = time.perf_counter()
    ok = bool(np.allclose(out, a * x + y, rtol=1e-5, atol=1e-6)
              and np.allclose(sums, x.reshape(-1, TPB).sum(1), rtol=1e-4, atol=1e-4))
    import numba
    print(json.dumps({"saxpy": t1 - t0, "block_sum": t2 - t1, "ok": ok,
                      "version": numba.__version__}))


def simulator_times(x, y, a) -> dict | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "inputs.npz")
        np.savez(path, x=x, y=y, a=a)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        extra = os.environ.get("KAIOJIT_NUMBA_PYTHONPATH")
        if extra:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [extra, env.get("PYTHONPATH")]))
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--simulator", path],
                              env=env, capture_output=True, text=True, timeout=1800,
                              check=False)
    if proc.returncode != 0:
        print(f"numba's simulator did not run:\n{proc.stderr.strip()[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- kaiojit on the cpu backend ----------------------------------------------------------------------

def kaiojit_times(x, y, a) -> dict:
    import kaiojit as kj
    from kaiojit.runtime import set_backend

    set_backend("cpu")

    @kj.jit
    def saxpy(out, x, y, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    @kj.jit
    def block_sum(out, x):
        sm = kj.shared.array(128, kj.float32)
        t = kj.threadIdx.x
        i = kj.grid(1)
        sm[t] = x[i]
        kj.syncthreads()
        s = 64
        while s > 0:
            if t < s:
                sm[t] += sm[t + s]
            kj.syncthreads()
            s //= 2
        if t == 0:
            out[kj.blockIdx.x] = sm[0]

    dx, dy = kj.to_device(x), kj.to_device(y)
    out = kj.to_device(np.full(N, np.nan, np.float32))
    sums = kj.to_device(np.full(N // TPB, np.nan, np.float32))
    t0 = time.perf_counter()
    saxpy[N // TPB, TPB](out, dx, dy, a, N)
    block_sum[N // TPB, TPB](sums, dx)
    compile_s = time.perf_counter() - t0
    assert np.allclose(out.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)
    assert np.allclose(sums.copy_to_host(), x.reshape(-1, TPB).sum(1), rtol=1e-4, atol=1e-4)

    def median(launch) -> float:
        for _ in range(10):
            launch()
        times = []
        for _ in range(REPS):
            t = time.perf_counter()
            launch()
            times.append(time.perf_counter() - t)
        return float(np.median(times))

    return {
        "saxpy": median(lambda: saxpy[N // TPB, TPB](out, dx, dy, a, N)),
        "block_sum": median(lambda: block_sum[N // TPB, TPB](sums, dx)),
        "compile": compile_s,
    }


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["--simulator"]:
        run_simulator(argv[1])
        return
    rng = np.random.default_rng()
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    a = np.float32(rng.standard_normal())
    ours = kaiojit_times(x, y, a)
    sim = simulator_times(x, y, a)
    rows = []
    for name, label in (("saxpy", "saxpy, 16,384 float32"),
                        ("block_sum", "block sum, 128 threads, shared memory + barriers")):
        sim_s = sim[name] if sim and sim["ok"] else None
        ratio = f"{sim_s / ours[name]:,.0f}x" if sim_s else "n/a"
        sim_text = f"{sim_s:.2f} s" if sim_s else "n/a"
        rows.append((label, f"{ours[name] * 1e6:,.1f} µs", sim_text, ratio))
    header = ("kernel", "kaiojit cpu (median)", "numba simulator", "speed-up")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    for r in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(f"(kaiojit first launches, compile included: {ours['compile']:.2f} s)")
    if "--no-record" in argv:
        return
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    numba_version = sim["version"] if sim else "not available"
    about = (f"Machine: {machine()}; numba {numba_version}; "
             "`python benchmarks/cpu_backend.py`, inputs drawn fresh for the run.\n")
    lines = [f"\n## cpu backend vs numba's CUDA simulator ({stamp})\n", about,
             "| " + " | ".join(header) + " |", "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    with open(RESULTS, "a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"recorded in {RESULTS}")


if __name__ == "__main__":
    main(sys.argv[1:])
