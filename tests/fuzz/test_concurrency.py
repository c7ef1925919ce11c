"""Launches from 8 host threads at once, each into its own outputs, many times: every result
is the launching thread's own (no argument of another thread's launch), and none is lost."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import set_backend

THREADS = 8
ROUNDS = 25


@kj.jit(contract=False)  # bit-exact against NumPy
def scale(out, x, k, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i] * k + i


@kj.jit(contract=False)  # bit-exact against NumPy
def block_sum(out, x, k):
    s = kj.shared.array(64, kj.float64)
    t = kj.threadIdx.x
    s[t] = x[kj.grid(1)] * k
    kj.syncthreads()
    if t == 0:
        acc = 0.0
        for j in range(64):
            acc += s[j]
        out[kj.blockIdx.x] = acc


def _launch_from_threads(stream_per_thread: bool) -> None:
    rng = np.random.default_rng()
    n = 500
    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def work(w: int) -> None:
        stream = kj.Stream() if stream_per_thread else 0
        x = kj.to_device(rng.standard_normal(n))
        xs = kj.to_device(rng.standard_normal(256))
        host_x, host_xs = x.copy_to_host(), xs.copy_to_host()
        start.wait()
        for r in range(ROUNDS):
            k = float(w * 1000 + r)  # names the thread and the round
            out = kj.to_device(np.full(n, np.nan))
            sums = kj.to_device(np.full(4, np.nan))
            scale[(n + 127) // 128, 128, stream](out, x, k, n)
            block_sum[4, 64, stream](sums, xs, k)
            got = out.copy_to_host(stream=stream)
            got_sums = sums.copy_to_host(stream=stream)
            if stream_per_thread:
                stream.synchronize()
            if not np.array_equal(got, host_x * k + np.arange(n)):
                errors.append(f"thread {w} round {r}: scale")
            want = (host_xs * k).reshape(4, 64).sum(axis=1)
            if not np.allclose(got_sums, want, rtol=1e-12, atol=1e-9):
                errors.append(f"thread {w} round {r}: block_sum")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


def test_concurrent_launches_on_the_cpu_backend():
    previous = set_backend("cpu")
    try:
        _launch_from_threads(stream_per_thread=False)
    finally:
        set_backend(previous)


@pytest.mark.gpu
def test_concurrent_launches_on_the_gpu():
    previous = set_backend("cuda")
    try:
        _launch_from_threads(stream_per_thread=True)
    finally:
        set_backend(previous)
