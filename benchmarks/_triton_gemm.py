"""A standard Triton matmul (grouped program order, masked edges, ``tl.dot`` on tiles): the Triton
peer of benchmarks/gemm.py, for bfloat16 (tensor cores) and float32 (``input_precision="ieee"``:
no TF32, as an SGEMM)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
            PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * sam + rk[None, :] * sak
    pb = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0.0)
        y = tl.load(pb, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc, input_precision=PRECISION)
        pa += BK * sak
        pb += BK * sbk
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    """``c[:] = a @ b``: bfloat16 with 128 x 256 x 64 tiles, float32 (IEEE) with 128 x 128 x 32."""
    M, K = a.shape
    N = b.shape[1]
    if a.dtype == torch.float32:
        bm, bn, bk, warps, stages, precision = 128, 128, 32, 8, 3, "ieee"
    else:
        bm, bn, bk, warps, stages, precision = 128, 256, 64, 8, 3, "tf32"
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                  c.stride(0), c.stride(1), BM=bm, BN=bn, BK=bk, GROUP_M=8,
                  PRECISION=precision, num_warps=warps, num_stages=stages)
