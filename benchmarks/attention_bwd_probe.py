"""What the attention backward's dQ costs: the backward timed as it is, without its dQ atomics,
and without its dQ part at all (the two last give wrong dQ: timing only), beside cuDNN's SDPA
backward, on the GPU.

    PYTHONPATH=. python3 benchmarks/attention_bwd_probe.py [--seqs 4096,16384] [--dims 64,128]

Each step adds every element of a 64-query x d tile of dQ to a float32 accumulator with one
atomic each (``kaiojit/lib/attention/backward.py``): at 16K keys that is 128 atomic adds an
element. The difference between the rows says what an atomics-free dQ (a TMA reduce-add of the
tile, or FlashAttention-2's separate dQ pass) could win. Batch 8, 16 heads, bf16, non-causal;
median of ``--reps`` backward passes (CUDA events), each after a forward.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

BATCH, HEADS = 8, 16


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="4096,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--reps", type=int, default=5)
    opts = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kaiojit.lib import attention as A
    from kaiojit.lib.attention import backward as B

    kernels = B.kernels
    mode = {"dq": "atomics"}
    B.kernels = lambda cfg: kernels(dataclasses.replace(cfg, dq=mode["dq"]))

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
            row = []
            for dq in ("atomics", "gemm", "none"):
                mode["dq"] = dq
                qr, kr, vr = (x.detach().requires_grad_() for x in (q, k, v))
                out = A.attention(qr, kr, vr)

                inputs = (qr, kr, vr)
                ms = timed(lambda out=out, inputs=inputs, do=do: torch.autograd.grad(
                    out, inputs, do, retain_graph=True))
                row.append(f"{dq} {ms:8.3f} ms ({flops / ms / 1e9:6.1f} TFLOP/s)")
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
