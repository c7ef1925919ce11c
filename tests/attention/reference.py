"""The float64 NumPy reference for attention tests: forward (output and log-sum-exp) and
backward, for one sequence of one batch, with GQA and bottom-right aligned causal masks."""

from __future__ import annotations

import numpy as np


def mask(len_q: int, len_k: int, causal: bool) -> np.ndarray:
    """(len_q, len_k) booleans: which keys each query row sees."""
    if not causal:
        return np.ones((len_q, len_k), bool)
    return np.arange(len_k)[None, :] <= np.arange(len_q)[:, None] + len_k - len_q


def forward(q, k, v, causal: bool, scale: float):
    """q (len_q, heads, d), k and v (len_k, kv_heads, d), float64: (out like q, lse (heads,
    len_q)); rows that see no key give 0 and -inf."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    s = np.einsum("qhd,khd->hqk", q, k) * scale
    s = np.where(mask(q.shape[0], k.shape[0], causal)[None], s, -np.inf)
    mx = s.max(-1, keepdims=True, initial=-np.inf)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    p = np.exp(s - safe)
    l = p.sum(-1, keepdims=True)
    out = np.einsum("hqk,khd->qhd", np.divide(p, l, out=np.zeros_like(p), where=l > 0), v)
    with np.errstate(divide="ignore"):
        lse = np.where(l > 0, safe + np.log(l), -np.inf)[..., 0]
    return out, lse


def backward(q, k, v, do, causal: bool, scale: float):
    """(dq, dk, dv) of ``forward``'s output against the upstream gradient ``do``."""
    group = q.shape[1] // k.shape[1]
    kr = np.repeat(k, group, axis=1)
    vr = np.repeat(v, group, axis=1)
    out, lse = forward(q, k, v, causal, scale)
    s = np.einsum("qhd,khd->hqk", q, kr) * scale
    m = mask(q.shape[0], k.shape[0], causal)[None]
    p = np.where(m & np.isfinite(lse)[..., None], np.exp(s - np.where(np.isfinite(lse), lse,
                                                                      0.0)[..., None]), 0.0)
    dp = np.einsum("qhd,khd->hqk", do, vr)
    dsum = np.einsum("qhd,qhd->hq", do, out)[..., None]
    ds = p * (dp - dsum)
    dq = np.einsum("hqk,khd->qhd", ds, kr) * scale
    dk = np.einsum("hqk,qhd->khd", ds, q) * scale
    dv = np.einsum("hqk,qhd->khd", p, do)
    heads_k = k.shape[1]
    dk = dk.reshape(k.shape[0], heads_k, group, -1).sum(2)
    dv = dv.reshape(v.shape[0], heads_k, group, -1).sum(2)
    return dq, dk, dv


def gradient_terms(q, k, v, do, causal: bool, scale: float):
    """What each element of (dq, dk, dv) sums, in magnitude: with P and dS = P (dP - Delta)
    of ``backward``, and Delta's own terms |dO| |O| per row (the kernel's O and the P V and
    dS products are rounded to the 16-bit type), scale (|dS| + P sum|dO O|) |K|, the same
    transposed against |Q|, and P^T |dO|. A gradient whose terms cancel is exact only to a
    few roundings of these, not of its own size."""
    group = q.shape[1] // k.shape[1]
    kr = np.abs(np.repeat(k, group, axis=1))
    vr = np.repeat(v, group, axis=1)
    out, lse = forward(q, k, v, causal, scale)
    s = np.einsum("qhd,khd->hqk", q, np.repeat(k, group, axis=1)) * scale
    m = mask(q.shape[0], k.shape[0], causal)[None]
    p = np.where(m & np.isfinite(lse)[..., None], np.exp(s - np.where(np.isfinite(lse), lse,
                                                                      0.0)[..., None]), 0.0)
    dp = np.einsum("qhd,khd->hqk", do, vr)
    dsum = np.einsum("qhd,qhd->hq", do, out)[..., None]
    spread = np.abs(p * (dp - dsum)) + p * np.einsum("qhd,qhd->hq", np.abs(do),
                                                     np.abs(out))[..., None]
    tq = np.einsum("hqk,khd->qhd", spread, kr) * scale
    tk = np.einsum("hqk,qhd->khd", spread, np.abs(q)) * scale
    tv = np.einsum("hqk,qhd->khd", p, np.abs(do))
    per_kv_head = (k.shape[0], k.shape[1], group, k.shape[2])
    return tq, tk.reshape(per_kv_head).sum(2), tv.reshape(per_kv_head).sum(2)


def torch_forward(q, k, v, causal: bool, scale: float):
    """The reference in PyTorch (float64 tensors, one sequence, (len, heads, d)), for
    autograd: the same masks and conventions as ``forward``."""
    import torch
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    seen = torch.from_numpy(mask(q.shape[0], k.shape[0], causal))
    s = s.masked_fill(~seen, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)  # rows that see no key: all -inf -> 0
    return torch.einsum("hqk,khd->qhd", p, v)
