"""A tensor-core GEMM with Hopper's warpgroup MMA (kj.wgmma), checked against NumPy.

C = A @ B.T for float16 A (M x K) and B (N x K), accumulated in float32. Each block of 128
threads (one warpgroup) computes a 64 x 128 tile of C. Per K tile of 64, the threads copy A's
and B's tiles into shared memory with ordinary loads, laid out as wgmma reads them with the
128-byte swizzle: row r of a tile is 128 bytes (64 halves of K) at byte r * 128, and inside it
the 16-byte chunk c is stored at chunk c ^ (r % 8). A descriptor points at such a tile (rows
8 apart are SBO = 1024 bytes apart); the four k16 slices of a K tile start 32 bytes apart.

Needs sm_90a (an H100 or H200); elsewhere it runs on kaiojit's cpu backend, which executes
wgmma with the same layouts: ``KAIOJIT_BACKEND=cpu python examples/wgmma_gemm.py``.
"""

import numpy as np

import kaiojit as kj

BM, BN, KT = 64, 128, 64
ACC = tuple(range(BN // 2))  # a constant tuple: the loops over it unroll (acc stays in registers)


@kj.jit(device=True)
def swizzled(r, k):
    """Index (in halves) of element (r, k) of a K-major tile with 128-byte rows, swizzled."""
    return r * KT + ((k // 8) ^ (r % 8)) * 8 + k % 8


@kj.jit
def gemm(c, a, b, m, n, k):
    sa = kj.shared.array(BM * KT, kj.float16)   # a wgmma kernel's shared arrays are
    sb = kj.shared.array(BN * KT, kj.float16)   # 1024-byte aligned: the swizzle's period
    acc = kj.local.array(BN // 2, kj.float32)   # this thread's fragment of the 64 x 128 tile
    t = kj.threadIdx.x
    m0, n0 = kj.blockIdx.y * BM, kj.blockIdx.x * BN
    for k0 in range(0, k, KT):
        for e in range(t, BM * KT, 128):        # stage A's tile (zeros past the edges)
            r, kk = e // KT, e % KT
            v = kj.float16(0)
            if m0 + r < m and k0 + kk < k:
                v = a[m0 + r, k0 + kk]
            sa[swizzled(r, kk)] = v
        for e in range(t, BN * KT, 128):        # and B's
            r, kk = e // KT, e % KT
            v = kj.float16(0)
            if n0 + r < n and k0 + kk < k:
                v = b[n0 + r, k0 + kk]
            sb[swizzled(r, kk)] = v
        kj.wgmma.fence_proxy_async()            # make the stores visible to wgmma's reads
        kj.syncthreads()
        kj.wgmma.fence()
        for s in range(KT // 16):
            da = kj.wgmma.descriptor(sa, 16 * s, swizzle=128, stride_byte_offset=1024)
            db = kj.wgmma.descriptor(sb, 16 * s, swizzle=128, stride_byte_offset=1024)
            # scale_d=0 on the very first slice: D = A·B, no need to zero the accumulator
            kj.wgmma.mma_async(acc, da, db, shape=(BM, BN, 16), scale_d=(k0 + s > 0))
        kj.wgmma.commit_group()
        kj.wgmma.wait_group(0, acc)
        kj.syncthreads()                        # the tiles are read: the next may overwrite
    # the fragment: warp w holds rows 16w..16w+15; lane l holds rows l//4 and l//4 + 8
    warp, lane = t // 32, t % 32
    for i in ACC:
        row = m0 + 16 * warp + lane // 4 + 8 * ((i // 2) % 2)
        col = n0 + 8 * (i // 4) + 2 * (lane % 4) + i % 2
        if row < m and col < n:
            c[row, col] = acc[i]


def main(m: int = 300, n: int = 200, k: int = 160) -> float:
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = kj.to_device(np.full((m, n), np.nan, np.float32))  # poisoned: every element is written
    gemm[(-(-n // BN), -(-m // BM)), 128](c, kj.to_device(a), kj.to_device(b), m, n, k)
    got = c.copy_to_host()
    want = a.astype(np.float64) @ b.astype(np.float64).T
    # products of float16 are exact in float32; only the float32 sums' order differs
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
    err = float(np.max(np.abs(got - want) / (k * np.finfo(np.float32).eps * bound)))
    assert err <= 1, f"error {err:.2f}x the bound"
    print(f"wgmma GEMM {m}x{n}x{k} on the {kj.backend()} backend: matches NumPy ({err:.3f} of the bound)")
    return err


if __name__ == "__main__":
    main()
