"""``kaiojit.lib.attention``'s functions: FlashAttention's interface over kaiojit's kernels.

* ``attention(q, k, v, causal=False, scale=None, return_lse=False)``: q ``(batch, seqlen_q,
  heads, head_dim)``, k and v ``(batch, seqlen_k, kv_heads, head_dim)``;
* ``attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...)``:
  the sequences of a batch packed one after another, q ``(total_q, heads, head_dim)``, k and v
  ``(total_k, kv_heads, head_dim)``, ``cu_seqlens_*`` int32 ``(batch + 1,)`` cumulative lengths.

Arrays are PyTorch tensors, CuPy arrays or kaiojit device arrays (on the cpu backend: kaiojit
arrays and CPU tensors), bfloat16 or float16, head_dim 64 or 128, contiguous; ``heads`` a
multiple of ``kv_heads`` (GQA; MQA is ``kv_heads == 1``). The output has q's shape, type and
kind; the log-sum-exp, when asked for, is float32 ``(heads, total_q)`` (``(batch, heads,
seqlen_q)`` for ``attention``).
"""

from __future__ import annotations

import math
from typing import Any

from . import backward as B
from .forward import ATOM, BM, BN, O_BOX, THREADS, ForwardConfig, forward_kernel

DTYPES = {"bfloat16": "bf16", "float16": "f16"}
HEAD_DIMS = (64, 128)


def _array(x: Any) -> tuple[tuple, Any] | None:
    """(shape, kaiojit array type) of a device array (a torch tensor, a CuPy array, a kaiojit
    array), None for anything else (host NumPy arrays included)."""
    import kaiojit as kj
    from kaiojit import types
    if type(x).__module__ == "numpy":
        return None
    try:
        t = kj.typeof(x)
    except (TypeError, ValueError):
        return None
    return (tuple(x.shape), t) if isinstance(t, types.ArrayType) else None


def _info(x: Any, name: str):
    found = _array(x)
    if found is None:
        raise TypeError(f"attention: {name} must be a device array (a torch tensor, a CuPy "
                        f"array or a kaiojit array), got {type(x).__qualname__}")
    shape, t = found
    if t.dtype.name not in DTYPES:
        raise TypeError(f"attention: {name} must be bfloat16 or float16, got {t.dtype.name}")
    if t.layout != "C":
        raise ValueError(f"attention: {name} must be contiguous (got layout {t.layout})")
    return shape, t.dtype.name


def _new(like: Any, shape: tuple, dtype: str) -> Any:
    """An uninitialised array of ``like``'s kind and device."""
    mod = type(like).__module__
    if mod.startswith("torch"):
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    if mod.startswith("cupy"):
        import cupy
        return cupy.empty(shape, dtype=dtype)
    import kaiojit as kj
    if dtype == "float32":
        import numpy as np
        return kj.device_array(shape, np.float32)
    return kj.device_array(shape, like.dtype)


_FILL: list = []


