"""The backward's dQ modes (BackwardConfig.dq, chosen by ``backward.DQ_MODE``): "reduce" (dQ
staged in shared memory and added by TMA reduce-adds) gives the dQ of "atomics" (one atomic
add an element) and the same dK and dV, bit for bit; "gemm", which benchmarks/
attention_bwd_probe.py times without the adds, leaves dQ as the accumulator was zeroed and
dK and dV untouched. One fixed-length case whose last query tile hangs over the sequence's end
(the reduce-adds' boxes cross it); "none" skips a part "gemm" keeps: the same check. Under
``gpu``, the reduce mode against autograd on larger shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kaiojit.testing import _backend

torch = pytest.importorskip("torch")
from tests.attention.test_backward import autograd_grads, check_grad


def test_dq_modes(monkeypatch):
    import kaiojit as kj
    from kaiojit.lib import attention as A
    from kaiojit.lib.attention import backward as B

    rng = np.random.default_rng()
    n = int(rng.integers(65, 128))  # two query tiles, the second partial
    q, k, v, do = (torch.from_numpy(rng.standard_normal((2, n, 1, 64)).astype(np.float32))
                   .bfloat16() for _ in range(4))
    grads = {}
    previous = kj.set_backend(_backend("cpu"))  # the session's: its kernels stay compiled
    try:
        for dq in ("atomics", "reduce", "gemm"):
            monkeypatch.setattr(B, "DQ_MODE", dq)
            qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v))
            grads[dq] = torch.autograd.grad(A.attention(qr, kr, vr), (qr, kr, vr), do)
    finally:
        kj.set_backend(previous)
    for b in range(2):  # the reduce mode's gradients against autograd's
        want = autograd_grads(*(x[b].double().numpy() for x in (q, k, v, do)), False,
                              1 / math.sqrt(64))
        for name, got, w in zip(("dq", "dk", "dv"), (g[b] for g in grads["reduce"]), want):
            check_grad(name, got, w, "bf16")
    # one key block a sequence: each dQ element gets one add, 0 + x, in either mode; the
    # boxes of sequence 0's second tile cross into sequence 1's rows and must add nothing
    assert torch.equal(grads["reduce"][0], grads["atomics"][0])
    for dq in ("reduce", "gemm"):
        assert torch.equal(grads[dq][1], grads["atomics"][1])
        assert torch.equal(grads[dq][2], grads["atomics"][2])
    assert torch.equal(grads["gemm"][0], torch.zeros_like(q))


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_reduce_mode_gpu(kj_backend, monkeypatch, d, causal):
    """The reduce mode against autograd on the GPU: packed sequences whose ends fall inside
    query tiles (the reduce-adds' boxes cross into the next sequence's rows), GQA."""
    from kaiojit.lib.attention import backward as B
    from tests.attention.test_backward import fixed_case, varlen_case

    monkeypatch.setattr(B, "DQ_MODE", "reduce")
    fixed_case(2, 1000, 1000, 4, 2, d, "bf16", causal)
    varlen_case([37, 1030, 1, 400], [50, 1029, 3, 400], 4, 1, d, "bf16", causal)
