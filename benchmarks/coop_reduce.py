"""A one-launch cooperative reduction (kj.cg.this_grid().sync()) against the best two-kernel
reduction, in one run: the sum of 2^28 float32.

Both do the same first phase (grid-stride loads, SUM_UNROLL in flight, warp shuffles, one
partial a block). The cooperative kernel then synchronizes its grid and block 0 sums the
partials; the two-kernel form launches a second, one-block kernel for that. The two-kernel
form is timed at several grid sizes and its best counts; the goal is the cooperative one
within 10% of it. For context: one kernel with an atomic a block, and torch.sum if importable.
Results are checked against NumPy (float64) first; times are CUDA events over back-to-back
calls, rotating two input sets so L2 never serves them.

    PYTHONPATH=. python3 benchmarks/coop_reduce.py [--small]
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

import kaiojit as kj

sys.path.insert(0, os.path.dirname(__file__))
from _throughput import per_call_ms  # noqa: E402
from bandwidth import load_peers, tbps  # noqa: E402

N = 1 << 28
SETS = 2
BLOCK = 256
SUM_UNROLL = 4


@kj.jit(device=True)
def block_total(x, n, warp_sums):
    """This block's share of a grid-stride sum of x; the total is valid in thread 0."""
    acc = kj.local.array(SUM_UNROLL, kj.float32)
    for k in range(SUM_UNROLL):
        acc[k] = 0.0
    stride = kj.gridsize(1)
    i = kj.grid(1)
    while i + (SUM_UNROLL - 1) * stride < n:
        for k in range(SUM_UNROLL):
            acc[k] += x[i + k * stride]
        i += SUM_UNROLL * stride
    while i < n:
        acc[0] += x[i]
        i += stride
    total = kj.float32(0.0)
    for k in range(SUM_UNROLL):
        total += acc[k]
    return block_reduce(total, warp_sums)


@kj.jit(device=True)
def block_reduce(v, warp_sums):
    """The sum of every thread's v, in thread 0 (warp shuffles, one shared slot a warp)."""
    offset = 16
    while offset > 0:
        v += kj.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    lane = kj.threadIdx.x % 32
    warp = kj.threadIdx.x // 32
    if lane == 0:
        warp_sums[warp] = v
    kj.syncthreads()
    w = kj.float32(0.0)
    if warp == 0:
        nwarps = kj.blockDim.x // 32
        w = warp_sums[lane] if lane < nwarps else kj.float32(0.0)
        offset = 16
        while offset > 0:
            w += kj.shfl_down_sync(0xFFFFFFFF, w, offset)
            offset //= 2
    return w


@kj.jit(device=True)
def sum_partials(out, partial, count, warp_sums):
    """One block: out[0] = sum(partial[:count])."""
    v = kj.float32(0.0)
    for b in range(kj.threadIdx.x, count, kj.blockDim.x):
        v += partial[b]
    total = block_reduce(v, warp_sums)
    if kj.threadIdx.x == 0:
        out[0] = total


@kj.jit
def coop_sum(out, partial, x, n):
    warp_sums = kj.shared.array(32, kj.float32)
    t = block_total(x, n, warp_sums)
    if kj.threadIdx.x == 0:
        partial[kj.blockIdx.x] = t
    kj.cg.this_grid().sync()
    if kj.blockIdx.x == 0:
        kj.syncthreads()  # warp_sums is reused
        sum_partials(out, partial, kj.gridDim.x, warp_sums)


@kj.jit
def partial_sums(partial, x, n):
    warp_sums = kj.shared.array(32, kj.float32)
    t = block_total(x, n, warp_sums)
    if kj.threadIdx.x == 0:
        partial[kj.blockIdx.x] = t


@kj.jit
def atomic_sum(out, x, n):
    warp_sums = kj.shared.array(32, kj.float32)
    t = block_total(x, n, warp_sums)
    if kj.threadIdx.x == 0:
        kj.atomic.add(out, 0, t)


