"""kaiojit's float32 GEMMs for benchmarks/gemm.py (the bf16 tensor-core GEMM is
examples/gemm.py):

* ``sgemm``: register-blocked SGEMM without tensor cores. A block of 256 threads computes a
  128 x 128 tile of C, each thread 8 x 8 of it (rows ``4 ty + i`` and ``64 + 4 ty + i``, columns
  likewise from ``tx``, so a warp reads shared memory in broadcast-friendly runs). K advances by
  8: the next tiles of A and B are read from global memory into registers while the current
  ones, in one of two shared buffers, feed 64 FMAs per k per thread; A is stored transposed so
  both operands read as contiguous runs of 4 (which LLVM merges into vector loads).
* ``numba_doc_matmul``: numba's documented shared-memory matmul (16 x 16 tiles, one element a
  thread), moved over by changing ``cuda.`` to ``kj.``.
"""

import kaiojit as kj

BM, BN, BK = 128, 128, 8
TM, TN = 8, 8
SGEMM_THREADS = 256
TPB = 16


@kj.jit
def sgemm(c, a, b):
    m, k = a.shape
    n = b.shape[1]
    sa = kj.shared.array((2, BK, BM), kj.float32)  # A transposed: sa[buf, kk, row]
    sb = kj.shared.array((2, BK, BN), kj.float32)
    tid = kj.int64(kj.threadIdx.x)  # 64-bit: neighbouring addresses provably consecutive
    tx = tid % 16
    ty = tid // 16
    m0 = kj.blockIdx.y * BM
    n0 = kj.blockIdx.x * BN
    # what each thread copies: 4 consecutive elements of a row of A's and of B's tile
    a_row = tid // 2
    a_col = (tid % 2) * 4
    b_row = tid // 32
    b_col = (tid % 32) * 4
    acc = kj.local.array(TM * TN, kj.float32)
    for i in kj.static_range(TM * TN):
        acc[i] = 0.0
    ra = kj.local.array(4, kj.float32)
    rb = kj.local.array(4, kj.float32)
    fa = kj.local.array(TM, kj.float32)
    fb = kj.local.array(TN, kj.float32)
    ktiles = (k + BK - 1) // BK
    for kt in range(ktiles + 1):
        if kt < ktiles:  # the next tiles into registers (zeros past the edges)
            k0 = kt * BK
            for j in kj.static_range(4):
                r = m0 + a_row
                col = k0 + a_col + j
                ra[j] = a[r, col] if r < m and col < k else kj.float32(0.0)
                r = k0 + b_row
                col = n0 + b_col + j
                rb[j] = b[r, col] if r < k and col < n else kj.float32(0.0)
        if kt > 0:  # the tiles of step kt - 1, stored in the step before
            cur = (kt - 1) % 2
            for kk in kj.static_range(BK):
                for i in kj.static_range(4):
                    fa[i] = sa[cur, kk, ty * 4 + i]
                    fa[4 + i] = sa[cur, kk, 64 + ty * 4 + i]
                    fb[i] = sb[cur, kk, tx * 4 + i]
                    fb[4 + i] = sb[cur, kk, 64 + tx * 4 + i]
                for i in kj.static_range(TM):
                    for j in kj.static_range(TN):
                        acc[i * TN + j] += fa[i] * fb[j]
        if kt < ktiles:
            nxt = kt % 2
            for j in kj.static_range(4):
                sa[nxt, a_col + j, a_row] = ra[j]
                sb[nxt, b_row, b_col + j] = rb[j]
        kj.syncthreads()
    for i in kj.static_range(TM):
        row = m0 + (i // 4) * 64 + ty * 4 + i % 4
        if row < m:
            for j in kj.static_range(TN):
                col = n0 + (j // 4) * 64 + tx * 4 + j % 4
                if col < n:
                    c[row, col] = acc[i * TN + j]


def sgemm_launch(c, a, b):
    m, n = c.shape
    sgemm[((n + BN - 1) // BN, (m + BM - 1) // BM), SGEMM_THREADS](c, a, b)


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
