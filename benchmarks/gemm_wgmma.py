"""fp16 GEMM with kj.wgmma (sm_90a) against torch.matmul (cuBLAS): C = A @ B.T, A (M, K) and
B (N, K) float16, float32 accumulation, C float16. Prints TFLOP/s and the ratio to cuBLAS.

The kernel: a 128 x BN block tile (two warpgroups of 64 x BN each), K tiles of 64 in two
shared-memory stages laid out with the 128-byte swizzle. Tiles travel global -> registers ->
shared with ordinary 8-byte loads (A and B are passed as int64 views, four halves each): while
the wgmmas of tile k run, tile k+1 (loaded into registers one iteration earlier) is stored into
the other stage and tile k+2 is loaded into registers. No TMA, no warp specialization: a
baseline for what kaiojit's wgmma gives without them.

    PYTHONPATH=. python3 benchmarks/gemm_wgmma.py [size]        # default 8192
    KAIOJIT_BACKEND=cpu PYTHONPATH=. python3 benchmarks/gemm_wgmma.py --check   # no GPU
"""

from __future__ import annotations

import sys

import numpy as np

import kaiojit as kj

BM, KT = 128, 64          # block rows (two warpgroups of 64), K tile (one 128-byte row)
THREADS = 256
GROUP_M = 8               # block rows a group of blocks shares (L2 reuse of B)
ROW_U64 = KT // 4         # int64 words in a 128-byte row of a tile
# the input (and output) types: bf16 joins once kaiojit has kj.bfloat16 (the goal)
DTYPES = {"f16": kj.float16}
if hasattr(kj, "bfloat16"):
    DTYPES["bf16"] = kj.bfloat16


