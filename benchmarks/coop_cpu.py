"""What a cooperative launch (a kernel that calls ``kj.cg.this_grid().sync()``) costs on the cpu
backend, where every block runs on a thread of its own (docs/cooperative.md).

* numba's cooperative-groups documentation example (examples/grid_sync.py's kernel): 1024 x 1024
  int32, 32 blocks of 32 threads, 1023 grid syncs, checked against NumPy;
* the cost of one grid sync with 32 to 4224 blocks of 32 threads (the most an H200 holds):
  ``(time with 41 syncs - time with 1) / 40``, medians of 5 launches after a warm-up;
* a launch of 4224 blocks with one sync (threads started and joined).

    PYTHONPATH=. python benchmarks/coop_cpu.py [--no-record]
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import platform
import statistics
import sys
import time

import numpy as np

import kaiojit as kj

EXTRA = 40  # the syncs a launch adds to measure one
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


@kj.jit
def syncs(x, n):
    i = kj.grid(1)
    g = kj.cg.this_grid()
    for k in range(n):
        x[i] += k
        g.sync()


def median_s(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(record: bool) -> list[str]:
    kj.set_backend("cpu")
    spec = importlib.util.spec_from_file_location("grid_sync", os.path.join(
        os.path.dirname(RESULTS), "..", "examples", "grid_sync.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    sequential_rows = example.sequential_rows  # numba's documented kernel
    A = np.zeros((1024, 1024), np.int32)
    A[0] = np.random.default_rng().integers(-100, 100, 1024)
    d = kj.to_device(A)
    t_example = median_s(lambda: sequential_rows[32, 32](d), 3)
    want = A.copy()
    for row in range(1, 1024):
        want[row] = want[row - 1, ::-1] + 1
    sequential_rows[32, 32](d := kj.to_device(A))
    assert (d.copy_to_host() == want).all()
    lines = [f"- numba's cooperative-groups example (1024 x 1024, 32 blocks of 32 threads, 1023 "
             f"grid syncs): {t_example * 1e3:.0f} ms a launch (median of 3), matches NumPy"]
    per_sync = []
    for blocks in (32, 264, 1056, 4224):
        x = kj.to_device(np.zeros(blocks * 32, np.int64))
        few = median_s(lambda: syncs[blocks, 32](x, np.int64(1)), 5)
        many = median_s(lambda: syncs[blocks, 32](x, np.int64(EXTRA + 1)), 5)
        per_sync.append(f"{blocks} blocks {(many - few) / EXTRA * 1e3:.2f} ms")
        if blocks == 4224:
            lines.append(f"- a launch of 4224 blocks of 32 threads with one grid sync: "
                         f"{few * 1e3:.0f} ms (4224 threads started and joined)")
    lines.append("- one grid sync (blocks of 32 threads): " + ", ".join(per_sync))
    text = "\n".join(lines)
    print(text)
    if record:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        with open(RESULTS, "a", encoding="utf-8") as f:
            import llvmlite

            f.write(f"\n## Cooperative launches on the cpu backend (`benchmarks/coop_cpu.py`), "
                    f"{now} UTC\n\nMachine: a {os.cpu_count()}-core CPU machine (AMD EPYC), no "
                    f"GPU; Python {platform.python_version()}, llvmlite {llvmlite.__version__}; "
                    f"other work shared the cores while it ran. Every block runs on a thread "
                    f"of its own; the waiters sleep on a futex.\n\n{text}\n")
    return lines


if __name__ == "__main__":
    main("--no-record" not in sys.argv)
