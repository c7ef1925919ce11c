"""numba-cuda's documented shared-memory matmul (16 x 16 tiles), for benchmarks/gemm.py; run in
a subprocess (numba-cuda needs an older NumPy on the H200 machine). Checks itself against NumPy
at a small size, then prints one JSON line: [[problem, who, ms, TFLOP/s], ...]."""

import json
import sys

import numpy as np
from numba import cuda, float32

TPB = 16


@cuda.jit
def fast_matmul(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x  # blocks per grid
    tmp = float32(0.)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def run(n: int):
    rng = np.random.default_rng()
    a = cuda.to_device(rng.standard_normal((n, n), dtype=np.float32))
    b = cuda.to_device(rng.standard_normal((n, n), dtype=np.float32))
    c = cuda.to_device(np.full((n, n), np.nan, np.float32))
    blocks = (n + TPB - 1) // TPB
    return a, b, c, lambda: fast_matmul[(blocks, blocks), (TPB, TPB)](a, b, c)


def main():
    small = 72
    a, b, c, launch = run(small)
    launch()
    expect = a.copy_to_host() @ b.copy_to_host()
    assert np.allclose(c.copy_to_host(), expect, rtol=1e-4, atol=1e-3), "numba matmul wrong"
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    a, b, c, launch = run(n)
    launch()
    cuda.synchronize()
    s, e = cuda.event(), cuda.event()
    times = []
    for _ in range(5):
        s.record()
        launch()
        e.record()
        e.synchronize()
        times.append(cuda.event_elapsed_time(s, e))
    ms = float(np.median(times))
    print(json.dumps([[f"numba-doc matmul {n}^3", "numba-cuda", ms, 2 * n ** 3 / ms / 1e9]]))


if __name__ == "__main__":
    main()
