"""RMSNorm, forward and backward in kaiojit kernels, as a PyTorch custom op under torch.compile.

The fused op PyTorch users write by hand: ``y = x / sqrt(mean(x**2) + eps) * w`` over each
row's last dimension, one block per row reducing in shared memory, and its backward (``dx``
per row, ``dw`` summed over rows). ``kaiojit.torch.op`` makes each a ``torch.library`` custom
op with its fake rule, and the backward op attaches to the forward one through
``register_autograd``. A small model using it trains for a few steps under ``torch.compile``
(``fullgraph=True``: the ops stay in the graph) and matches the same model written in plain
PyTorch, step for step. Runs on a GPU (CUDA tensors) when one is usable, else on the cpu
backend with CPU tensors.

    python examples/torch_op.py [--steps 5] [--backend inductor|aot_eager]
"""

from __future__ import annotations

import argparse
import math

import torch

import kaiojit as kj
import kaiojit.torch as kjt

BLOCK = 128  # threads per row; a power of two (the tree reduction halves it)


@kj.jit(device=True)
def block_sum(partial, t, value):
    """The sum of ``value`` over the block's threads (``t``: this thread's index), through the
    shared array ``partial`` of ``BLOCK`` elements; every thread gets it."""
    partial[t] = value
    kj.syncthreads()
    s = BLOCK // 2
    while s > 0:
        if t < s:
            partial[t] += partial[t + s]
        kj.syncthreads()
        s //= 2
    return partial[0]


@kj.jit(cache=True)
def rmsnorm_forward_kernel(y, rstd, x, w, eps, n):
    """One block per row: ``rstd[row] = 1 / sqrt(mean(x[row]**2) + eps)``, then ``y``."""
    row = kj.blockIdx.x
    t = kj.threadIdx.x
    acc = kj.float32(0.0)
    for j in range(t, n, BLOCK):
        v = x[row, j]
        acc += v * v
    total = block_sum(kj.shared.array(BLOCK, kj.float32), t, acc)
    r = kj.float32(1.0) / math.sqrt(total / kj.float32(n) + eps)
    if t == 0:
        rstd[row] = r
    for j in range(t, n, BLOCK):
        y[row, j] = x[row, j] * r * w[j]


@kj.jit(cache=True)
def rmsnorm_dx_kernel(dx, dy, x, w, rstd, n):
    """One block per row: ``dx = r * w * dy - r**3 * x * sum(w * dy * x) / n``."""
    row = kj.blockIdx.x
    t = kj.threadIdx.x
    acc = kj.float32(0.0)
    for j in range(t, n, BLOCK):
        acc += w[j] * dy[row, j] * x[row, j]
    r = rstd[row]
    c = r * r * r * block_sum(kj.shared.array(BLOCK, kj.float32), t, acc) / kj.float32(n)
    for j in range(t, n, BLOCK):
        dx[row, j] = r * w[j] * dy[row, j] - c * x[row, j]


