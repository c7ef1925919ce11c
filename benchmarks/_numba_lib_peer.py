"""numba-cuda's side of benchmarks/random_rate.py and benchmarks/vectorize_bw.py, run in a
subprocess (it needs an older NumPy on the H200 machine).

    python _numba_lib_peer.py random N_STATES PER_THREAD
    python _numba_lib_peer.py vectorize N

Prints one JSON line: [[what, who, ms, rate], ...] with rate in numbers/s (random) or TB/s
(vectorize). Timing as the kaiojit side: CUDA events around CALLS back-to-back calls, the
median of REPS, rotating between two input sets.
"""

import json
import sys

import numpy as np
from numba import cuda, float32, vectorize
from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

CALLS, REPS, SETS = 10, 7, 2


@cuda.jit
def fill_uniform(states, out, per_thread):
    i = cuda.grid(1)
    n = states.shape[0]
    if i < n:
        for k in range(per_thread):
            out[k * n + i] = xoroshiro128p_uniform_float32(states, i)


@cuda.jit
def sum_uniform(states, out, per_thread):
    i = cuda.grid(1)
    if i < states.shape[0]:
        acc = float32(0.0)
        for k in range(per_thread):
            acc += xoroshiro128p_uniform_float32(states, i)
        out[i] = acc


@vectorize(["float32(float32, float32)"], target="cuda")
def add(a, b):
    return a + b


def per_call_ms(call):
    for k in range(SETS):
        call(k)
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    times = []
    for _ in range(REPS):
        start.record()
        for c in range(CALLS):
            call(c % SETS)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / CALLS)
    return float(np.median(times))


def bench_random(n_states, per_thread):
    states = [create_xoroshiro128p_states(n_states, seed=s + 1) for s in range(SETS)]
    fills = [cuda.device_array(n_states * per_thread, np.float32) for _ in range(SETS)]
    sums = [cuda.device_array(n_states, np.float32) for _ in range(SETS)]
    block = 256
    grid = (n_states + block - 1) // block
    numbers = n_states * per_thread
    rows = []
    ms = per_call_ms(lambda k: fill_uniform[grid, block](states[k], fills[k], per_thread))
    rows.append(["uniform float32, stored", "numba-cuda", ms, numbers / (ms * 1e-3)])
    ms = per_call_ms(lambda k: sum_uniform[grid, block](states[k], sums[k], per_thread))
    rows.append(["uniform float32, summed", "numba-cuda", ms, numbers / (ms * 1e-3)])
    return rows


def bench_vectorize(n):
    rng = np.random.default_rng()
    xs = [cuda.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(SETS)]
    ys = [cuda.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(SETS)]
    outs = [cuda.device_array(n, np.float32) for _ in range(SETS)]
    add(xs[0], ys[0], out=outs[0])
    if not np.array_equal(outs[0].copy_to_host(), xs[0].copy_to_host() + ys[0].copy_to_host()):
        raise AssertionError("numba vectorize result wrong")
    ms = per_call_ms(lambda k: add(xs[k], ys[k], out=outs[k]))
    return [["vectorize a+b", "numba-cuda @vectorize", ms, 12 * n / (ms * 1e-3) / 1e12]]


def main():
    if sys.argv[1] == "random":
        rows = bench_random(int(sys.argv[2]), int(sys.argv[3]))
    else:
        rows = bench_vectorize(int(sys.argv[2]))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