def _fill(x: Any, value: float) -> None:
    """Every element of ``x`` set to ``value`` (a kernel: any array kind)."""
    import kaiojit as kj
    if not _FILL:
        @kj.jit
        def fill(a, v):
            i = kj.grid(1)
            if i < a.size:
                a[i] = v
        _FILL.append(fill)
    n = math.prod(x.shape)
    if n:
        _FILL[0][-(-n // 256), 256](x.reshape(n), value)


def _rows(x: Any, rows: int) -> Any:
    """``x`` (batch, seqlen, heads, dim) viewed as (batch * seqlen, heads, dim)."""
    return x.reshape(rows, x.shape[2], x.shape[3])


_PLACEHOLDER: dict = {}


def _no_lengths() -> Any:
    """An int32 array passed as ``cu_seqlens`` to fixed-length kernels (never read)."""
    import kaiojit as kj
    backend = kj.backend()
    if backend not in _PLACEHOLDER:
        import numpy as np
        _PLACEHOLDER[backend] = kj.to_device(np.zeros(1, np.int32))
    return _PLACEHOLDER[backend]


def _check_qkv(q, k, v, packed: bool) -> tuple[tuple, tuple, str]:
    qs, qt = _info(q, "q")
    ks, kt = _info(k, "k")
    vs, vt = _info(v, "v")
    want = 3 if packed else 4
    for name, s in (("q", qs), ("k", ks), ("v", vs)):
        if len(s) != want:
            layout = "(total, heads, head_dim)" if packed else \
                "(batch, seqlen, heads, head_dim)"
            raise ValueError(f"attention: {name} must be {layout}, got shape {s}")
    if not qt == kt == vt:
        raise TypeError(f"attention: q, k and v must have one type, got {qt}, {kt} and {vt}")
    if ks != vs:
        raise ValueError(f"attention: k and v must have one shape, got {ks} and {vs}")
    d = qs[-1]
    if d not in HEAD_DIMS or ks[-1] != d:
        raise ValueError(f"attention: head_dim must be 64 or 128 and the same in q, k and v, "
                         f"got {d} and {ks[-1]}")
    if not packed and ks[0] != qs[0]:
        raise ValueError(f"attention: q and k must have one batch size, got {qs[0]} and "
                         f"{ks[0]}")
    if qs[-2] % ks[-2]:
        raise ValueError(f"attention: q's heads ({qs[-2]}) must be a multiple of k's and v's "
                         f"({ks[-2]})")
    return qs, ks, qt


def _config(d: int, dtype: str, causal: bool, varlen: bool) -> ForwardConfig:
    """The forward's configuration: the split (warp-specialized) form on a GPU, the lockstep
    form elsewhere (the cpu backend runs a block branch by branch)."""
    import kaiojit as kj

    from . import forward
    return ForwardConfig.scheduled(d, DTYPES[dtype], bool(causal), varlen,
                                   forward.SCHEDULE_BY_HEAD_DIM[d],
                                   lockstep=kj.backend() != "cuda" or forward.LOCKSTEP_ON_GPU,
                                   form=forward.FORM_BY_HEAD_DIM[d])


def _launch(cfg: ForwardConfig, o, lse, q3, k3, v3, cu_q, cu_k, seqlen_q: int, seqlen_k: int,
            group: int, scale: float, grid: tuple) -> None:
    import numpy as np

    import kaiojit as kj
    box = (BM, 1, ATOM)
    kv_box = (BN, 1, ATOM)
    maps = (kj.TensorMap.tiled(q3, box, swizzle="128B"),
            kj.TensorMap.tiled(k3, kv_box, swizzle="128B"),
            kj.TensorMap.tiled(v3, kv_box, swizzle="128B"))
    # O's map for the shared-memory epilogue; the register epilogue never reads it (Q's
    # stands in: no encoding for a fresh output)
    o_map = (kj.TensorMap.tiled(o, O_BOX, swizzle="128B") if cfg.epilogue == "smem"
             else maps[0])
    kernel = forward_kernel(cfg)
    if cfg.persistent:  # one block an SM, walking the (query block, head, sequence) items
        from . import forward
        blocks = forward.PERSISTENT_BLOCKS or kj.sm_count()
        grid = (max(min(math.prod(grid), blocks), 1),)
    kernel[grid, THREADS, 0, cfg.shared_bytes()](
        o, lse.reshape(-1), *maps, o_map, cu_q, cu_k, seqlen_q, seqlen_k, group,
        np.float32(scale * math.log2(math.e)))


def attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None,
              return_lse: bool = False) -> Any:
    """Softmax(q k^T * scale) v for (batch, seqlen, heads, head_dim) arrays (see the module's
    doc); ``scale`` defaults to 1 / sqrt(head_dim). With ``return_lse``: ``(out, lse)``.
    PyTorch tensors that require grad go through autograd (the backward is
    ``attention_backward``)."""
    if _wants_grad(q, k, v):
        out, lse = _autograd_function().apply(q, k, v, bool(causal), scale)
        return (out, lse) if return_lse else out
    qs, ks, dtype = _check_qkv(q, k, v, packed=False)
    batch, sq, heads, d = qs
    sk = ks[1]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    o = _new(q, qs, dtype)
    lse = _new(q, (batch, heads, sq), "float32")
    cfg = _config(d, dtype, causal, False)
    if batch and sq and heads and not sk:  # no key: every row is 0 with lse -inf
        _fill(o, 0.0)
        _fill(lse, -math.inf)
    elif batch and sq and heads:
        _launch(cfg, _rows(o, batch * sq), lse.reshape(batch * heads, sq),
                _rows(q, batch * sq), _rows(k, batch * sk),
                _rows(v, batch * sk), _no_lengths(), _no_lengths(), sq, sk, heads // ks[2],
                scale, (-(-sq // BM), heads, batch))
    return (o, lse) if return_lse else o


def _wants_grad(*xs: Any) -> bool:
    if not type(xs[0]).__module__.startswith("torch"):
        return False
    import torch
    return torch.is_grad_enabled() and any(x.requires_grad for x in xs)


_FUNCTION: list = []


def _autograd_function() -> Any:
    """``attention`` as a ``torch.autograd.Function`` (made on first use: torch is optional)."""
    if _FUNCTION:
        return _FUNCTION[0]
    import torch

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale):
            out, lse = attention(q.detach(), k.detach(), v.detach(), causal, scale,
                                 return_lse=True)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.causal, ctx.scale = causal, scale
            ctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(ctx, do, _dlse):
            q, k, v, out, lse = ctx.saved_tensors
            dq, dk, dv = attention_backward(do.contiguous(), q, k, v, out, lse, ctx.causal,
                                            ctx.scale)
            return dq, dk, dv, None, None

    _FUNCTION.append(Attention)
    return Attention


def attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                     max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                     scale: float | None = None, return_lse: bool = False) -> Any:
    """Attention over packed sequences (FlashAttention's varlen interface; see the module's
    doc). With ``return_lse``: ``(out, lse)``, lse float32 (heads, total_q)."""
    qs, ks, dtype = _check_qkv(q, k, v, packed=True)
    total_q, heads, d = qs
    batch = _lengths(cu_seqlens_q, cu_seqlens_k)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    o = _new(q, qs, dtype)
    lse = _new(q, (heads, total_q), "float32")
    cfg = _config(d, dtype, causal, True)
    if batch > 0 and max_seqlen_q > 0 and total_q and not ks[0]:
        _fill(o, 0.0)
        _fill(lse, -math.inf)
    elif batch > 0 and max_seqlen_q > 0 and total_q:
        _launch(cfg, o, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), 0,
                heads // ks[1], scale, (-(-int(max_seqlen_q) // BM), heads, batch))
    return (o, lse) if return_lse else o


def attention_backward(do: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                       causal: bool = False, scale: float | None = None) -> tuple:
    """(dq, dk, dv) of ``attention(q, k, v, causal, scale)`` for the upstream gradient ``do``,
    from its output and log-sum-exp (``return_lse=True``)."""
    qs, ks, dtype = _check_qkv(q, k, v, packed=False)
    batch, sq, heads, _ = qs
    _check_saved(do, out, lse, qs, dtype, (batch, heads, sq))
    sk = ks[1]
    rows_q, rows_k = batch * sq, batch * sk
    return _backward(_rows(do, rows_q), _rows(q, rows_q), _rows(k, rows_k), _rows(v, rows_k),
                     _rows(out, rows_q), lse.reshape(batch * heads, sq), qs, ks, dtype,
                     causal, scale, None, None, sq, sk, batch, sk, reshape=(q, k))


def attention_varlen_backward(do: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                              cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                              max_seqlen_k: int, causal: bool = False,
                              scale: float | None = None) -> tuple:
    """(dq, dk, dv) of ``attention_varlen``; ``lse`` as it returned it (heads, total_q)."""
    qs, ks, dtype = _check_qkv(q, k, v, packed=True)
    batch = _lengths(cu_seqlens_q, cu_seqlens_k)
    _check_saved(do, out, lse, qs, dtype, (qs[1], qs[0]))
    return _backward(do, q, k, v, out, lse, qs, ks, dtype, causal, scale, cu_seqlens_q,
                     cu_seqlens_k, 0, 0, batch, max_seqlen_k, reshape=None)


def _check_saved(do: Any, out: Any, lse: Any, qs: tuple, dtype: str, lse_shape: tuple) -> None:
    """The backward's other arguments: do and out like q, lse as the forward returned it."""
    for name, x in (("do", do), ("out", out)):
        shape, t = _info(x, name)
        if shape != qs or t != dtype:
            raise ValueError(f"attention_backward: {name} must have q's shape and type "
                             f"({qs}, {dtype}), got {shape}, {t}")
    info = _array(lse)
    if info is None or info[1].dtype.name != "float32" or info[0] != lse_shape:
        got = "not a device array" if info is None else f"{info[0]} {info[1].dtype}"
        raise ValueError(f"attention_backward: lse must be the forward's float32 log-sum-exp "
                         f"of shape {lse_shape}, got {got}")


def _backward(do, q3, k3, v3, o3, lse, qs, ks, dtype, causal, scale, cu_q, cu_k, seqlen_q,
              seqlen_k, batch, max_k, reshape) -> tuple:
    import numpy as np

    import kaiojit as kj
    d = qs[-1]
    heads, kv_heads = qs[-2], ks[-2]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    varlen = cu_q is not None
    cfg = B.BackwardConfig(d, DTYPES[dtype], bool(causal), varlen, dq=B.DQ_MODE)
    prepare, main, finish = B.kernels(cfg)
    total_q, total_k = q3.shape[0], k3.shape[0]
    dq = _new(q3, (total_q, heads, d), dtype)
    dk = _new(q3, (total_k, kv_heads, d), dtype)
    dv = _new(q3, (total_k, kv_heads, d), dtype)
    dq_acc = _new(q3, (total_q, heads, d), "float32")
    delta = _new(q3, tuple(lse.shape), "float32")
    if total_q and total_k and batch:
        warps = total_q * heads
        prepare[-(-warps * 32 // 256), 256](delta, dq_acc, do, o3, max(seqlen_q, 1), varlen)
        maps = [kj.TensorMap.tiled(x, box, swizzle="128B") for x, box in (
            (q3, (B.BM, 1, ATOM)), (k3, (B.BN, 1, ATOM)), (v3, (B.BN, 1, ATOM)),
            (do, (B.BM, 1, ATOM)))]
        # the float32 accumulator's map for the reduce-adds (other modes never read it: Q's
        # stands in, no encoding)
        maps.append(kj.TensorMap.tiled(dq_acc, (B.BM, 1, B.DQ_HALF), swizzle="128B")
                    if cfg.dq == "reduce" else maps[0])
        if cu_q is None:
            cu_q = cu_k = _no_lengths()
        main[(-(-int(max_k) // B.BN), kv_heads, batch), B.THREADS, 0, cfg.shared_bytes()](
            dq_acc, dk, dv, *maps, lse, delta, cu_q, cu_k, seqlen_q, seqlen_k,
            heads // kv_heads, np.float32(scale * math.log2(math.e)))
        n = total_q * heads * d
        finish[-(-n // 256), 256](dq.reshape(n), dq_acc.reshape(n), np.float32(scale))
    else:
        for x in (dq, dk, dv):
            _fill(x, 0.0)
    if reshape is not None:
        q, k = reshape
        return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(k.shape)
    return dq, dk, dv


def _lengths(cu_seqlens_q: Any, cu_seqlens_k: Any) -> int:
    """The batch size of cumulative-length arrays (checked: 1-d int32, one length)."""
    sizes = []
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        info = _array(cu)
        if info is None or info[1].dtype.name != "int32" or len(info[0]) != 1:
            raise TypeError(f"attention_varlen: {name} must be a 1-d int32 device array")
        sizes.append(info[0][0] - 1)
    if sizes[0] != sizes[1]:
        raise ValueError("attention_varlen: cu_seqlens_q and cu_seqlens_k must have one length")
    return sizes[0]


__all__ = ["attention", "attention_backward", "attention_varlen", "attention_varlen_backward"]