@kj.jit
def final_sum(out, partial, count):
    warp_sums = kj.shared.array(32, kj.float32)
    sum_partials(out, partial, count, warp_sums)


def main() -> None:
    n = N // (16 if "--small" in sys.argv else 1)
    rng = np.random.default_rng()
    hx = [rng.standard_normal(n, dtype=np.float32) for _ in range(SETS)]
    xs = [kj.to_device(v) for v in hx]
    refs = [v.sum(dtype=np.float64) for v in hx]
    n64 = np.int64(n)
    nbytes = 4 * n
    rows = []

    def check(value: float, k: int, who: str) -> None:
        if not abs(value - refs[k]) <= 1e-3 * math.sqrt(n) + 1e-5 * abs(refs[k]):
            raise AssertionError(f"{who}: sum {value} vs {refs[k]}")

    def poisoned(count: int) -> list:
        return [kj.to_device(np.full(count, np.nan, np.float32)) for _ in range(SETS)]

    sig = "void(float32[::1], float32[::1], float32[::1], int64)"
    coop_sum.compile(sig)
    coop_grid = coop_sum.max_cooperative_grid_blocks(BLOCK, signature=sig)
    outs, parts = poisoned(1), poisoned(coop_grid)
    for k in range(SETS):
        coop_sum[coop_grid, BLOCK](outs[k], parts[k], xs[k], n64)
        check(float(outs[k].copy_to_host()[0]), k, "cooperative")
    ms = per_call_ms(lambda k: coop_sum[coop_grid, BLOCK](outs[k], parts[k], xs[k], n64), SETS)
    coop_ms = ms
    rows.append((f"cooperative, one launch ({coop_grid} blocks)", ms, tbps(nbytes, ms)))

    best = None
    grids = {coop_grid, 2 * coop_grid, 4 * coop_grid, (n + BLOCK * 16 - 1) // (BLOCK * 16)}
    for grid in sorted(grids):
        outs, parts = poisoned(1), poisoned(grid)
        count = np.int64(grid)

        def two(k: int, grid=grid, parts=parts, outs=outs, count=count) -> None:
            partial_sums[grid, BLOCK](parts[k], xs[k], n64)
            final_sum[1, 1024](outs[k], parts[k], count)
        for k in range(SETS):
            two(k)
            check(float(outs[k].copy_to_host()[0]), k, f"two kernels, {grid} blocks")
        ms = per_call_ms(two, SETS)
        rows.append((f"two kernels ({grid} blocks + 1)", ms, tbps(nbytes, ms)))
        best = ms if best is None else min(best, ms)

    outs = [kj.to_device(np.zeros(1, np.float32)) for _ in range(SETS)]
    grid = coop_grid

    def atomic(k: int) -> None:
        outs[k].copy_to_device(np.zeros(1, np.float32))
        atomic_sum[grid, BLOCK](outs[k], xs[k], n64)
    for k in range(SETS):
        atomic(k)
        check(float(outs[k].copy_to_host()[0]), k, "atomics")
    ms = per_call_ms(atomic, SETS)
    rows.append(("one kernel, an atomic a block (+ zeroing copy)", ms, tbps(nbytes, ms)))

    peers = load_peers()
    if "torch" in peers and kj.backend() == "cuda":
        torch = peers["torch"]
        tx = [torch.from_numpy(v).cuda() for v in hx]
        check(float(tx[0].sum().item()), 0, "torch")
        ms = per_call_ms(lambda k: tx[k].sum(), SETS)
        rows.append(("torch.sum", ms, tbps(nbytes, ms)))

    print(f"sum of {n} float32 on the {kj.backend()} backend")
    print(f"{'who':<44} {'ms':>8} {'TB/s':>6}")
    for who, ms, rate in rows:
        print(f"{who:<44} {ms:>8.3f} {rate:>6.2f}")
    ratio = coop_ms / best
    verdict = "met" if ratio <= 1.10 else "missed"
    print(f"cooperative / best two-kernel time: {ratio:.3f} (goal <= 1.10: {verdict})")


if __name__ == "__main__":
    main()
