"""Monte Carlo estimate of pi with per-thread xoroshiro128+ generators.

numba-cuda's documented random-number example, moved over by changing the imports: every
thread draws points in the unit square from its own generator and counts those inside the
quarter circle. Runs on a GPU when one is usable, else on kaiojit's cpu backend.
"""

import math

import numpy as np

import kaiojit as kj
from kaiojit.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32


@kj.jit
def compute_pi(rng_states, iterations, out):
    """Each thread's estimate of pi from ``iterations`` random points."""
    thread_id = kj.grid(1)
    inside = 0
    for i in range(iterations):
        x = xoroshiro128p_uniform_float32(rng_states, thread_id)
        y = xoroshiro128p_uniform_float32(rng_states, thread_id)
        if x ** 2 + y ** 2 <= 1.0:
            inside += 1
    out[thread_id] = 4.0 * inside / iterations


def main(seed: int = 1, threads_per_block: int = 64, blocks: int = 24,
         iterations: int = 10000) -> float:
    rng_states = create_xoroshiro128p_states(threads_per_block * blocks, seed=seed)
    out = kj.to_device(np.full(threads_per_block * blocks, np.nan, dtype=np.float32))
    compute_pi[blocks, threads_per_block](rng_states, iterations, out)
    estimates = out.copy_to_host()
    pi = float(estimates.mean())
    draws = threads_per_block * blocks * iterations
    # the standard error of the mean of `draws` Bernoulli(pi/4) trials, times 4
    error = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / draws)
    print(f"pi ~ {pi:.6f} from {draws} points on the {kj.backend()} backend "
          f"(|error| {abs(pi - math.pi):.2e}, standard error {error:.2e})")
    return pi


if __name__ == "__main__":
    main()
