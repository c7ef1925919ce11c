"""Fused attention in Triton, for benchmarks/attention.py: the algorithm of Triton's
fused-attention tutorial (FlashAttention-2's loops), written here from the algorithm; forward
and backward (a key-block kernel for dK and dV, a query-block kernel for dQ, Delta by PyTorch).

A program owns BLOCK_M query rows of one (batch, head): it keeps the running row max ``m``,
row sum ``l`` and the unnormalised output ``acc`` in registers and walks the keys BLOCK_N at a
time: ``s = q k^T`` (the softmax scale and log2(e) folded into q's multiply), ``p = exp2(s -
m_new)``, ``acc = acc * exp2(m - m_new) + p v``. Causal attention walks the tiles strictly
below the diagonal without masks, then the diagonal ones with the mask. Writes O and the
log-sum-exp (natural log, float32). Arrays are (batch, heads, seqlen, head_dim) with any
strides whose last is 1 (PyTorch's SDPA layout, or a transposed (batch, seqlen, heads, dim)).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, lo, hi, offs_m, offs_n,
          seqlen_k, qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """The keys lo .. hi (multiples of BLOCK_N) into (acc, l, m)."""
    k_ptrs += lo * stride_kn
    v_ptrs += lo * stride_vn
    for start in range(lo, hi, BLOCK_N):
        start = tl.multiple_of(start, BLOCK_N)
        cols = start + offs_n
        k = tl.load(k_ptrs, mask=cols[:, None] < seqlen_k, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] < seqlen_k)
            s = tl.where(keep, s, float("-inf"))
        else:
            s = tl.where(cols[None, :] < seqlen_k, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptrs, mask=cols[:, None] < seqlen_k, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def _forward(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, qk_scale, seqlen, heads,
             sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
             D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
    mb = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_ptrs = q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :]
    k_ptrs = k_ptr + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :]
    v_ptrs = v_ptr + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :]
    q = tl.load(q_ptrs, mask=offs_m[:, None] < seqlen, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        diag = mb * BLOCK_M
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, skn, svn, 0, diag, offs_m,
                              offs_n, seqlen, qk_scale, BLOCK_N, False)
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, skn, svn, diag,
                              diag + BLOCK_M, offs_m, offs_n, seqlen, qk_scale, BLOCK_N, True)
    else:
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, skn, svn, 0,
                              tl.cdiv(seqlen, BLOCK_N) * BLOCK_N, offs_m, offs_n, seqlen,
                              qk_scale, BLOCK_N, False)
    acc = acc / l_i[:, None]
    o_ptrs = o_ptr + b * sob + h * soh + offs_m[:, None] * som + offs_d[None, :]
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < seqlen)
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    tl.store(lse_ptr + bh * seqlen + offs_m, lse, mask=offs_m < seqlen)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k, v (batch, heads, seqlen, head_dim) (last stride 1): (out in the same layout,
    lse (batch, heads, seqlen) float32). Self-attention: seqlen_q == seqlen_k."""
    batch, heads, seqlen, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    o = torch.empty_like(q)
    lse = torch.empty((batch, heads, seqlen), device=q.device, dtype=torch.float32)
    block_m, block_n = 128, 64
    grid = (triton.cdiv(seqlen, block_m), batch * heads)
    _forward[grid](q, k, v, o, lse, scale * 1.4426950408889634, seqlen, heads,
                   *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                   D=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                   num_warps=8 if d > 64 else 4, num_stages=3)
    return o, lse


@triton.jit
def _query_rows(q_ptr, do_ptr, lse_ptr, delta_ptr, base, bh, offs_m, offs_d, sm, seqlen):
    """Rows ``offs_m`` of q and do (zeros past the end), and their lse (log2) and Delta."""
    off = base + offs_m[:, None] * sm + offs_d[None, :]
    rows = offs_m[:, None] < seqlen
    q = tl.load(q_ptr + off, mask=rows, other=0.0)
    do = tl.load(do_ptr + off, mask=rows, other=0.0)
    lse2 = tl.load(lse_ptr + bh * seqlen + offs_m, mask=offs_m < seqlen, other=0.0)
    delta = tl.load(delta_ptr + bh * seqlen + offs_m, mask=offs_m < seqlen, other=0.0)
    return q, do, lse2, delta


