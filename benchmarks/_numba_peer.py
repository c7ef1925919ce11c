"""numba-cuda versions of the bandwidth kernels, run in a subprocess (it needs an older NumPy
on the H200 machine). Prints one JSON line: [[kernel, who, ms, TB/s], ...]."""

import json
import sys

import numpy as np
from numba import cuda, float32

N = 1 << 28
TILE, ROWS = 32, 8
TILE_PAD = TILE + 1


@cuda.jit
def saxpy(out, x, y, a, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sum(out, x, n):
    warp_sums = cuda.shared.array(32, float32)
    acc = float32(0.0)
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        acc += x[i]
        i += stride
    offset = 16
    while offset > 0:
        acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
        offset //= 2
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    if lane == 0:
        warp_sums[warp] = acc
    cuda.syncthreads()
    if warp == 0:
        v = warp_sums[lane] if lane < cuda.blockDim.x // 32 else float32(0.0)
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if lane == 0:
            cuda.atomic.add(out, 0, v)


@cuda.jit
def transpose(out, a):
    tile = cuda.shared.array((TILE, TILE_PAD), float32)
    x = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    for k in range(0, TILE, ROWS):
        tile[cuda.threadIdx.y + k, cuda.threadIdx.x] = a[y + k, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + cuda.threadIdx.x
    y = cuda.blockIdx.x * TILE + cuda.threadIdx.y
    for k in range(0, TILE, ROWS):
        out[y + k, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y + k]


def time_ms(f, reps=20):
    f(0)
    f(1)
    cuda.synchronize()
    s, e = cuda.event(), cuda.event()
    times = []
    for r in range(reps):
        s.record()
        f(r % 2)
        e.record()
        e.synchronize()
        times.append(cuda.event_elapsed_time(s, e))
    return float(np.median(times))


def main():
    small = "--small" in sys.argv
    n = N // (8 if small else 1)
    rng = np.random.default_rng()
    rows = []
    hx = [rng.standard_normal(n).astype(np.float32) for _ in range(2)]
    hy = [rng.standard_normal(n).astype(np.float32) for _ in range(2)]
    xs = [cuda.to_device(v) for v in hx]
    ys = [cuda.to_device(v) for v in hy]
    outs = [cuda.device_array(n, np.float32) for _ in range(2)]
    a = np.float32(1.5)
    grid = (n + 255) // 256
    saxpy[grid, 256](outs[0], xs[0], ys[0], a, n)
    assert np.allclose(outs[0].copy_to_host(), a * hx[0] + hy[0], rtol=1e-5, atol=1e-5)
    ms = time_ms(lambda k: saxpy[grid, 256](outs[k], xs[k], ys[k], a, n))
    rows.append(["saxpy", "numba-cuda", ms, 12 * n / ms / 1e9])
    sums = [cuda.to_device(np.zeros(1, np.float32)) for _ in range(2)]
    block_sum[132 * 8, 512](sums[0], xs[0], n)
    ref = hx[0].sum(dtype=np.float64)
    assert abs(sums[0].copy_to_host()[0] - ref) < 1e-3 * n ** 0.5 + 1e-5 * abs(ref)
    ms = time_ms(lambda k: block_sum[132 * 8, 512](sums[k], xs[k], n))
    rows.append(["sum", "numba-cuda", ms, 4 * n / ms / 1e9])
    del xs, ys, outs
    m = 16384 // (2 if small else 1)
    ha = [rng.standard_normal((m, m)).astype(np.float32) for _ in range(2)]
    As = [cuda.to_device(v) for v in ha]
    touts = [cuda.device_array((m, m), np.float32) for _ in range(2)]
    g = (m // TILE, m // TILE)
    transpose[g, (TILE, ROWS)](touts[0], As[0])
    assert np.array_equal(touts[0].copy_to_host(), ha[0].T)
    ms = time_ms(lambda k: transpose[g, (TILE, ROWS)](touts[k], As[k]))
    rows.append(["transpose", "numba-cuda", ms, 8 * m * m / ms / 1e9])
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
