"""xoroshiro128+ uniform float32 generation on the GPU: kaiojit.lib.random against numba-cuda's
numba.cuda.random, the same kernels, in one run.

2^20 generators each draw PER_THREAD numbers, either storing every number (coalesced, one
float32 each: memory-bound) or summing them (the generator alone). Numbers per second from
the per-call time of back-to-back launches (CUDA events). numba-cuda runs in a subprocess:
give its directory with KAIOJIT_NUMBA_PYTHONPATH.

    PYTHONPATH=. python3 benchmarks/random_rate.py [--small]
"""

from __future__ import annotations

import os
import sys

import numpy as np

import kaiojit as kj
from kaiojit.lib.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

sys.path.insert(0, os.path.dirname(__file__))
from _throughput import numba_peer_rows, per_call_ms  # noqa: E402

N_STATES = 1 << 20
PER_THREAD = 256
SETS = 2
BLOCK = 256


@kj.jit
def fill_uniform(states, out, per_thread):
    i = kj.grid(1)
    n = states.shape[0]
    if i < n:
        for k in range(per_thread):
            out[k * n + i] = xoroshiro128p_uniform_float32(states, i)


@kj.jit
def sum_uniform(states, out, per_thread):
    i = kj.grid(1)
    if i < states.shape[0]:
        acc = kj.float32(0.0)
        for k in range(per_thread):
            acc += xoroshiro128p_uniform_float32(states, i)
        out[i] = acc


def reference_uniforms(state: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` float32 uniforms of one generator, in plain Python."""
    mask = (1 << 64) - 1
    s0, s1 = int(state[0]), int(state[1])
    out = np.empty(count, np.float32)
    for k in range(count):
        out[k] = np.float32((((s0 + s1) & mask) >> 11) * 2.0 ** -53)
        s1 ^= s0
        s0 = (((s0 << 55) | (s0 >> 9)) ^ s1 ^ (s1 << 14)) & mask
        s1 = ((s1 << 36) | (s1 >> 28)) & mask
    return out


def main() -> None:
    small = "--small" in sys.argv
    n_states = N_STATES // (8 if small else 1)
    per_thread = PER_THREAD
    numbers = n_states * per_thread
    grid = (n_states + BLOCK - 1) // BLOCK
    states = [create_xoroshiro128p_states(n_states, seed=s + 1) for s in range(SETS)]
    first = states[0][:4].copy_to_host()
    fills = [kj.device_array(numbers, np.float32) for _ in range(SETS)]
    sums = [kj.device_array(n_states, np.float32) for _ in range(SETS)]

    # check before timing: the first generators' numbers against plain Python
    fill_uniform[grid, BLOCK](states[0], fills[0], per_thread)
    got = fills[0].copy_to_host().reshape(per_thread, n_states)
    for g in range(4):
        if not np.array_equal(got[:, g], reference_uniforms(first[g], per_thread)):
            raise AssertionError(f"generator {g} drew the wrong numbers")
    states = [create_xoroshiro128p_states(n_states, seed=s + 1) for s in range(SETS)]

    rows = []
    ms = per_call_ms(lambda k: fill_uniform[grid, BLOCK](states[k], fills[k], per_thread), SETS)
    rows.append(("uniform float32, stored", "kaiojit", ms, numbers / (ms * 1e-3)))
    ms = per_call_ms(lambda k: sum_uniform[grid, BLOCK](states[k], sums[k], per_thread), SETS)
    rows.append(("uniform float32, summed", "kaiojit", ms, numbers / (ms * 1e-3)))
    rows += numba_peer_rows("random", n_states, per_thread)

    print(f"{n_states} generators x {per_thread} numbers on the {kj.backend()} backend")
    print(f"{'what':<26} {'who':<12} {'ms':>8} {'numbers/s':>11}")
    for what in ("uniform float32, stored", "uniform float32, summed"):
        for row in sorted((r for r in rows if r[0] == what), key=lambda r: -r[3]):
            print(f"{row[0]:<26} {row[1]:<12} {row[2]:>8.3f} {row[3]:>11.3e}")


if __name__ == "__main__":
    main()