@triton.jit
def _dkdv(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, qk_scale, sm_scale,
          seqlen, heads, sb, sh, sm, D: tl.constexpr, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """dK and dV of BLOCK_N keys: the queries walked BLOCK_M at a time, P^T recomputed from
    the log-sum-exp (as log2), dS^T = P^T (dP^T - Delta). q, k, v, do, dk, dv share strides."""
    nb = tl.program_id(0)
    bh = tl.program_id(1)
    base = (bh // heads) * sb + (bh % heads) * sh
    offs_n = nb * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    kv_off = base + offs_n[:, None] * sm + offs_d[None, :]
    k = tl.load(k_ptr + kv_off, mask=offs_n[:, None] < seqlen, other=0.0)
    v = tl.load(v_ptr + kv_off, mask=offs_n[:, None] < seqlen, other=0.0)
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    lo = (nb * BLOCK_N) // BLOCK_M * BLOCK_M if CAUSAL else 0
    for start in range(lo, seqlen, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        q, do, lse2, delta = _query_rows(q_ptr, do_ptr, lse_ptr, delta_ptr, base, bh, offs_m,
                                         offs_d, sm, seqlen)
        st = tl.dot(k, tl.trans(q)) * qk_scale               # (BLOCK_N, BLOCK_M)
        pt = tl.math.exp2(st - lse2[None, :])
        keep = (offs_m[None, :] < seqlen) & (offs_n[:, None] < seqlen)
        if CAUSAL:
            keep = keep & (offs_n[:, None] <= offs_m[None, :])
        pt = tl.where(keep, pt, 0.0)
        dv += tl.dot(pt.to(do.dtype), do)
        dpt = tl.dot(v, tl.trans(do))
        dst = pt * (dpt - delta[None, :])
        dk += tl.dot(dst.to(q.dtype), q)
    tl.store(dk_ptr + kv_off, (dk * sm_scale).to(dk_ptr.dtype.element_ty),
             mask=offs_n[:, None] < seqlen)
    tl.store(dv_ptr + kv_off, dv.to(dv_ptr.dtype.element_ty), mask=offs_n[:, None] < seqlen)


@triton.jit
def _dq(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, qk_scale, sm_scale, seqlen,
        heads, sb, sh, sm, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        CAUSAL: tl.constexpr):
    """dQ of BLOCK_M queries: the keys walked BLOCK_N at a time, dS = P (dP - Delta)."""
    mb = tl.program_id(0)
    bh = tl.program_id(1)
    base = (bh // heads) * sb + (bh % heads) * sh
    offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q, do, lse2, delta = _query_rows(q_ptr, do_ptr, lse_ptr, delta_ptr, base, bh, offs_m,
                                     offs_d, sm, seqlen)
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    hi = tl.minimum((mb + 1) * BLOCK_M, seqlen) if CAUSAL else seqlen
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        kv_off = base + offs_n[:, None] * sm + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=offs_n[:, None] < seqlen, other=0.0)
        v = tl.load(v_ptr + kv_off, mask=offs_n[:, None] < seqlen, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        p = tl.math.exp2(s - lse2[:, None])
        keep = offs_n[None, :] < seqlen
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(dq_ptr + base + offs_m[:, None] * sm + offs_d[None, :], (dq * sm_scale).to(dq_ptr.dtype.element_ty),
             mask=offs_m[:, None] < seqlen)


def attention_backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       o: torch.Tensor, lse: torch.Tensor, causal: bool,
                       scale: float | None = None) -> tuple:
    """(dq, dk, dv) for ``attention``'s (batch, heads, seqlen, head_dim) tensors, all of one
    layout (the strides of q); lse as ``attention`` returned it."""
    batch, heads, seqlen, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    do = do.contiguous() if do.stride() != q.stride() else do
    o = o if o.stride() == q.stride() else o.contiguous()
    delta = (o.float() * do.float()).sum(-1).contiguous()         # (batch, heads, seqlen)
    lse2 = (lse * 1.4426950408889634).contiguous()
    dq, dk, dv = (torch.empty_strided(q.shape, q.stride(), dtype=q.dtype, device=q.device)
                  for _ in range(3))
    strides = q.stride()[:3]
    assert k.stride() == v.stride() == do.stride() == q.stride(), "one layout for every tensor"
    warps = 8 if d > 64 else 4
    _dkdv[(triton.cdiv(seqlen, 64), batch * heads)](
        q, k, v, do, lse2, delta, dk, dv, scale * 1.4426950408889634, scale, seqlen, heads,
        *strides, D=d, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, num_warps=warps, num_stages=2)
    _dq[(triton.cdiv(seqlen, 64), batch * heads)](
        q, k, v, do, lse2, delta, dq, scale * 1.4426950408889634, scale, seqlen, heads,
        *strides, D=d, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, num_warps=warps, num_stages=2)
    return dq, dk, dv


__all__ = ["attention", "attention_backward"]
