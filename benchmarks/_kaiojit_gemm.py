"""kaiojit's float32 GEMMs for benchmarks/gemm.py (the bf16 tensor-core GEMM is
examples/gemm.py):

* ``make_sgemm(SgemmConfig(...))``: a register-tiled SGEMM without tensor cores. A block of 256
  threads computes a BM x 128 tile of C, each thread TM x 8 of it in four runs of 4 x 4 (rows
  ``4 ty + i`` and ``BM / 2 + 4 ty + i``, columns likewise from ``tx``), so every operand a
  thread reads from shared memory is a run of 4 floats: one ``ld.shared.v4``. K advances by
  BK: the next tiles of A and B are read from global memory into registers (as float4 when the
  block's tiles lie inside the matrices and the rows are 16-byte aligned) while the current
  ones, in one of two shared buffers, feed TM x 8 FMAs per k per thread; then the registers go
  to the other buffer, A transposed (``sa[buf, k, row]``, rows padded by 4 floats so that the
  transposing stores hit 32 different banks). One barrier per K step.
  ``warp_tiles`` arranges a warp's 32 threads as 4 x 8 (a 32 x 64 patch of C) instead of
  2 x 16 (16 x 128), so a warp reads 64 + 128 bytes of operands per k instead of 32 + 256.
* ``sgemm`` / ``sgemm_launch``: the first configuration of ``SGEMM_CONFIGS``.
* ``numba_doc_matmul``: numba's documented shared-memory matmul (16 x 16 tiles, one element a
  thread), moved over by changing ``cuda.`` to ``kj.``.
"""

import kaiojit as kj

SGEMM_THREADS = 256
TPB = 16


class SgemmConfig:
    """The block's tile of C (bm x 128), the K step bk, a thread's tile (bm / 16 x 8) and the
    arrangement of a warp's threads (``warp_tiles``: 4 x 8; else 2 x 16)."""

    def __init__(self, bm=128, bk=8, warp_tiles=True, max_registers=128):
        assert bm in (64, 128) and bk in (8, 16) and bm * bk >= 4 * SGEMM_THREADS
        self.bm, self.bn, self.bk = bm, 128, bk
        self.tm, self.tn = bm // 16, 8
        self.warp_tiles = warp_tiles
        self.max_registers = max_registers

    def __str__(self) -> str:
        warps = "warps 4x8" if self.warp_tiles else "warps 2x16"
        cap = f", <={self.max_registers} regs" if self.max_registers else ""
        return f"{self.bm}x{self.bn}x{self.bk}, {self.tm}x{self.tn} a thread, {warps}{cap}"


