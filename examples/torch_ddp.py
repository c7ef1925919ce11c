"""Data-parallel training with kaiojit ops under torchrun: the RMSNorm custom ops of
``torch_op.py`` forward and backward inside ``torch.compile``, gradients all-reduced by
``torch.distributed``, against the same model in plain PyTorch trained on the whole batch.

    torchrun --nproc_per_node=2 examples/torch_ddp.py [--steps 3] [--backend inductor]

Gloo on CPU tensors (the cpu backend) where there is no GPU; NCCL, one GPU per rank, where
there is. The ranks of a node share one kaiojit cache directory (``KAIOJIT_CACHE_DIR``; the
kernels are ``cache=True``): local rank 0 compiles each kernel while the others wait at a
barrier, then they load it from the cache. A last kernel is compiled by every rank at once, to
show that concurrent writers of one cache entry leave it whole.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch_op import RMSNorm, model, rmsnorm_dw_kernel, rmsnorm_dx_kernel, rmsnorm_forward_kernel

import kaiojit as kj

KERNELS = (rmsnorm_forward_kernel, rmsnorm_dx_kernel, rmsnorm_dw_kernel)
BLOCK = 128  # threads a block of the racing kernel


@kj.jit(cache=True)
def racing_kernel(out, x, n):
    """Compiled by every rank at the same time (its cache entry written concurrently)."""
    i = kj.grid(1)
    if i < n:
        out[i] = x[i] * x[i] + 1.0


def _step(net: torch.nn.Module, run, opt, x, target, world: int) -> float:
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(run(x), target)
    loss.backward()
    if world:
        for p in net.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
    opt.step()
    return loss.item()


def _compiled_here() -> list[str]:
    """The kernels this process compiled rather than loaded from the disk cache."""
    spec = kj.runtime.get_backend().target_spec()
    return [k.__name__ for k in KERNELS for sig in k.signatures
            if not k.compile(sig, spec).timings.get("cache")]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    args = parser.parse_args(argv)
    cuda = kj.backend() == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = f"cuda:{local}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(local)
        kj.select_device(local)

    torch.manual_seed(0)
    ours = model(RMSNorm(64)).to(device)
    reference = model(torch.nn.RMSNorm(64, eps=1e-6)).to(device)
    reference.load_state_dict(ours.state_dict())
    with torch.no_grad():
        for m in (ours, reference):
            m[1].weight.copy_(torch.linspace(0.5, 1.5, 64))
    batch = torch.randn(8 * world, 16, generator=torch.Generator().manual_seed(1)).to(device)
    target = torch.sin(batch.sum(dim=1, keepdim=True))
    shard = slice(8 * rank, 8 * (rank + 1))

    compiled = torch.compile(ours, backend=args.backend, fullgraph=True)
    if local != 0:
        dist.barrier()  # local rank 0 compiles, the others then hit the cache
    torch.nn.functional.mse_loss(compiled(batch[shard]), target[shard]).backward()  # warm-up
    ours.zero_grad()
    if local == 0:
        dist.barrier()
    ours_opt = torch.optim.SGD(ours.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    losses = [_step(ours, compiled, ours_opt, batch[shard], target[shard], world)
              for _ in range(args.steps)]
    for _ in range(args.steps):  # plain PyTorch, the whole batch in one process
        _step(reference, reference, ref_opt, batch, target, 0)
    worst = max((a - b).abs().max().item()
                for a, b in zip(ours.parameters(), reference.parameters()))

    dist.barrier()  # every rank compiles the racing kernel at once
    x = torch.randn(1000, device=device)
    out = torch.full_like(x, float("nan"))
    racing_kernel[(1000 + BLOCK - 1) // BLOCK, BLOCK](out, x, 1000)
    raced_ok = bool(torch.allclose(out, x * x + 1.0))
    dist.barrier()

    report = {"rank": rank, "losses": losses, "worst": worst, "compiled": _compiled_here(),
              "raced_ok": raced_ok}
    sys.stdout.write(f"rank {rank}: {report}\n")  # one write: the ranks share a pipe
    sys.stdout.flush()
    assert worst < 1e-5, f"rank {rank}: parameters differ from PyTorch's by {worst}"
    dist.destroy_process_group()
    return report


if __name__ == "__main__":
    main()