def make_gemm(bn: int, dtype: str = "f16"):
    """The kernel for a 128 x ``bn`` block tile (bn 64, 128 or 256) of ``dtype`` inputs."""
    elem = DTYPES[dtype]
    a_words = BM * ROW_U64           # one stage of A, in int64 words
    stage = a_words + bn * ROW_U64   # one stage of A and B
    regs = tuple(range(bn // 2))     # constant tuples: loops over them are unrolled, so the
    a_loads = tuple(range(a_words // THREADS))              # accumulator and the staging
    b_loads = tuple(range(bn * ROW_U64 // THREADS))         # registers stay registers
    k_steps = (0, 1, 2, 3)           # the four k16 slices of a K tile: +32 bytes each

    @kj.jit
    def gemm(c, a, b, k):
        smem = kj.shared.array(0, kj.int64)   # two stages, 1024-byte aligned
        acc = kj.local.array(bn // 2, kj.float32)
        ra = kj.local.array(len(a_loads), kj.int64)
        rb = kj.local.array(len(b_loads), kj.int64)
        t = kj.threadIdx.x
        wg = t // 128
        # blocks in groups of GROUP_M block rows, column by column: the tiles of A and B a
        # wave of blocks reads stay in L2
        tiles_m, tiles_n = c.shape[0] // BM, c.shape[1] // bn
        pid = kj.blockIdx.x
        first = pid // (GROUP_M * tiles_n) * GROUP_M
        rows = min(tiles_m - first, GROUP_M)
        m0 = (first + pid % (GROUP_M * tiles_n) % rows) * BM
        n0 = pid % (GROUP_M * tiles_n) // rows * bn
        row = t // ROW_U64                      # this thread's rows: row + 16 j
        col = t % ROW_U64                       # and its word in each (constant per thread)
        swz = col ^ ((row % 8) * 2)             # the 128B swizzle: 16-byte chunk ^= row % 8
        kw = k // 4
        for i in regs:
            acc[i] = 0.0
        for j in a_loads:                       # tile 0 into stage 0
            smem[(row + 16 * j) * ROW_U64 + swz] = a[m0 + row + 16 * j, col]
        for j in b_loads:
            smem[a_words + (row + 16 * j) * ROW_U64 + swz] = b[n0 + row + 16 * j, col]
        if ROW_U64 < kw:                        # tile 1 into registers
            for j in a_loads:
                ra[j] = a[m0 + row + 16 * j, ROW_U64 + col]
            for j in b_loads:
                rb[j] = b[n0 + row + 16 * j, ROW_U64 + col]
        kj.wgmma.fence_proxy_async()
        kj.syncthreads()
        cur = 0
        for k0 in range(0, kw, ROW_U64):
            # tile k: wgmmas on stage cur; meanwhile tile k+1 (in registers since the last
            # iteration) goes to the other stage and tile k+2 is loaded into registers
            kj.wgmma.fence()
            for kk in k_steps:
                da = kj.wgmma.descriptor(smem, cur + wg * 64 * ROW_U64 + 4 * kk, swizzle=128,
                                         stride_byte_offset=1024)
                db = kj.wgmma.descriptor(smem, cur + a_words + 4 * kk, swizzle=128,
                                         stride_byte_offset=1024)
                kj.wgmma.mma_async(acc, da, db, shape=(64, bn, 16), dtype=elem)
            kj.wgmma.commit_group()
            nxt = stage - cur
            if k0 + ROW_U64 < kw:
                for j in a_loads:
                    smem[nxt + (row + 16 * j) * ROW_U64 + swz] = ra[j]
                for j in b_loads:
                    smem[nxt + a_words + (row + 16 * j) * ROW_U64 + swz] = rb[j]
                kj.wgmma.fence_proxy_async()
                if k0 + 2 * ROW_U64 < kw:
                    for j in a_loads:
                        ra[j] = a[m0 + row + 16 * j, k0 + 2 * ROW_U64 + col]
                    for j in b_loads:
                        rb[j] = b[n0 + row + 16 * j, k0 + 2 * ROW_U64 + col]
            kj.wgmma.wait_group(0, acc)
            kj.syncthreads()
            cur = nxt
        lane = t % 32
        r0 = m0 + wg * 64 + (t % 128) // 32 * 16 + lane // 4
        c0 = n0 + 2 * (lane % 4)
        for i in regs:
            c[r0 + 8 * ((i // 2) % 2), c0 + 8 * (i // 4) + i % 2] = elem(acc[i])

    return gemm, stage * 8 * 2  # the kernel and its dynamic shared memory: two stages


_KERNELS: dict = {}


def kernel(bn: int, dtype: str = "f16"):
    if (bn, dtype) not in _KERNELS:
        _KERNELS[bn, dtype] = make_gemm(bn, dtype)
    return _KERNELS[bn, dtype]


def launch(bn: int, a_words, b_words, c, k: int, dtype: str = "f16") -> None:
    """C = A @ B.T from A and B as int64 words ((M, K/4) and (N, K/4)); C (M, N) of dtype."""
    gemm, smem = kernel(bn, dtype)
    m, n = c.shape
    assert m % BM == 0 and n % bn == 0 and k % KT == 0, (m, n, k, bn)
    gemm[(n // bn) * (m // BM), THREADS, 0, smem](c, a_words, b_words, k)


def check(bn: int, m: int, n: int, k: int) -> float:
    """The kernel against NumPy on fresh inputs (C poisoned first); the largest error as a
    fraction of the tolerance."""
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = kj.to_device(np.full((m, n), np.nan, np.float16))
    launch(bn, kj.to_device(a.view(np.int64)), kj.to_device(b.view(np.int64)), c, k)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    got = c.copy_to_host().astype(np.float64)
    # float16 rounding of C, and float32 sums in an order PTX leaves open
    tol = 2 ** -10 * np.abs(want) + 1e-5 * k
    ratio = float(np.max(np.abs(got - want) / tol))
    assert np.all(np.isfinite(got)) and ratio <= 1, f"bn={bn}: error {ratio:.2f}x tolerance"
    return ratio


def bench(size: int) -> None:
    try:
        import torch
    except ImportError:
        torch = None
    print(f"GEMM {size}^3, C = A @ B.T (B given N x K), fp32 accumulate, C in the input type")
    for bn in (128, 256):
        print(f"  check f16 bn={bn} at 512 x {2 * bn} x 256 against NumPy: "
              f"{check(bn, 512, 2 * bn, 256):.2f} of the tolerance")
    if torch is None or not torch.cuda.is_available():
        print("  torch with CUDA is not importable: no timing")
        return
    flops = 2.0 * size ** 3
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch_types = {"f16": torch.float16, "bf16": torch.bfloat16}
    for dtype in DTYPES:
        tt = torch_types[dtype]
        # two input sets, so L2 does not serve every iteration
        bufs = [(torch.randn(size, size, device="cuda", dtype=tt, generator=gen),
                 torch.randn(size, size, device="cuda", dtype=tt, generator=gen))
                for _ in range(2)]
        c = torch.empty(size, size, device="cuda", dtype=tt)

        def timed(fn, reps=20, bufs=bufs) -> float:
            for i in range(3):
                fn(*bufs[i % len(bufs)])
            torch.cuda.synchronize()
            times = []
            for i in range(reps):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*bufs[i % len(bufs)])
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            return float(np.median(times))

        t_torch = timed(lambda a, b, c=c: torch.matmul(a, b.T, out=c))
        print(f"  {dtype} torch.matmul (cuBLAS):      {flops / t_torch / 1e12:7.1f} TFLOP/s")
        ref = torch.matmul(bufs[0][0].float(), bufs[0][1].float().T)
        for bn in (128, 256):
            def ours(a, b, bn=bn, c=c, dtype=dtype):
                launch(bn, a.view(torch.int64), b.view(torch.int64), c, size, dtype)
            t = timed(ours)
            ours(*bufs[0])
            torch.cuda.synchronize()
            rel = float((c.float() - ref).abs().max() / ref.abs().max())
            print(f"  {dtype} kaiojit wgmma, 128x{bn} tile: {flops / t / 1e12:7.1f} TFLOP/s  "
                  f"({t_torch / t:.1%} of cuBLAS; max |diff| vs fp32 {rel:.2g} of max |C|)")
            assert rel < 2e-2, f"{dtype} bn={bn}: the result is wrong ({rel:.3g})"


if __name__ == "__main__":
    if "--check" in sys.argv:
        for bn in (128, 256):
            for k in (64, 128, 192):  # one, two and three K tiles: every pipeline branch
                print(f"bn={bn} k={k}: {check(bn, 256, 2 * bn, k):.2f} of the tolerance")
    else:
        bench(int(sys.argv[1]) if len(sys.argv) > 1 else 8192)