@kj.jit(cache=True)
def rmsnorm_dw_kernel(dw, dy, x, rstd, rows, n):
    """One thread per column: ``dw[j] = sum over rows of dy * x * rstd``."""
    j = kj.grid(1)
    if j < n:
        acc = kj.float32(0.0)
        for row in range(rows):
            acc += dy[row, j] * x[row, j] * rstd[row]
        dw[j] = acc


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a C-contiguous (rows, n) float32 matrix."""
    if x.dtype != torch.float32:
        raise TypeError(f"rmsnorm takes float32 tensors, got {x.dtype}")
    return x.contiguous().view(-1, x.shape[-1])


def _fake_forward(x: torch.Tensor, w: torch.Tensor, eps: float):
    return torch.empty_like(x), x.new_empty(x.numel() // x.shape[-1])


@kjt.op("kaiojit_examples::rmsnorm_backward", mutates_args=(),
        fake=lambda dy, x, w, rstd: (torch.empty_like(x), torch.empty_like(w)))
def rmsnorm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx, dw)`` of :func:`rmsnorm` for the output gradient ``dy``."""
    x2, dy2 = _rows(x), _rows(dy)
    rows, n = x2.shape
    dx = torch.empty_like(x)
    dw = torch.empty_like(w)
    rmsnorm_dx_kernel[rows, BLOCK](dx.view(rows, n), dy2, x2, w.contiguous(), rstd, n)
    rmsnorm_dw_kernel[(n + BLOCK - 1) // BLOCK, BLOCK](dw, dy2, x2, rstd, rows, n)
    return dx, dw


def _setup_context(ctx, inputs, output) -> None:
    x, w, _ = inputs
    ctx.save_for_backward(x, w, output[1])
    ctx.mark_non_differentiable(output[1])


def _backward(ctx, dy, _drstd):
    x, w, rstd = ctx.saved_tensors
    dx, dw = rmsnorm_backward(dy, x, w, rstd)
    return dx, dw, None


@kjt.op("kaiojit_examples::rmsnorm", mutates_args=(), fake=_fake_forward,
        backward=_backward, setup_context=_setup_context)
def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y, rstd)``: RMSNorm of ``x`` over its last dimension, scaled by ``w``, and each
    row's ``1 / sqrt(mean(x**2) + eps)`` (kept for the backward)."""
    x2 = _rows(x)
    rows, n = x2.shape
    y = torch.empty_like(x)
    rstd = x.new_empty(rows)
    rmsnorm_forward_kernel[rows, BLOCK](y.view(rows, n), rstd, x2, w.contiguous(), eps, n)
    return y, rstd


class RMSNorm(torch.nn.Module):
    """``torch.nn.RMSNorm`` through the kaiojit op."""

    def __init__(self, n: int, eps: float = 1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm(x, self.weight, self.eps)[0]


def model(norm: torch.nn.Module, width: int = 64) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(16, width), norm, torch.nn.GELU(),
                               torch.nn.Linear(width, 1))


def train(steps: int, backend: str, device: str, seed: int = 0) -> tuple[list, list]:
    """Losses of the kaiojit model (compiled) and of the same model in plain PyTorch."""
    torch.manual_seed(seed)
    ours = model(RMSNorm(64)).to(device)
    reference = model(torch.nn.RMSNorm(64, eps=1e-6)).to(device)
    reference.load_state_dict(ours.state_dict())
    with torch.no_grad():  # a weight that is not all ones, so dw matters from the first step
        for m in (ours, reference):
            m[1].weight.copy_(torch.linspace(0.5, 1.5, 64))
    compiled = torch.compile(ours, backend=backend, fullgraph=True)
    x = torch.randn(256, 16, device=device)
    target = torch.sin(x.sum(dim=1, keepdim=True))
    losses: tuple[list, list] = ([], [])
    for net, run, out in ((ours, compiled, losses[0]), (reference, reference, losses[1])):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(run(x), target)
            loss.backward()
            opt.step()
            out.append(loss.item())
    return losses


def main(argv: list[str] | None = None) -> tuple[list, list]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    args = parser.parse_args(argv)
    device = "cuda" if kj.backend() == "cuda" else "cpu"
    ours, reference = train(args.steps, args.backend, device)
    for step, (a, b) in enumerate(zip(ours, reference)):
        print(f"step {step}: loss {a:.6f} (kaiojit RMSNorm, compiled)  {b:.6f} (torch.nn)")
    worst = max(abs(a - b) for a, b in zip(ours, reference))
    assert worst < 1e-4, f"the kaiojit model's losses differ from PyTorch's by {worst}"
    print(f"{args.steps} steps on the {kj.backend()} backend under torch.compile(backend="
          f"{args.backend!r}, fullgraph=True); largest loss difference {worst:.2e}")
    return ours, reference


if __name__ == "__main__":
    main()
