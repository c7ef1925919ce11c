"""kaiojit.lib.attention's backward (dq, dk, dv) against PyTorch's autograd of the float64
reference, and that reference against the float64 NumPy one; fixed and packed lengths, GQA and
MQA, causal masks crossing tile edges, rows that see no key (their gradients 0, never NaN).
On the cpu backend in CI with small shapes (the forward tests' kernel configurations), the same
under ``gpu`` with torch CUDA tensors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kaiojit.lib import attention as A
from tests.attention import reference
from tests.attention.test_forward import EPS, packed, tensor

torch = pytest.importorskip("torch")
RNG = np.random.default_rng()


def autograd_grads(q64, k64, v64, do64, causal: bool, scale: float):
    """(dq, dk, dv) by PyTorch's autograd of the float64 reference, one sequence."""
    q, k, v = (torch.from_numpy(x).requires_grad_() for x in (q64, k64, v64))
    out = reference.torch_forward(q, k, v, causal, scale)
    return tuple(g.numpy() for g in torch.autograd.grad(out, (q, k, v), torch.from_numpy(do64)))


def check_grad(name: str, got, want: np.ndarray, dtype: str, terms: np.ndarray):
    """Within a few roundings of the 16-bit type (P, dS and the outputs are rounded to it) of
    the gradient's largest element, or of the terms an element sums where they are larger
    (``reference.gradient_terms``: a one-query sequence's dq can cancel to a fraction of
    its terms)."""
    got = got.double().cpu().numpy()
    assert not np.isnan(got).any(), f"{name} has NaN"
    tol = 4 * EPS[dtype] * np.maximum(max(np.abs(want).max(initial=0), 1e-3), terms)
    over = np.abs(got - want) / tol
    worst = np.unravel_index(np.argmax(over), over.shape) if over.size else ()
    assert not over.size or over[worst] <= 1, (
        f"{name}: error {abs(got[worst] - want[worst]):.3g} > {tol[worst]:.3g} at {worst}")


def grads_and_terms(q64, k64, v64, do64, causal: bool, scale: float):
    """((dq, dk, dv) by autograd, their ``reference.gradient_terms``), one sequence."""
    return (autograd_grads(q64, k64, v64, do64, causal, scale),
            reference.gradient_terms(q64, k64, v64, do64, causal, scale))


def fixed_case(batch, sq, sk, heads, kv_heads, d, dtype, causal):
    q, q64 = tensor((batch, sq, heads, d), dtype)
    k, k64 = tensor((batch, sk, kv_heads, d), dtype)
    v, v64 = tensor((batch, sk, kv_heads, d), dtype)
    do, do64 = tensor((batch, sq, heads, d), dtype)
    scale = 1 / math.sqrt(d)
    out, lse = A.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = A.attention_backward(do, q, k, v, out, lse, causal=causal)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    for b in range(batch):
        want, terms = grads_and_terms(q64[b], k64[b], v64[b], do64[b], causal, scale)
        for name, got, w, t in zip(("dq", "dk", "dv"), (dq[b], dk[b], dv[b]), want, terms):
            check_grad(name, got, w, dtype, t)


@pytest.mark.parametrize("batch, sq, sk, heads, kv_heads, d, dtype, causal", [
    (2, 100, 100, 4, 2, 128, "f16", False),     # a partial tile of keys and queries, GQA
    (1, 150, 201, 2, 2, 64, "bf16", True),      # the diagonal crossing tile edges
    (1, 131, 67, 3, 1, 64, "bf16", True),       # MQA; rows before 131 - 67 see no key
])
def test_backward(kj_backend, batch, sq, sk, heads, kv_heads, d, dtype, causal):
    fixed_case(batch, sq, sk, heads, kv_heads, d, dtype, causal)


def varlen_case(lens_q, lens_k, heads, kv_heads, d, dtype, causal):
    (cu_q, cu_k), args, ((q, q64), (k, k64), (v, v64), (do, do64)) = packed(
        lens_q, lens_k, heads, kv_heads, d, dtype)
    out, lse = A.attention_varlen(q, k, v, *args, causal=causal, return_lse=True)
    dq, dk, dv = A.attention_varlen_backward(do, q, k, v, out, lse, *args, causal=causal)
    for i in range(len(lens_q)):
        qs, ks = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        want, terms = grads_and_terms(q64[qs], k64[ks], v64[ks], do64[qs], causal,
                                      1 / math.sqrt(d))
        for name, got, w, t in zip(("dq", "dk", "dv"), (dq[qs], dk[ks], dv[ks]), want, terms):
            check_grad(name, got, w, dtype, t)


def test_varlen_backward(kj_backend):
    varlen_case([37, 130, 1, 20], [50, 129, 3, 0], 2, 1, 64, "bf16", True)


def test_reference_matches_autograd():
    """The NumPy reference's gradients are PyTorch autograd's (both float64)."""
    q, do = RNG.standard_normal((2, 37, 4, 16))
    k, v = RNG.standard_normal((2, 29, 2, 16))
    for causal in (False, True):
        want = autograd_grads(q, k, v, do, causal, 0.3)
        terms = reference.gradient_terms(q, k, v, do, causal, 0.3)
        for got, w, t in zip(reference.backward(q, k, v, do, causal, 0.3), want, terms):
            np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-12)
            assert (t >= np.abs(w) * (1 - 1e-12)).all()  # a sum is at most its terms'


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_gpu(kj_backend, d, dtype, causal):
    fixed_case(2, 1000, 1000, 4, 4, d, dtype, causal)
    fixed_case(1, 333, 517, 8, 2, d, dtype, causal)
    varlen_case([37, 1030, 1, 400], [50, 1029, 3, 400], 4, 1, d, dtype, causal)


def test_autograd(kj_backend):
    """Tensors that require grad: ``attention`` is differentiable through PyTorch's autograd,
    its gradients those of ``attention_backward``."""
    q, q64 = tensor((1, 150, 2, 64), "bf16")
    k, k64 = tensor((1, 201, 2, 64), "bf16")
    v, v64 = tensor((1, 201, 2, 64), "bf16")
    do, do64 = tensor((1, 150, 2, 64), "bf16")
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = A.attention(*leaves, causal=True)
    assert out.requires_grad
    grads = torch.autograd.grad(out, leaves, do)
    want, terms = grads_and_terms(q64[0], k64[0], v64[0], do64[0], True, 1 / math.sqrt(64))
    for name, got, w, t in zip(("dq", "dk", "dv"), grads, want, terms):
        check_grad(name, got[0], w, "bf16", t)


@pytest.mark.parametrize("which, words", [
    ("do", "do must have q's shape and type"),
    ("out", "out must have q's shape and type"),
    ("lse", r"lse must be the forward's float32 log-sum-exp of shape \(1, 2, 8\)"),
])
def test_backward_argument_errors(kj_backend, which, words):
    q, _ = tensor((1, 8, 2, 64), "bf16")
    args = {"do": q, "out": q, "lse": torch.zeros((1, 2, 8), dtype=torch.float32,
                                                  device=q.device)}
    args[which] = torch.zeros((1, 8, 2, 32), dtype=torch.float16, device=q.device) \
        if which != "lse" else torch.zeros((2, 8), dtype=torch.float32, device=q.device)
    with pytest.raises(ValueError, match=words):
        A.attention_backward(args["do"], q, q, q, args["out"], args["lse"])
