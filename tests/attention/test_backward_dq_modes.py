"""The backward's dQ modes that benchmarks/attention_bwd_probe.py times (BackwardConfig.dq):
without the atomics or without the dQ part, dQ stays as the accumulator was zeroed and dK and
dV are the kernel's own, bit for bit (only what dQ costs is taken away)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kaiojit.testing import _backend

torch = pytest.importorskip("torch")


def test_dq_modes_change_only_dq(monkeypatch):
    import kaiojit as kj
    from kaiojit.lib import attention as A
    from kaiojit.lib.attention import backward as B

    rng = np.random.default_rng()
    n = int(rng.integers(65, 140))
    q, k, v, do = (torch.from_numpy(rng.standard_normal((1, n, 1, 64)).astype(np.float32))
                   .bfloat16() for _ in range(4))
    kernels = B.kernels
    grads = {}
    previous = kj.set_backend(_backend("cpu"))  # the session's: its kernels stay compiled
    try:
        for dq in ("atomics", "gemm"):  # "none" skips a part "gemm" keeps: the same check
            monkeypatch.setattr(B, "kernels",
                                lambda cfg, dq=dq: kernels(dataclasses.replace(cfg, dq=dq)))
            qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v))
            grads[dq] = torch.autograd.grad(A.attention(qr, kr, vr), (qr, kr, vr), do)
    finally:
        kj.set_backend(previous)
    assert grads["atomics"][0].abs().max() > 0
    for dq in ("gemm",):
        assert torch.equal(grads[dq][0], torch.zeros_like(q))
        assert torch.equal(grads[dq][1], grads["atomics"][1])
        assert torch.equal(grads[dq][2], grads["atomics"][2])
