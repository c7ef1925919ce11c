"""Disk-cache hit time (``@kj.jit(cache=True)``): in fresh processes, the time of the first
``compile`` of saxpy when the cache already holds it, against a cold compile.

    PYTHONPATH=. python benchmarks/cache_hit.py [--runs 9]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
import kaiojit as kj

@kj.jit(cache=True)
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]

t = time.perf_counter()
ck = saxpy.compile("void(float32[::1], float32[::1], float32[::1], float32, int32)")
print(json.dumps({"seconds": time.perf_counter() - t, "hit": bool(ck.timings.get("cache"))}))
"""


def run_child(cache: str) -> dict:
    env = dict(os.environ, KAIOJIT_CACHE_DIR=cache, PYTHONPATH=os.getcwd())
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    path = os.path.join(cache, "kern.py")  # one file for both runs: its path is in the key
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(CHILD)
    out = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 9
    cold, hits = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            first = run_child(cache)
            second = run_child(cache)
        assert not first["hit"] and second["hit"], (first, second)
        cold.append(first["seconds"])
        hits.append(second["seconds"])
    print(f"cold compile  median {statistics.median(cold) * 1e3:7.2f} ms")
    print(f"disk-cache hit median {statistics.median(hits) * 1e3:7.2f} ms (goal < 1 ms)")


if __name__ == "__main__":
    main()
