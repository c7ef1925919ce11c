"""RMSNorm, forward and backward in kaiojit kernels, as a PyTorch custom op under torch.compile.

The fused op PyTorch users write by hand: ``y = x / sqrt(mean(x**2) + eps) * w`` over each
row's last dimension, and its backward (``dx`` per row, ``dw`` summed over rows). The forward
is bandwidth-bound: one block per row reads the row once, in 128-bit loads, keeps it in
registers while the block sums its squares (warp shuffles, one barrier), and writes ``y``
(:func:`forward_plan` sizes the block for the row length). ``kaiojit.torch.op`` makes each a ``torch.library`` custom
op with its fake rule, and the backward op attaches to the forward one through
``register_autograd``. A small model using it trains for a few steps under ``torch.compile``
(``fullgraph=True``: the ops stay in the graph) and matches the same model written in plain
PyTorch, step for step. Runs on a GPU (CUDA tensors) when one is usable, else on the cpu
backend with CPU tensors.

    python examples/torch_op.py [--steps 5] [--backend inductor|aot_eager]
"""

from __future__ import annotations

import argparse
import functools
import math
from typing import Any

import torch

import kaiojit as kj
import kaiojit.torch as kjt

FULL_MASK = 0xFFFFFFFF
MAX_CHUNKS = 8  # vectors a thread keeps in registers: 32 float32 at VEC = 4
BACKWARD_BLOCK = 128  # threads per row of the backward kernels


