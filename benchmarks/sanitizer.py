"""The cpu backend's checked mode (docs/sanitizer.md) against the plain cpu backend.

Four kernels, each launched on a plain and on a checked CpuBackend in one process: saxpy over
1M float32 (256-thread blocks), a 256-thread shared-memory block sum over 1M float32, a 16x16
tiled matmul of 256x256 float32, and a 1-d three-point stencil over 1M float32. Every result
is checked against NumPy before it is timed; times are medians of REPS launches after a
warm-up (compiles excluded), plain and checked launched in turns. The goal (issue 27): checked under 5x the plain backend.

    PYTHONPATH=. python benchmarks/sanitizer.py [--no-record]
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time

import numpy as np

import kaiojit as kj
from kaiojit.runtime import CpuBackend, set_backend

N = 1 << 20
M = 256
TPB = 256
TILE = 16
REPS = 21
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@kj.jit
def block_sum(out, x):
    sm = kj.shared.array(256, kj.float32)
    t = kj.threadIdx.x
    sm[t] = x[kj.grid(1)]
    kj.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        kj.syncthreads()
        s //= 2
    if t == 0:
        out[kj.blockIdx.x] = sm[0]


@kj.jit
def matmul(c, a, b, n):
    sa = kj.shared.array((16, 16), kj.float32)
    sb = kj.shared.array((16, 16), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    row = kj.blockIdx.y * 16 + ty
    col = kj.blockIdx.x * 16 + tx
    acc = kj.float32(0.0)
    for k0 in range(0, n, 16):
        sa[ty, tx] = a[row, k0 + tx]
        sb[ty, tx] = b[k0 + ty, col]
        kj.syncthreads()
        for k in range(16):
            acc += sa[ty, k] * sb[k, tx]
        kj.syncthreads()
    c[row, col] = acc


@kj.jit
def stencil(out, x, n):
    i = kj.grid(1)
    if 0 < i < n - 1:
        out[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]


def cases():
    rng = np.random.default_rng(7)
    x = rng.random(N, dtype=np.float32)
    y = rng.random(N, dtype=np.float32)
    a = rng.random((M, M), dtype=np.float32)
    b = rng.random((M, M), dtype=np.float32)
    want_stencil = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    return [
        ("saxpy (1M float32)", lambda d: saxpy[N // TPB, TPB](d["out"], d["x"], d["y"],
                                                              np.float32(2.0), N),
         lambda d: np.testing.assert_allclose(d["out"].copy_to_host(), 2 * x + y, rtol=1e-6)),
        ("block sum in shared memory (1M float32)",
         lambda d: block_sum[N // TPB, TPB](d["sums"], d["x"]),
         lambda d: np.testing.assert_allclose(d["sums"].copy_to_host(),
                                              x.reshape(-1, TPB).sum(1), rtol=1e-4)),
        ("tiled matmul (256x256 float32)",
         lambda d: matmul[(M // TILE, M // TILE), (TILE, TILE)](d["c"], d["a"], d["b"], M),
         lambda d: np.testing.assert_allclose(d["c"].copy_to_host(), a @ b, rtol=1e-4)),
        ("stencil (1M float32)", lambda d: stencil[N // TPB, TPB](d["out"], d["x"], N),
         lambda d: np.testing.assert_allclose(d["out"].copy_to_host()[1:-1], want_stencil,
                                              rtol=1e-6)),
    ], {"x": x, "y": y, "a": a, "b": b}


def measure() -> list[tuple[str, float, float]]:
    """Each kernel on a plain and a checked backend, launched in turns (plain, checked,
    plain, ...) so that both see the same load on a shared machine; each turn times the
    second of two launches; medians of REPS turns each."""
    table, host = cases()
    backends = {False: CpuBackend(sanitize=False), True: CpuBackend(sanitize=True)}
    rows = []
    for name, run, check in table:
        data = {}
        for checked, backend in backends.items():
            set_backend(backend)
            d = {k: kj.to_device(v) for k, v in host.items()}
            d["out"] = kj.to_device(np.full(N, np.nan, np.float32))
            d["sums"] = kj.to_device(np.full(N // TPB, np.nan, np.float32))
            d["c"] = kj.to_device(np.full((M, M), np.nan, np.float32))
            run(d)
            check(d)
            run(d)  # warm
            data[checked] = d
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(REPS):
            for checked, backend in backends.items():
                set_backend(backend)
                run(data[checked])  # wakes this backend's workers after the other's turn
                t0 = time.perf_counter()
                run(data[checked])
                times[checked].append(time.perf_counter() - t0)
        rows.append((name, float(np.median(times[False])) * 1e3,
                     float(np.median(times[True])) * 1e3))
    return rows


def main() -> None:
    rows = measure()
    lines = ["| kernel | plain cpu (ms) | checked (ms) | checked / plain |", "|---|---|---|---|"]
    for name, plain, checked in rows:
        lines.append(f"| {name} | {plain:.2f} | {checked:.2f} | {checked / plain:.1f}x |")
    table = "\n".join(lines)
    print(table)
    if "--no-record" in sys.argv:
        return
    import llvmlite

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(RESULTS, "a") as f:
        f.write(f"\n## The cpu backend's checked mode (`benchmarks/sanitizer.py`), {now}\n\n"
                f"A 2-core CPU machine ({platform.processor() or platform.machine()}), no GPU, "
                f"Python {platform.python_version()}, llvmlite {llvmlite.__version__}; medians "
                f"of {REPS} launches after a warm-up, plain and checked in turns, compiles "
                f"excluded, results checked against NumPy first. Goal: checked under 5x plain.\n\n{table}\n")


if __name__ == "__main__":
    main()
