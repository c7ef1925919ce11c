"""FlashAttention written in kaiojit: kaiojit.lib.attention's forward and backward on PyTorch
tensors, checked against PyTorch's own attention (float32 math) and its autograd.

The kernels have FlashAttention-3's structure (kaiojit/lib/attention/forward.py): a producer
warpgroup streams K and V tiles by TMA through a ring of shared buffers, two consumer
warpgroups compute S = Q K^T with wgmma, an online softmax in registers (ex2.approx), and
O += P V with P fed to wgmma from registers. They need sm_90a (an H100 or H200); elsewhere
they run on kaiojit's cpu backend, which executes the same layouts:

    python examples/attention.py                            # the GPU when there is one
    KAIOJIT_BACKEND=cpu python examples/attention.py        # anywhere (small sizes)
"""

import torch
import torch.nn.functional as F

import kaiojit as kj
from kaiojit.lib.attention import attention, attention_backward


def main(batch: int = 2, seqlen: int = 200, heads: int = 4, kv_heads: int = 2,
         head_dim: int = 64, causal: bool = True) -> dict:
    device = "cuda" if kj.backend() == "cuda" else "cpu"

    def randn(*shape):
        return torch.randn(*shape, device=device).to(torch.bfloat16)

    # (batch, seqlen, heads, head_dim), FlashAttention's layout; fewer K/V heads: GQA
    q = randn(batch, seqlen, heads, head_dim)
    k = randn(batch, seqlen, kv_heads, head_dim)
    v = randn(batch, seqlen, kv_heads, head_dim)
    out, lse = attention(q, k, v, causal=causal, return_lse=True)
    do = randn(*out.shape)
    dq, dk, dv = attention_backward(do, q, k, v, out, lse, causal=causal)

    # PyTorch's reference in float32: SDPA's layout is (batch, heads, seqlen, head_dim)
    ref = [x.float().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    group = heads // kv_heads
    want = F.scaled_dot_product_attention(ref[0], ref[1].repeat_interleave(group, 1),
                                          ref[2].repeat_interleave(group, 1), is_causal=causal)
    grads = torch.autograd.grad(want, ref, do.float().transpose(1, 2))
    errors = {}  # each as a fraction of the reference's largest element
    for name, got, g in zip(("out", "dq", "dk", "dv"), (out, dq, dk, dv),
                            (want.detach(), *grads)):
        g = g.transpose(1, 2)
        errors[name] = ((got.float() - g).abs().max() / g.abs().max()).item()
    # a few bfloat16 roundings (P, dS and the results are rounded to it)
    assert all(e < 4 * 2.0 ** -8 for e in errors.values()), errors
    print(f"attention {batch}x{seqlen}x{heads}x{head_dim} (kv heads {kv_heads}, causal "
          f"{causal}) on the {kj.backend()} backend: forward and backward match PyTorch "
          f"(max errors, relative: {', '.join(f'{n} {e:.1e}' for n, e in errors.items())})")
    return errors


if __name__ == "__main__":
    main()