def make_sgemm(cfg: SgemmConfig):
    """The SGEMM kernel ``kernel(c, a, b)``: C = A @ B for float32 row-major A (M x K), B (K x N)
    and C (M x N), of any sizes; its tile sizes are constants of the kernel."""
    BM, BN, BK, TM, TN = cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn
    HM, HN = BM // 2, BN // 2        # where a thread's second run of rows / columns starts
    TM2 = TM // 2                    # rows in one run (4 or 2)
    A_LD = BM + 4                    # transposed A tile's rows, padded: no bank conflicts
    A_PER_ROW = BK // 4              # float4s in a row of A's tile
    B_PER_ROW = BN // 4
    A_LOADS = BM * BK // 4 // SGEMM_THREADS  # float4s a thread copies a step
    B_LOADS = BK * BN // 4 // SGEMM_THREADS
    WARP_TILES = cfg.warp_tiles

    @kj.jit(max_registers=cfg.max_registers)
    def sgemm(c, a, b):
        m, k = a.shape
        n = b.shape[1]
        sa = kj.shared.array((2, BK, A_LD), kj.float32)  # A transposed: sa[buf, kk, row]
        sb = kj.shared.array((2, BK, BN), kj.float32)
        tid = kj.int64(kj.threadIdx.x)  # 64-bit: neighbouring addresses provably consecutive
        if WARP_TILES:
            lane = tid % 32
            warp = tid // 32
            tx = (warp % 2) * 8 + lane % 8
            ty = (warp // 2) * 4 + lane // 8
        else:
            tx = tid % 16
            ty = tid // 16
        m0 = kj.int64(kj.blockIdx.y) * BM
        n0 = kj.int64(kj.blockIdx.x) * BN
        ktiles = (k + BK - 1) // BK
        # a block whose tiles all lie inside A, B and C runs a copy of the kernel without edge
        # checks (and so with fewer live registers); the other copy checks every element
        inside = m0 + BM <= m and n0 + BN <= n and k % BK == 0
        for edges in kj.static_range(2):
            if inside if edges == 0 else not inside:
                acc = kj.local.array(TM * TN, kj.float32)
                for i in kj.static_range(TM * TN):
                    acc[i] = 0.0
                ra = kj.local.array(4 * A_LOADS, kj.float32)
                rb = kj.local.array(4 * B_LOADS, kj.float32)
                fa = kj.local.array(TM, kj.float32)
                fb = kj.local.array(TN, kj.float32)
                for kt in range(ktiles + 1):
                    if kt < ktiles:  # the next tiles into registers (zeros past the edges)
                        k0 = kt * BK
                        for q in kj.static_range(A_LOADS):
                            f = tid + q * SGEMM_THREADS
                            r = m0 + f // A_PER_ROW
                            col = k0 + (f % A_PER_ROW) * 4
                            for j in kj.static_range(4):
                                if edges == 0:
                                    ra[q * 4 + j] = a[r, col + j]
                                else:
                                    ra[q * 4 + j] = (a[r, col + j] if r < m and col + j < k
                                                     else kj.float32(0.0))
                        for q in kj.static_range(B_LOADS):
                            f = tid + q * SGEMM_THREADS
                            r = k0 + f // B_PER_ROW
                            col = n0 + (f % B_PER_ROW) * 4
                            for j in kj.static_range(4):
                                if edges == 0:
                                    rb[q * 4 + j] = b[r, col + j]
                                else:
                                    rb[q * 4 + j] = (b[r, col + j] if r < k and col + j < n
                                                     else kj.float32(0.0))
                    if kt > 0:  # the tiles of step kt - 1, stored in the step before
                        cur = (kt - 1) % 2
                        for kk in kj.static_range(BK):
                            for i in kj.static_range(TM2):
                                fa[i] = sa[cur, kk, ty * TM2 + i]
                                fa[TM2 + i] = sa[cur, kk, HM + ty * TM2 + i]
                            for j in kj.static_range(4):
                                fb[j] = sb[cur, kk, tx * 4 + j]
                                fb[4 + j] = sb[cur, kk, HN + tx * 4 + j]
                            for i in kj.static_range(TM):
                                for j in kj.static_range(TN):
                                    acc[i * TN + j] += fa[i] * fb[j]
                    if kt < ktiles:
                        nxt = kt % 2
                        for q in kj.static_range(A_LOADS):
                            f = tid + q * SGEMM_THREADS
                            for j in kj.static_range(4):
                                sa[nxt, (f % A_PER_ROW) * 4 + j, f // A_PER_ROW] = ra[q * 4 + j]
                        for q in kj.static_range(B_LOADS):
                            f = tid + q * SGEMM_THREADS
                            for j in kj.static_range(4):
                                sb[nxt, f // B_PER_ROW, (f % B_PER_ROW) * 4 + j] = rb[q * 4 + j]
                    kj.syncthreads()
                for i in kj.static_range(TM):
                    row = m0 + (i // TM2) * HM + ty * TM2 + i % TM2
                    for j in kj.static_range(TN):
                        col = n0 + (j // 4) * HN + tx * 4 + j % 4
                        if edges == 0:
                            c[row, col] = acc[i * TN + j]
                        elif row < m and col < n:
                            c[row, col] = acc[i * TN + j]

    return sgemm


# configurations timed side by side by benchmarks/gemm.py (the first is ``sgemm``)
# (ptxas 13.0, sm_90: #0 and #1 128 registers, #2 167 (no cap: one block an SM; capped at 128
# it spills 100+ bytes), #3 121; none spills)
SGEMM_CONFIGS = [SgemmConfig(128, 8, warp_tiles=True),
                 SgemmConfig(128, 8, warp_tiles=False),
                 SgemmConfig(128, 16, warp_tiles=True, max_registers=None),
                 SgemmConfig(64, 16, warp_tiles=True)]
SGEMM_KERNELS = [make_sgemm(cfg) for cfg in SGEMM_CONFIGS]
sgemm = SGEMM_KERNELS[0]


def sgemm_launch(c, a, b, kernel=None, cfg=None):
    """C = A @ B with ``kernel`` made for ``cfg`` (default: ``sgemm``)."""
    kernel = kernel or sgemm
    cfg = cfg or SGEMM_CONFIGS[0]
    m, n = c.shape
    kernel[((n + cfg.bn - 1) // cfg.bn, (m + cfg.bm - 1) // cfg.bm), SGEMM_THREADS](c, a, b)


@kj.jit
def numba_doc_matmul(A, B, C):
    sA = kj.shared.array(shape=(TPB, TPB), dtype=kj.float32)
    sB = kj.shared.array(shape=(TPB, TPB), dtype=kj.float32)
    x, y = kj.grid(2)
    tx = kj.threadIdx.x
    ty = kj.threadIdx.y
    bpg = kj.gridDim.x  # blocks per grid
    tmp = kj.float32(0.)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        kj.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        kj.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def numba_doc_launch(c, a, b):
    n = c.shape[0]  # the documented kernel takes square matrices (blocks per grid = K tiles)
    blocks = (n + TPB - 1) // TPB
    numba_doc_matmul[(blocks, blocks), (TPB, TPB)](a, b, c)
