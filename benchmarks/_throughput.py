"""Shared by random_rate.py and vectorize_bw.py: the per-call time of back-to-back calls, and
the numba-cuda peer (benchmarks/_numba_lib_peer.py) run in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np

import kaiojit as kj

CALLS, REPS = 10, 7


def per_call_ms(call: Callable[[int], object], sets: int) -> float:
    """Median over REPS of the mean ms a call of CALLS back-to-back calls takes (CUDA events),
    rotating ``call(k)`` over the input sets: the device's throughput, host overhead hidden
    behind the queued work as in a real pipeline."""
    for k in range(sets):
        call(k)
    kj.synchronize()
    start, end = kj.Event(), kj.Event()
    times = []
    for _ in range(REPS):
        start.record()
        for c in range(CALLS):
            call(c % sets)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / CALLS)
    return float(np.median(times))


def numba_peer_rows(*args: object) -> list[tuple]:
    """Rows from the numba-cuda peer, when KAIOJIT_NUMBA_PYTHONPATH names where it imports
    (numba-cuda needs an older NumPy than kaiojit's on the H200 machine)."""
    path = os.environ.get("KAIOJIT_NUMBA_PYTHONPATH")
    if not path:
        print("(no KAIOJIT_NUMBA_PYTHONPATH: numba-cuda left out)")
        return []
    script = os.path.join(os.path.dirname(__file__), "_numba_lib_peer.py")
    r = subprocess.run([sys.executable, script, *map(str, args)],
                       env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True)
    if r.returncode != 0:
        print("numba-cuda peer failed:", r.stderr[-2000:])
        return []
    return [tuple(row) for row in json.loads(r.stdout.strip().splitlines()[-1])]
