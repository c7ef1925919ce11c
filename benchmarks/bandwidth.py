"""Memory-bound kernels on the GPU: kaiojit against every peer importable, in one process.

saxpy over 2^28 float32 (12 bytes/element), a sum of 2^28 float32 (4 bytes/element), and a
transpose of a 16384 x 16384 float32 matrix (8 bytes/element). Each result is checked against
NumPy before timing; times are CUDA-event medians after warm-up, rotating between input sets
so L2 never serves them. numba-cuda runs in a subprocess (benchmarks/_numba_peer.py) because
it needs an older NumPy there: give its directory with KAIOJIT_NUMBA_PYTHONPATH.

    PYTHONPATH=. python3 benchmarks/bandwidth.py [--small] [--saxpy]

The one-element saxpy runs through its coarse entry (a quarter of the blocks, four elements a
thread: kaiojit/kir/coarsen.py), and again through its own entry (``coarsen=False``, with and
without the L2 prefetches).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np

import kaiojit as kj

SAXPY_N = 1 << 28
SUM_N = 1 << 28
TRANSPOSE_N = 16384
SETS = 2
REPS = 60


# --- kaiojit kernels ------------------------------------------------------------------------------


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


# the same kernel without the L2 prefetches kaiojit adds to a stream (docs/semantics.md)
saxpy_no_prefetch = kj.jit(prefetch=False, coarsen=False)(saxpy.py_func)
# the same kernel through its own entry only: one block of the launch a block (no coarse entry)
saxpy_own_entry = kj.jit(coarsen=False)(saxpy.py_func)

UNROLL = 4


@kj.jit
def saxpy_unrolled(out, x, y, a, n):
    # each block covers UNROLL * blockDim consecutive elements, every access still coalesced;
    # a block wholly inside the array loads all its elements before it stores any
    bd = kj.blockDim.x
    base = kj.blockIdx.x * bd * UNROLL + kj.threadIdx.x
    if base + (UNROLL - 1) * bd < n:
        xs = kj.local.array(UNROLL, kj.float32)
        ys = kj.local.array(UNROLL, kj.float32)
        for k in range(UNROLL):
            xs[k] = x[base + k * bd]
            ys[k] = y[base + k * bd]
        for k in range(UNROLL):
            out[base + k * bd] = a * xs[k] + ys[k]
    else:
        for k in range(UNROLL):
            i = base + k * bd
            if i < n:
                out[i] = a * x[i] + y[i]


@kj.jit
def saxpy_vec4(out, x, y, a, n):
    # four consecutive elements a thread: one 128-bit load of x and y and one 128-bit store
    # each when the arrays are specialized as 16-byte aligned (float32[::1, align=16])
    i = kj.grid(1) * 4
    if i + 3 < n:
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        out[i] = a * x0 + y[i]
        out[i + 1] = a * x1 + y[i + 1]
        out[i + 2] = a * x2 + y[i + 2]
        out[i + 3] = a * x3 + y[i + 3]
    else:
        for k in range(4):
            if i + k < n:
                out[i + k] = a * x[i + k] + y[i + k]


def ptx_widths() -> None:
    """How many 64-bit and 128-bit global loads and stores each kernel's PTX has, without and
    with the alignment specialization."""
    import re

    pair = "void(float32[:, ::1{a}], float32[:, ::1{a}])"
    sigs = {
        saxpy: "void(float32[::1{a}], float32[::1{a}], float32[::1{a}], float32, int32)",
        saxpy_vec4: "void(float32[::1{a}], float32[::1{a}], float32[::1{a}], float32, int32)",
        transpose: pair,
        transpose64_pairs: pair,
    }

    def widths(ptx: str) -> str:
        return " ".join(f"{len(re.findall(rf'ld[.]global(?:[.]nc)?[.]{v}', ptx))}/"
                        f"{len(re.findall(rf'st[.]global[.]{v}', ptx))}" for v in ("v2", "v4"))

    print(f"{'kernel':<18} {'v2 ld/st, v4 ld/st unaligned':>30} {'align=16':>12}")
    for kern, sig in sigs.items():
        counts = [widths(kern.inspect_ptx(sig.format(a=a))) for a in ("", ", align=16")]
        print(f"{kern.__name__:<18} {counts[0]:>30} {counts[1]:>12}")


SUM_UNROLL = 4


@kj.jit
def block_sum(out, x, n):
    # grid-stride accumulation with SUM_UNROLL independent loads in flight, warp shuffles,
    # one shared slot per warp, one atomic per block
    warp_sums = kj.shared.array(32, kj.float32)
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
    offset = 16
    while offset > 0:
        total += kj.shfl_down_sync(0xFFFFFFFF, total, offset)
        offset //= 2
    lane = kj.threadIdx.x % 32
    warp = kj.threadIdx.x // 32
    if lane == 0:
        warp_sums[warp] = total
    kj.syncthreads()
    if warp == 0:
        nwarps = kj.blockDim.x // 32
        v = warp_sums[lane] if lane < nwarps else kj.float32(0.0)
        offset = 16
        while offset > 0:
            v += kj.shfl_down_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if lane == 0:
            kj.atomic.add(out, 0, v)


TILE = 32
TILE_PAD = TILE + 1
ROWS = 8


@kj.jit
def transpose(out, a):
    tile = kj.shared.array((TILE, TILE_PAD), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    bx, by = kj.blockIdx.x * TILE, kj.blockIdx.y * TILE
    n0, n1 = a.shape
    full = by + TILE <= n0 and bx + TILE <= n1
    if full:  # a tile wholly inside the matrix: no bounds checks
        for k in range(0, TILE, ROWS):
            tile[ty + k, tx] = a[by + ty + k, bx + tx]
    else:
        for k in range(0, TILE, ROWS):
            if by + ty + k < n0 and bx + tx < n1:
                tile[ty + k, tx] = a[by + ty + k, bx + tx]
    kj.syncthreads()
    if full:
        for k in range(0, TILE, ROWS):
            out[bx + ty + k, by + tx] = tile[tx, ty + k]
    else:
        for k in range(0, TILE, ROWS):
            if bx + ty + k < n1 and by + tx < n0:
                out[bx + ty + k, by + tx] = tile[tx, ty + k]


BIG = 64
BIG_PAD = BIG + 1


def make_transpose64(rows: int):
    """64 x 64 tiles, a block of 32 x ``rows`` threads: 2048 / rows elements a thread."""

    @kj.jit
    def transpose64(out, a):
        tile = kj.shared.array((BIG, BIG_PAD), kj.float32)
        tx, ty = kj.threadIdx.x, kj.threadIdx.y
        bx, by = kj.blockIdx.x * BIG, kj.blockIdx.y * BIG
        n0, n1 = a.shape
        full = by + BIG <= n0 and bx + BIG <= n1
        if full:
            for k in range(0, BIG, rows):
                for c in range(0, BIG, TILE):
                    tile[ty + k, tx + c] = a[by + ty + k, bx + tx + c]
        else:
            for k in range(0, BIG, rows):
                for c in range(0, BIG, TILE):
                    if by + ty + k < n0 and bx + tx + c < n1:
                        tile[ty + k, tx + c] = a[by + ty + k, bx + tx + c]
        kj.syncthreads()
        if full:
            for k in range(0, BIG, rows):
                for c in range(0, BIG, TILE):
                    out[bx + ty + k, by + tx + c] = tile[tx + c, ty + k]
        else:
            for k in range(0, BIG, rows):
                for c in range(0, BIG, TILE):
                    if bx + ty + k < n1 and by + tx + c < n0:
                        out[bx + ty + k, by + tx + c] = tile[tx + c, ty + k]
    return transpose64


TRANSPOSE64 = {rows: make_transpose64(rows) for rows in (8, 4)}


@kj.jit
def transpose64_pairs(out, a):
    """64 x 64 tiles, a block of 32 x 8 threads, each thread two adjacent columns: with the
    arrays specialized as 16-byte aligned, LLVM joins each pair into one 64-bit access."""
    tile = kj.shared.array((BIG, BIG_PAD), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    bx, by = kj.blockIdx.x * BIG, kj.blockIdx.y * BIG
    n0, n1 = a.shape
    c = 2 * tx
    if by + BIG <= n0 and bx + BIG <= n1:
        for k in range(0, BIG, ROWS):
            v0 = a[by + ty + k, bx + c]
            v1 = a[by + ty + k, bx + c + 1]
            tile[ty + k, c] = v0
            tile[ty + k, c + 1] = v1
        kj.syncthreads()
        for k in range(0, BIG, ROWS):
            out[bx + ty + k, by + c] = tile[c, ty + k]
            out[bx + ty + k, by + c + 1] = tile[c + 1, ty + k]
    else:
        for k in range(0, BIG, ROWS):
            for j in range(2):
                if by + ty + k < n0 and bx + c + j < n1:
                    tile[ty + k, c + j] = a[by + ty + k, bx + c + j]
        kj.syncthreads()
        for k in range(0, BIG, ROWS):
            for j in range(2):
                if bx + ty + k < n1 and by + c + j < n0:
                    out[bx + ty + k, by + c + j] = tile[c + j, ty + k]


# --- timing -------------------------------------------------------------------------------------


def time_ms(launch, sets: int, reps: int = REPS) -> float:
    """Median ms of ``launch(k)`` over reps, rotating k over the input sets (CUDA events)."""
    for k in range(sets):
        launch(k)
    kj.synchronize()
    times = []
    start, end = kj.Event(), kj.Event()
    for r in range(reps):
        k = r % sets
        start.record()
        launch(k)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def tbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e12


# --- the three problems ------------------------------------------------------------------------


def bench_saxpy(n: int, rows: list, peers: dict):
    rng = np.random.default_rng()
    hx = [rng.standard_normal(n, dtype=np.float32) for _ in range(SETS)]
    hy = [rng.standard_normal(n, dtype=np.float32) for _ in range(SETS)]
    a = np.float32(rng.uniform(0.5, 2.0))
    xs = [kj.to_device(v) for v in hx]
    ys = [kj.to_device(v) for v in hy]
    outs = [kj.to_device(np.full(n, np.nan, np.float32)) for _ in range(SETS)]
    nbytes = 12 * n
    block = 256
    n32 = np.int32(n)

    def check(out_host, k):
        ref = a * hx[k] + hy[k]
        if not np.allclose(out_host, ref, rtol=1e-5, atol=1e-5):
            raise AssertionError("saxpy result wrong")

    grid1 = (n + block - 1) // block
    saxpy[grid1, block](outs[0], xs[0], ys[0], a, n32)
    check(outs[0].copy_to_host(), 0)
    ms = time_ms(lambda k: saxpy[grid1, block](outs[k], xs[k], ys[k], a, n32), SETS)
    rows.append(("saxpy", "kaiojit", ms, tbps(nbytes, ms)))

    outs[0] = kj.to_device(np.full(n, np.nan, np.float32))
    saxpy_own_entry[grid1, block](outs[0], xs[0], ys[0], a, n32)
    check(outs[0].copy_to_host(), 0)
    ms = time_ms(lambda k: saxpy_own_entry[grid1, block](outs[k], xs[k], ys[k], a, n32), SETS)
    rows.append(("saxpy", "kaiojit (coarsen=False: own entry, prefetches)", ms, tbps(nbytes, ms)))

    outs[0] = kj.to_device(np.full(n, np.nan, np.float32))
    saxpy_no_prefetch[grid1, block](outs[0], xs[0], ys[0], a, n32)
    check(outs[0].copy_to_host(), 0)
    ms = time_ms(lambda k: saxpy_no_prefetch[grid1, block](outs[k], xs[k], ys[k], a, n32), SETS)
    rows.append(("saxpy", "kaiojit (coarsen=False, prefetch=False)", ms, tbps(nbytes, ms)))

    outs[0] = kj.to_device(np.full(n, np.nan, np.float32))
    gridv = (n // 4 + block - 1) // block
    saxpy_vec4[gridv, block](outs[0], xs[0], ys[0], a, n32)
    check(outs[0].copy_to_host(), 0)
    ms = time_ms(lambda k: saxpy_vec4[gridv, block](outs[k], xs[k], ys[k], a, n32), SETS)
    rows.append(("saxpy", "kaiojit (vec4, 128-bit)", ms, tbps(nbytes, ms)))

    grid4 = (n + block * UNROLL - 1) // (block * UNROLL)
    outs[1] = kj.to_device(np.full(n, np.nan, np.float32))
    saxpy_unrolled[grid4, block](outs[1], xs[1], ys[1], a, n32)
    check(outs[1].copy_to_host(), 1)
    ms = time_ms(lambda k: saxpy_unrolled[grid4, block](outs[k], xs[k], ys[k], a, n32), SETS)
    rows.append(("saxpy", "kaiojit (4/thread)", ms, tbps(nbytes, ms)))

    if "torch" in peers:
        torch = peers["torch"]
        tx = [torch.from_numpy(v).cuda() for v in hx]
        ty = [torch.from_numpy(v).cuda() for v in hy]
        tout = [torch.empty_like(v) for v in tx]
        af = float(a)
        torch.add(ty[0], tx[0], alpha=af, out=tout[0])
        check(tout[0].cpu().numpy(), 0)
        ms = time_ms(lambda k: torch.add(ty[k], tx[k], alpha=af, out=tout[k]), SETS)
        rows.append(("saxpy", "torch", ms, tbps(nbytes, ms)))
        if "triton" in peers:
            tri = peers["triton"]
            tri.saxpy(tout[1], tx[1], ty[1], af, n)
            check(tout[1].cpu().numpy(), 1)
            ms = time_ms(lambda k: tri.saxpy(tout[k], tx[k], ty[k], af, n), SETS)
            rows.append(("saxpy", "triton", ms, tbps(nbytes, ms)))
    if "cupy" in peers:
        cp = peers["cupy"]
        kern = cp.RawKernel(r'''
        extern "C" __global__ void saxpy(float* out, const float* x, const float* y, float a,
                                         int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = a * x[i] + y[i];
        }''', "saxpy")
        cx = [cp.asarray(v) for v in hx]
        cy = [cp.asarray(v) for v in hy]
        cout = [cp.empty_like(v) for v in cx]
        kern((grid1,), (block,), (cout[0], cx[0], cy[0], a, n32))
        check(cp.asnumpy(cout[0]), 0)
        ms = time_ms(lambda k: kern((grid1,), (block,), (cout[k], cx[k], cy[k], a, n32)), SETS)
        rows.append(("saxpy", "cupy RawKernel", ms, tbps(nbytes, ms)))


def bench_sum(n: int, rows: list, peers: dict):
    rng = np.random.default_rng()
    hx = [rng.standard_normal(n, dtype=np.float32) for _ in range(SETS)]
    xs = [kj.to_device(v) for v in hx]
    outs = [kj.to_device(np.zeros(1, np.float32)) for _ in range(SETS)]
    nbytes = 4 * n
    sms = 132
    block = 256
    grid = sms * 8
    n64 = np.int64(n)

    def check(value, k):
        ref = hx[k].sum(dtype=np.float64)
        if not abs(value - ref) <= 1e-3 * math.sqrt(n) + 1e-5 * abs(ref):
            raise AssertionError(f"sum wrong: {value} vs {ref}")

    block_sum[grid, block](outs[0], xs[0], n64)
    check(float(outs[0].copy_to_host()[0]), 0)

    ms = time_ms(lambda k: block_sum[grid, block](outs[k], xs[k], n64), SETS)
    rows.append(("sum", "kaiojit", ms, tbps(nbytes, ms)))
    if "torch" in peers:
        torch = peers["torch"]
        tx = [torch.from_numpy(v).cuda() for v in hx]
        check(float(tx[0].sum().item()), 0)
        ms = time_ms(lambda k: tx[k].sum(), SETS)
        rows.append(("sum", "torch", ms, tbps(nbytes, ms)))
        if "triton" in peers:
            tri = peers["triton"]
            tout = [torch.zeros(1, device="cuda") for _ in range(SETS)]
            tri.total(tout[0], tx[0], n)
            check(float(tout[0].item()), 0)
            ms = time_ms(lambda k: tri.total(tout[k], tx[k], n), SETS)
            rows.append(("sum", "triton", ms, tbps(nbytes, ms)))
    if "cupy" in peers:
        cp = peers["cupy"]
        cx = [cp.asarray(v) for v in hx]
        check(float(cx[0].sum()), 0)
        ms = time_ms(lambda k: cx[k].sum(), SETS)
        rows.append(("sum", "cupy", ms, tbps(nbytes, ms)))


def bench_transpose(n: int, rows: list, peers: dict):
    rng = np.random.default_rng()
    ha = [rng.standard_normal((n, n), dtype=np.float32) for _ in range(SETS)]
    As = [kj.to_device(v) for v in ha]
    outs = [kj.to_device(np.full((n, n), np.nan, np.float32)) for _ in range(SETS)]
    nbytes = 8 * n * n
    grid = ((n + TILE - 1) // TILE, (n + TILE - 1) // TILE)
    transpose[grid, (TILE, ROWS)](outs[0], As[0])
    if not np.array_equal(outs[0].copy_to_host(), ha[0].T):
        raise AssertionError("transpose wrong")
    ms = time_ms(lambda k: transpose[grid, (TILE, ROWS)](outs[k], As[k]), SETS)
    rows.append(("transpose", "kaiojit", ms, tbps(nbytes, ms)))
    grid64 = ((n + BIG - 1) // BIG, (n + BIG - 1) // BIG)
    for rows_, kern in TRANSPOSE64.items():
        outs[1] = kj.to_device(np.full((n, n), np.nan, np.float32))
        kern[grid64, (TILE, rows_)](outs[1], As[1])
        if not np.array_equal(outs[1].copy_to_host(), ha[1].T):
            raise AssertionError("transpose64 wrong")
        ms = time_ms(lambda k: kern[grid64, (TILE, rows_)](outs[k], As[k]), SETS)
        rows.append(("transpose", f"kaiojit (64x64, 32x{rows_})", ms, tbps(nbytes, ms)))
    outs[1] = kj.to_device(np.full((n, n), np.nan, np.float32))
    transpose64_pairs[grid64, (TILE, ROWS)](outs[1], As[1])
    if not np.array_equal(outs[1].copy_to_host(), ha[1].T):
        raise AssertionError("transpose64_pairs wrong")
    ms = time_ms(lambda k: transpose64_pairs[grid64, (TILE, ROWS)](outs[k], As[k]), SETS)
    rows.append(("transpose", "kaiojit (64x64, 32x8, pairs)", ms, tbps(nbytes, ms)))
    if "torch" in peers:
        torch = peers["torch"]
        ta = [torch.from_numpy(v).cuda() for v in ha]
        tout = [torch.empty_like(v) for v in ta]
        tout[0].copy_(ta[0].t())
        if not np.array_equal(tout[0].cpu().numpy(), ha[0].T):
            raise AssertionError("torch transpose wrong")
        ms = time_ms(lambda k: tout[k].copy_(ta[k].t()), SETS)
        rows.append(("transpose", "torch", ms, tbps(nbytes, ms)))
        if "triton" in peers:
            tri = peers["triton"]
            tri.transpose(tout[1], ta[1], n)
            if not np.array_equal(tout[1].cpu().numpy(), ha[1].T):
                raise AssertionError("triton transpose wrong")
            ms = time_ms(lambda k: tri.transpose(tout[k], ta[k], n), SETS)
            rows.append(("transpose", "triton", ms, tbps(nbytes, ms)))
    if "cupy" in peers:
        cp = peers["cupy"]
        ca = [cp.asarray(v) for v in ha]
        cout = [cp.empty_like(v) for v in ca]
        ms = time_ms(lambda k: cp.copyto(cout[k], ca[k].T), SETS)
        if not np.array_equal(cp.asnumpy(cout[0]), ha[0].T):
            raise AssertionError("cupy transpose wrong")
        rows.append(("transpose", "cupy", ms, tbps(nbytes, ms)))


def load_peers() -> dict:
    peers = {}
    for name in ("torch", "cupy"):
        try:
            peers[name] = __import__(name)
        except Exception:  # noqa: BLE001 - a peer that does not import is left out
            pass
    try:
        sys.path.insert(0, os.path.dirname(__file__))
        import _triton_peer
        peers["triton"] = _triton_peer
    except Exception:  # noqa: BLE001
        pass
    return peers


def numba_rows(small: bool) -> list:
    path = os.environ.get("KAIOJIT_NUMBA_PYTHONPATH")
    if not path:
        return []
    env = dict(os.environ, PYTHONPATH=path)
    script = os.path.join(os.path.dirname(__file__), "_numba_peer.py")
    args = [sys.executable, script] + (["--small"] if small else [])
    r = subprocess.run(args, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print("numba-cuda peer failed:", r.stderr[-2000:])
        return []
    return [tuple(row) for row in json.loads(r.stdout.strip().splitlines()[-1])]


def main() -> None:
    small = "--small" in sys.argv
    ptx_widths()
    if "--ptx-only" in sys.argv:
        return
    scale = 8 if small else 1
    rows: list = []
    peers = load_peers()
    bench_saxpy(SAXPY_N // scale, rows, peers)
    if "--saxpy" not in sys.argv:  # --saxpy: that problem only, without numba-cuda's rows
        bench_sum(SUM_N // scale, rows, peers)
        bench_transpose(TRANSPOSE_N // (2 if small else 1), rows, peers)
        rows += numba_rows(small)
    print(f"{'kernel':<10} {'who':<20} {'ms':>9} {'TB/s':>7}")
    for kernel in ("saxpy", "sum", "transpose"):
        for row in sorted((r for r in rows if r[0] == kernel), key=lambda r: -r[3]):
            print(f"{row[0]:<10} {row[1]:<20} {row[2]:>9.3f} {row[3]:>7.2f}")


if __name__ == "__main__":
    main()
