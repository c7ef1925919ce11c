"""A bfloat16 GEMM on tensor cores, written in kaiojit: ``C = A @ B`` with A (M x K) and B
(K x N) row-major bfloat16, float32 accumulation, C float32 or bfloat16.

Each block computes a 128 x 128 tile of C with 8 warps (2 x 4, each 64 x 32: 4 x 4 ``mma``
tiles of 16 x 8). Tiles of A (128 x 32) and B (32 x 128) go from global to shared memory with
``kj.cp_async`` in a pipeline of ``STAGES`` buffers, so loads of the next tiles overlap the
math of the current one; ``kj.ldmatrix`` reads the fragments from shared memory, whose rows are
padded by 16 bytes so that the 8 rows one ldmatrix reads fall in 8 different bank groups.
Edges: rows and columns past M, N or K are zero-filled (``src_size`` of ``kj.cp_async``); when K
or N is not a multiple of 8 (a row would not start 16-byte aligned) the tiles are loaded element
by element instead. Runs on a GPU when one is usable, else (slowly, a small size) on the cpu
backend.
"""

import numpy as np

import kaiojit as kj


class GemmConfig:
    """A tile configuration: the block's tile of C (bm x bn), the K step, one warp's tile of C
    (wm x wn: (wm / 16) x (wn / 8) mma tiles) and the pipeline's depth."""

    def __init__(self, bm=128, bn=128, bk=32, wm=64, wn=32, stages=4, max_registers=None):
        assert bm % wm == 0 and bn % wn == 0 and wm % 16 == 0 and wn % 16 == 0 and bk % 16 == 0
        self.bm, self.bn, self.bk, self.wm, self.wn, self.stages = bm, bn, bk, wm, wn, stages
        self.max_registers = max_registers
        self.threads = 32 * (bm // wm) * (bn // wn)
        self.a_ld = bk + 8  # shared rows padded by 16 bytes: no ldmatrix bank conflicts
        self.b_ld = bn + 8
        self.shared_bytes = stages * (bm * self.a_ld + bk * self.b_ld) * 2

    def __str__(self) -> str:
        cap = f", <={self.max_registers} regs" if self.max_registers else ""
        return (f"{self.bm}x{self.bn}x{self.bk}, {self.threads // 32} warps of {self.wm}x{self.wn}"
                f", {self.stages} stages{cap}")


def make_gemm(cfg: GemmConfig):
    """The GEMM kernel for one configuration (its numbers are constants of the kernel)."""
    BM, BN, BK, WM, WN, STAGES = cfg.bm, cfg.bn, cfg.bk, cfg.wm, cfg.wn, cfg.stages
    MI, NI = WM // 16, WN // 8
    WARPS_N = BN // WN
    THREADS = cfg.threads
    A_LD, B_LD = cfg.a_ld, cfg.b_ld
    A_STAGE = BM * A_LD
    B_STAGE = BK * B_LD
    A_CHUNKS = BM * BK // 8  # 16-byte chunks of a tile
    B_CHUNKS = BK * BN // 8

    @kj.jit(device=True)
    def load_chunk(s, s_base, ld, src, r0, c0, c, per_row, aligned):
        """Chunk ``c`` (8 elements) of the tile of ``src`` at (r0, c0), ``per_row`` chunks a
        row, into shared ``s`` from ``s_base`` with rows ``ld`` apart: by cp.async, zero-filled
        past the edges, or element by element when rows do not start 16-byte aligned. The
        indices are never negative; as unsigned numbers they skip the wraparound of negative
        indices, which indices built from a device function's parameters otherwise get (about
        20 fewer instructions a K step)."""
        rows, cols = src.shape
        row = c // per_row
        col = (c % per_row) * 8
        gr = r0 + row
        gc = c0 + col
        dst = kj.uint64(s_base + row * ld + col)
        if aligned:
            valid = min(max(cols - gc, 0), 8) if gr < rows else 0
            src_r = gr if valid > 0 else 0  # nothing is read at a zero src_size, but the
            src_c = gc if valid > 0 else 0  # address stays inside the array all the same
            kj.cp_async(s, dst, src, (kj.uint64(src_r), kj.uint64(src_c)), 16, valid * 2)
        else:
            for e in range(8):
                v = src[gr, gc + e] if gr < rows and gc + e < cols else kj.bfloat16(0)
                s[s_base + row * ld + col + e] = v

    @kj.jit(device=True)
    def load_tiles(sa, sb, a, b, stage, k0, m0, n0, aligned):
        """Tiles A[m0:m0+BM, k0:k0+BK] and B[k0:k0+BK, n0:n0+BN] into shared buffer ``stage``."""
        tid = kj.threadIdx.x
        for i in kj.static_range((A_CHUNKS + THREADS - 1) // THREADS):
            if A_CHUNKS % THREADS == 0 or tid + i * THREADS < A_CHUNKS:
                load_chunk(sa, stage * A_STAGE, A_LD, a, m0, k0, tid + i * THREADS, BK // 8,
                           aligned)
        for i in kj.static_range((B_CHUNKS + THREADS - 1) // THREADS):
            if B_CHUNKS % THREADS == 0 or tid + i * THREADS < B_CHUNKS:
                load_chunk(sb, stage * B_STAGE, B_LD, b, k0, n0, tid + i * THREADS, BN // 8,
                           aligned)

    @kj.jit(max_registers=cfg.max_registers)
    def gemm_bf16(c, a, b):
        m, k = a.shape
        n = b.shape[1]
        smem = kj.shared.array(0, kj.bfloat16)
        sa = smem[:STAGES * A_STAGE]
        sb = smem[STAGES * A_STAGE:]
        lane = kj.threadIdx.x % 32
        warp = kj.threadIdx.x // 32
        wm = (warp // WARPS_N) * WM
        wn = (warp % WARPS_N) * WN
        m0 = kj.blockIdx.y * BM
        n0 = kj.blockIdx.x * BN
        aligned = k % 8 == 0 and n % 8 == 0
        acc = kj.local.array(MI * NI * 4, kj.float32)
        for i in kj.static_range(MI * NI * 4):
            acc[i] = 0.0
        af = kj.local.array((MI, 8), kj.bfloat16)
        bf = kj.local.array((NI, 4), kj.bfloat16)
        ktiles = (k + BK - 1) // BK
        # iteration it loads tile it and computes tile it - (STAGES - 1): the first STAGES - 1
        # iterations only load (one call of load_tiles, which LLVM then inlines)
        for it in range(ktiles + STAGES - 1):
            kt = it - (STAGES - 1)
            if kt >= 0:
                kj.cp_async_wait(STAGES - 2)  # tile kt has landed (this thread's copies) ...
                kj.syncthreads()  # ... and everyone's; everyone is done with tile kt - 1's buffer
            if it < ktiles:
                load_tiles(sa, sb, a, b, it % STAGES, it * BK, m0, n0, aligned)
            kj.cp_async_commit()
            if kt < 0:
                continue
            a_base = (kt % STAGES) * A_STAGE
            b_base = (kt % STAGES) * B_STAGE
            for kk in kj.static_range(0, BK, 16):
                for mi in kj.static_range(MI):  # x4: lane l gives row l % 16, column 8 * (l // 16)
                    r = wm + mi * 16 + lane % 16
                    f = kj.ldmatrix(sa, a_base + r * A_LD + kk + (lane // 16) * 8)
                    for e in kj.static_range(8):
                        af[mi, e] = f[e]
                for nj in kj.static_range(NI // 2):  # x4.trans over k16 x n16: two n8 fragments
                    r = kk + (lane // 8 % 2) * 8 + lane % 8
                    col = wn + nj * 16 + (lane // 16) * 8
                    f = kj.ldmatrix(sb, b_base + r * B_LD + col, 4, True)
                    for e in kj.static_range(4):
                        bf[2 * nj, e] = f[e]
                        bf[2 * nj + 1, e] = f[4 + e]
                for mi in kj.static_range(MI):
                    for ni in kj.static_range(NI):
                        x = (mi * NI + ni) * 4
                        d = kj.mma((af[mi, 0], af[mi, 1], af[mi, 2], af[mi, 3],
                                    af[mi, 4], af[mi, 5], af[mi, 6], af[mi, 7]),
                                   (bf[ni, 0], bf[ni, 1], bf[ni, 2], bf[ni, 3]),
                                   (acc[x], acc[x + 1], acc[x + 2], acc[x + 3]))
                        acc[x] = d[0]
                        acc[x + 1] = d[1]
                        acc[x + 2] = d[2]
                        acc[x + 3] = d[3]
        kj.cp_async_wait(0)
        g = lane // 4
        t = lane % 4
        for mi in kj.static_range(MI):
            for ni in kj.static_range(NI):
                x = (mi * NI + ni) * 4
                col = n0 + wn + ni * 8 + 2 * t
                for h in kj.static_range(2):
                    row = m0 + wm + mi * 16 + g + 8 * h
                    if row < m:
                        if col < n:
                            c[row, col] = acc[x + 2 * h]
                        if col + 1 < n:
                            c[row, col + 1] = acc[x + 2 * h + 1]

    return gemm_bf16


CONFIG = GemmConfig()  # 128 x 128 x 32 tiles, 8 warps of 64 x 32, 4 stages
gemm_bf16 = make_gemm(CONFIG)


def matmul(a, b, out, kernel=gemm_bf16, cfg: GemmConfig = CONFIG):
    """``out[:] = a @ b`` for device (or NumPy) arrays: bfloat16 inputs, float32 or bfloat16
    output."""
    m, n = out.shape
    grid = ((n + cfg.bn - 1) // cfg.bn, (m + cfg.bm - 1) // cfg.bm)
    kernel[grid, cfg.threads, 0, cfg.shared_bytes](out, a, b)


def main(m: int = 72, n: int = 136, k: int = 40) -> float:
    import ml_dtypes

    rng = np.random.default_rng()
    a = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    out = kj.to_device(np.full((m, n), np.nan, np.float32))
    matmul(kj.to_device(a), kj.to_device(b), out)
    got = out.copy_to_host()
    expect = a.astype(np.float32) @ b.astype(np.float32)
    err = float(np.abs(got - expect).max() / np.abs(expect).max())
    assert err < 1e-5, err
    print(f"bf16 GEMM {m}x{n}x{k} on the {kj.backend()} backend: max relative error {err:.2e}")
    return err


if __name__ == "__main__":
    main()
