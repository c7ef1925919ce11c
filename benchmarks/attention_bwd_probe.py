"""What the attention backward's dQ costs: the backward timed in each of its dQ modes
(``backward.DQ_MODES``) beside cuDNN's SDPA backward, on the GPU: "atomics" (each step adds
every element of its 64-query x d tile of dQ to a float32 accumulator with one atomic: at 16K
keys 128 atomic adds an element), "reduce" (each warpgroup's 64 x 64 part staged in shared
memory and added by two TMA reduce-adds), "gemm" (the dQ GEMM without the adds) and "none"
(no dQ part); the two last give wrong dQ: timing only.

    PYTHONPATH=. python3 benchmarks/attention_bwd_probe.py [--seqs 4096,16384] [--dims 64,128]
        [--modes atomics,reduce,gemm,none]

Batch 8, 16 heads, bf16, non-causal; median of ``--reps`` backward passes (CUDA events), each
after a forward.
"""

from __future__ import annotations

import argparse
import statistics

BATCH, HEADS = 8, 16


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="4096,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--modes", default="atomics,reduce,gemm,none")
    opts = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kaiojit.lib import attention as A
    from kaiojit.lib.attention import backward as B

    modes = opts.modes.split(",")
    unknown = set(modes) - set(B.DQ_MODES)
    if unknown:
        ap.error(f"--modes: {sorted(unknown)} not among {B.DQ_MODES}")

    def timed(step) -> float:
        step()
        torch.cuda.synchronize()
        times = []
        for _ in range(opts.reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    print(f"attention backward, batch {BATCH}, {HEADS} heads, bf16, non-causal; ms "
          f"({torch.cuda.get_device_name()})")
    for s in (int(x) for x in opts.seqs.split(",")):
        for d in (int(x) for x in opts.dims.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(s + d)
            q, k, v, do = (torch.randn(BATCH, s, HEADS, d, device="cuda", dtype=torch.bfloat16,
                                       generator=gen) for _ in range(4))
            flops = 2.5 * 4 * BATCH * HEADS * s * s * d  # the backward's 5 GEMMs of 2*s*s*d
            row, dqs = [], {}
            for dq in modes:
                B.DQ_MODE = dq
                qr, kr, vr = (x.detach().requires_grad_() for x in (q, k, v))
                out = A.attention(qr, kr, vr)

                inputs = (qr, kr, vr)
                dqs[dq] = torch.autograd.grad(out, inputs, do, retain_graph=True)[0]
                ms = timed(lambda out=out, inputs=inputs, do=do: torch.autograd.grad(
                    out, inputs, do, retain_graph=True))
                row.append(f"{dq} {ms:8.3f} ms ({flops / ms / 1e9:6.1f} TFLOP/s)")
            B.DQ_MODE = "atomics"
            if "atomics" in dqs and "reduce" in dqs:  # the two correct modes agree
                a, r = dqs["atomics"].float(), dqs["reduce"].float()
                row.append(f"reduce-atomics dQ max diff {(r - a).abs().max().item():.2e} "
                           f"(of max {a.abs().max().item():.2e})")
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                ref = F.scaled_dot_product_attention(qt, kt, vt)
                dot = do.transpose(1, 2)
                inputs = (qt, kt, vt)
                ms = timed(lambda ref=ref, inputs=inputs, dot=dot: torch.autograd.grad(
                    ref, inputs, dot, retain_graph=True))
            row.append(f"cudnn {ms:8.3f} ms")
            print(f"d={d:3d} seq={s:5d}: " + " | ".join(row), flush=True)
            del q, k, v, do
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
