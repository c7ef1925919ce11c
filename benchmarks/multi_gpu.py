"""saxpy over 2^30 float32 split across every GPU of the host, against one GPU.

Each GPU gets its share of the inputs once; the timed region launches every share on its
own device, then waits for all of them (host timer around the whole, median of repeats).
Goal: two GPUs give at least 1.8x one GPU's throughput.

    PYTHONPATH=. python3 benchmarks/multi_gpu.py [--small]
"""

from __future__ import annotations

import sys
import time

import numpy as np

import kaiojit as kj

N = 1 << 30
REPS = 10


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def run(devices: list[int], n: int, x: np.ndarray, y: np.ndarray, a) -> tuple[float, np.ndarray]:
    bounds = np.linspace(0, n, len(devices) + 1).astype(np.int64)
    shares = []
    for dev, lo, hi in zip(devices, bounds[:-1], bounds[1:]):
        with kj.device(dev):
            m = int(hi - lo)
            shares.append((dev, m, kj.to_device(np.full(m, np.nan, np.float32)),
                           kj.to_device(x[lo:hi]), kj.to_device(y[lo:hi]), kj.Stream()))

    def launch_all():
        for dev, m, out, dx, dy, stream in shares:
            with kj.device(dev):
                saxpy[(m + 255) // 256, 256, stream](out, dx, dy, a, np.int32(m))
        for dev, *_, stream in shares:
            with kj.device(dev):
                stream.synchronize()

    launch_all()
    result = np.concatenate([s[2].copy_to_host() for s in shares])
    times = []
    for _ in range(REPS):
        t = time.perf_counter()
        launch_all()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), result


def main() -> None:
    n = N // (16 if "--small" in sys.argv else 1)
    count = kj.device_count()
    rng = np.random.default_rng()
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    a = np.float32(rng.uniform(0.5, 2))
    ref = a * x + y
    rows = []
    for devices in ([0], list(range(count))) if count > 1 else ([0],):
        seconds, out = run(devices, n, x, y, a)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
        rows.append((len(devices), seconds, 12 * n / seconds / 1e12))
    print(f"{'GPUs':>4} {'ms':>9} {'TB/s':>7} {'speed-up':>9}")
    for gpus, seconds, tb in rows:
        print(f"{gpus:>4} {seconds * 1e3:>9.3f} {tb:>7.2f} {rows[0][1] / seconds:>9.2f}")


if __name__ == "__main__":
    main()