@kj.jit(device=True)
def block_sum(partial, value):
    """The sum of ``value`` over the block's threads (a multiple of 32, at most 1024); every
    thread gets it. A butterfly of shuffles within each warp, the warps' sums through
    ``partial`` (32 float32 of shared memory), a butterfly over those: one barrier."""
    for s in (16, 8, 4, 2, 1):
        value += kj.shfl_xor_sync(FULL_MASK, value, s)
    lane = kj.threadIdx.x % 32
    if lane == 0:
        partial[kj.threadIdx.x // 32] = value
    kj.syncthreads()
    total = partial[lane] if lane < kj.blockDim.x // 32 else kj.float32(0.0)
    for s in (16, 8, 4, 2, 1):
        total += kj.shfl_xor_sync(FULL_MASK, total, s)
    return total


@kj.jit(cache=True)
def rmsnorm_forward_kernel(y, rstd, x, w, eps, n, BLOCK: kj.constexpr, CHUNKS: kj.constexpr,
                           VEC: kj.constexpr):
    """One block of ``BLOCK`` threads per row, the row read once and kept in registers:
    thread ``t`` holds ``CHUNKS`` vectors of ``VEC`` elements, vector ``c`` at ``VEC * (t + c *
    BLOCK)`` (neighbouring threads read neighbouring vectors: 128-bit coalesced loads at VEC
    = 4). ``rstd[row] = 1 / sqrt(mean(x[row]**2) + eps)``, ``y = x * rstd * w``. Needs
    ``BLOCK * CHUNKS * VEC >= n`` and ``n % VEC == 0``."""
    row = kj.blockIdx.x
    t = kj.threadIdx.x
    v = kj.local.array(CHUNKS * VEC, kj.float32)  # indexed by constants only: registers
    acc = kj.float32(0.0)
    for c in kj.static_range(CHUNKS):
        j = VEC * (t + c * BLOCK)
        if j < n:
            for k in kj.static_range(VEC):
                v[c * VEC + k] = x[row, j + k]
        else:
            for k in kj.static_range(VEC):
                v[c * VEC + k] = kj.float32(0.0)
        for k in kj.static_range(VEC):
            acc += v[c * VEC + k] * v[c * VEC + k]
    total = block_sum(kj.shared.array(32, kj.float32), acc)
    r = kj.float32(1.0) / math.sqrt(total / kj.float32(n) + kj.float32(eps))
    if t == 0:
        rstd[row] = r
    for c in kj.static_range(CHUNKS):
        j = VEC * (t + c * BLOCK)
        if j < n:
            for k in kj.static_range(VEC):
                y[row, j + k] = v[c * VEC + k] * r * w[j + k]


@kj.jit(cache=True)
def rmsnorm_forward_long_kernel(y, rstd, x, w, eps, n):
    """Rows too long for registers: one block per row, two passes over it (the second mostly
    from L2)."""
    row = kj.blockIdx.x
    t = kj.threadIdx.x
    acc = kj.float32(0.0)
    for j in range(t, n, kj.blockDim.x):
        v = x[row, j]
        acc += v * v
    total = block_sum(kj.shared.array(32, kj.float32), acc)
    r = kj.float32(1.0) / math.sqrt(total / kj.float32(n) + kj.float32(eps))
    if t == 0:
        rstd[row] = r
    for j in range(t, n, kj.blockDim.x):
        y[row, j] = x[row, j] * r * w[j]


@kj.jit(cache=True)
def rmsnorm_dx_kernel(dx, dy, x, w, rstd, n):
    """One block per row: ``dx = r * w * dy - r**3 * x * sum(w * dy * x) / n``."""
    row = kj.blockIdx.x
    t = kj.threadIdx.x
    acc = kj.float32(0.0)
    for j in range(t, n, kj.blockDim.x):
        acc += w[j] * dy[row, j] * x[row, j]
    r = rstd[row]
    c = r * r * r * block_sum(kj.shared.array(32, kj.float32), acc) / kj.float32(n)
    for j in range(t, n, kj.blockDim.x):
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


@functools.cache
def forward_plan(n: int) -> tuple[Any, int, tuple[int, ...]]:
    """How the forward runs a row of ``n`` elements: ``(kernel, block, constants)``, chosen
    once per row length. In registers where the row fits ``MAX_CHUNKS`` vectors a thread:
    vectors of 4 (2, 1) where ``n`` is a multiple, about 4 vectors a thread, the block a power
    of two from 32 to 1024 threads (``n = 4096``: 256 threads of 4 float4); else the two-pass
    kernel with 1024 threads."""
    vec = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
    vectors = -(-n // vec)
    block = min(1024, max(32, 1 << max(0, (-(-vectors // 4) - 1).bit_length())))
    chunks = -(-vectors // block)
    if chunks > MAX_CHUNKS:
        return rmsnorm_forward_long_kernel, 1024, ()
    return rmsnorm_forward_kernel, block, (block, chunks, vec)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a C-contiguous (rows, n) float32 matrix (``x`` itself when it is one)."""
    if x.dtype != torch.float32:
        raise TypeError(f"rmsnorm takes float32 tensors, got {x.dtype}")
    if x.dim() == 2 and x.is_contiguous():
        return x
    return x.contiguous().view(-1, x.shape[-1])


def _fake_forward(x: torch.Tensor, w: torch.Tensor, eps: float):
    return x.new_empty(x.shape), x.new_empty(x.numel() // x.shape[-1])


@kjt.op("kaiojit_examples::rmsnorm_backward", mutates_args=(),
        fake=lambda dy, x, w, rstd: (x.new_empty(x.shape), w.new_empty(w.shape)))
def rmsnorm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx, dw)`` of :func:`rmsnorm` for the output gradient ``dy``."""
    x2, dy2 = _rows(x), _rows(dy)
    rows, n = x2.shape
    dx = torch.empty_like(x2)
    dw = w.new_empty(w.shape)
    rmsnorm_dx_kernel[rows, BACKWARD_BLOCK](dx, dy2, x2, w.contiguous(), rstd, n)
    rmsnorm_dw_kernel[(n + BACKWARD_BLOCK - 1) // BACKWARD_BLOCK, BACKWARD_BLOCK](
        dw, dy2, x2, rstd, rows, n)
    return (dx if x2 is x else dx.view(x.shape)), dw


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
    y = torch.empty_like(x2)
    rstd = x2.new_empty(rows)
    kernel, block, constants = forward_plan(n)
    kernel[rows, block](y, rstd, x2, w.contiguous(), eps, n, *constants)
    return (y if x2 is x else y.view(x.shape)), rstd


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
