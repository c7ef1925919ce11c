"""kaiojit.lib.attention's forward against the float64 reference: odd lengths, lengths not a
multiple of the 128-row tiles, causal masks crossing tile edges (bottom-right aligned), GQA and
MQA, packed variable lengths, rows that see no key; the log-sum-exp checked. On the cpu backend
in CI with small shapes; the same cases under ``gpu`` with torch CUDA tensors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.lib import attention as A
from kaiojit.lib.attention import forward as F
from tests.attention import reference

torch = pytest.importorskip("torch")
RNG = np.random.default_rng()
TORCH_TYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
EPS = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def device() -> str:
    return "cuda" if kj.backend() == "cuda" else "cpu"


def tensor(shape: tuple, dtype: str):
    """Fresh random values of ``dtype`` as a torch tensor on the backend's device, and the same
    values in float64."""
    t = torch.from_numpy(RNG.standard_normal(shape).astype(np.float32)).to(TORCH_TYPES[dtype])
    return t.to(device()), t.double().numpy()


def check_out(got, want: np.ndarray, v64: np.ndarray, dtype: str):
    """O within a few roundings of the 16-bit type (P is rounded to it before P V, O after) of
    the largest |v|."""
    got = got.double().cpu().numpy()
    assert not np.isnan(got).any()
    tol = 4 * EPS[dtype] * np.abs(v64).max()
    err = np.abs(got - want).max()
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


def check_lse(got, want: np.ndarray):
    got = got.cpu().numpy().astype(np.float64)
    assert np.array_equal(np.isneginf(got), np.isneginf(want))  # rows that see no key
    fin = np.isfinite(want)
    assert np.abs(got[fin] - want[fin]).max(initial=0) <= 1e-4 * (1 + np.abs(want[fin]).max(
        initial=0))


def fixed_case(batch, sq, sk, heads, kv_heads, d, dtype, causal):
    q, q64 = tensor((batch, sq, heads, d), dtype)
    k, k64 = tensor((batch, sk, kv_heads, d), dtype)
    v, v64 = tensor((batch, sk, kv_heads, d), dtype)
    scale = 1 / math.sqrt(d) * RNG.uniform(0.5, 2)
    out, lse = A.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    assert out.shape == q.shape and out.dtype == q.dtype and lse.shape == (batch, heads, sq)
    for b in range(batch):
        want, want_lse = reference.forward(q64[b], k64[b], v64[b], causal, scale)
        check_out(out[b], want, v64, dtype)
        check_lse(lse[b], want_lse)


# (each configuration of head dim, type, causal and varlen is a kernel compiled once; the CI
# cases share three of them: tests/attention/test_backward.py uses the same)
@pytest.mark.parametrize("batch, sq, sk, heads, kv_heads, d, dtype, causal", [
    (2, 100, 100, 4, 2, 128, "f16", False),     # one partial tile, GQA
    (1, 150, 201, 2, 2, 64, "bf16", True),      # the diagonal crossing tile edges
    (1, 131, 67, 3, 1, 64, "bf16", True),       # MQA; rows before 131 - 67 see no key
])
def test_forward(kj_backend, batch, sq, sk, heads, kv_heads, d, dtype, causal):
    fixed_case(batch, sq, sk, heads, kv_heads, d, dtype, causal)


@pytest.mark.parametrize("schedule", ["pingpong", "overlap+pingpong"])
def test_schedules(kj_backend, monkeypatch, schedule):
    """The consumers' other schedules (the ping-pong between the two consumers by named
    barriers, whose every phase must complete: the cpu backend reports one that cannot; with
    FA3's intra-warpgroup overlap, P V of tile j - 1 issued behind S_j, its loop peeled: the
    overlap alone differs from it only by the barriers): the same results."""
    monkeypatch.setitem(F.SCHEDULE_BY_HEAD_DIM, 64, schedule)
    fixed_case(1, 300, 333, 2, 1, 64, "bf16", True)  # blocks of 2 and 3 key tiles
    fixed_case(1, 200, 20, 1, 1, 64, "bf16", True)   # blocks of no key tile and of one


def packed(lens_q, lens_k, heads, kv_heads, d, dtype):
    """A packed batch: (cu_q, cu_k) as NumPy, the varlen arguments after q, k, v (device
    cu_seqlens, max lengths), and q, k, v, do as (tensor, float64) pairs."""
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    args = (torch.from_numpy(cu_q).to(device()), torch.from_numpy(cu_k).to(device()),
            max(lens_q), max(lens_k))
    tensors = [tensor((cu[-1], n, d), dtype) for cu, n in ((cu_q, heads), (cu_k, kv_heads),
                                                           (cu_k, kv_heads), (cu_q, heads))]
    return (cu_q, cu_k), args, tensors


def varlen_case(lens_q, lens_k, heads, kv_heads, d, dtype, causal):
    (cu_q, cu_k), args, ((q, q64), (k, k64), (v, v64), _) = packed(lens_q, lens_k, heads,
                                                                   kv_heads, d, dtype)
    scale = 1 / math.sqrt(d)
    out, lse = A.attention_varlen(q, k, v, *args, causal=causal, return_lse=True)
    for i in range(len(lens_q)):
        qs, ks = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        want, want_lse = reference.forward(q64[qs], k64[ks], v64[ks], causal, scale)
        check_out(out[qs], want, v64, dtype)
        check_lse(lse[:, qs], want_lse)


def test_varlen(kj_backend):
    varlen_case([37, 130, 1, 20], [50, 129, 3, 0], 2, 1, 64, "bf16", True)


# every schedule with the register epilogue, and the lockstep form (no warp specialization);
# the other forms with the H100's fastest schedules and in the lockstep form
GPU_FORMS = ([(name, False, "regs") for name in F.SCHEDULES] + [("serial", True, "regs")]
             + [(name, lockstep, form) for form in F.FORMS if form != "regs" for name, lockstep
                in (("overlap", False), ("overlap+pingpong", False), ("serial", True))])


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("schedule, lockstep, form", GPU_FORMS)
def test_forward_gpu(kj_backend, monkeypatch, d, dtype, causal, schedule, lockstep, form):
    monkeypatch.setitem(F.SCHEDULE_BY_HEAD_DIM, d, schedule)
    monkeypatch.setitem(F.FORM_BY_HEAD_DIM, d, form)
    monkeypatch.setattr(F, "PERSISTENT_BLOCKS", 5)  # persistent: many items a block
    monkeypatch.setattr(F, "LOCKSTEP_ON_GPU", lockstep)
    fixed_case(2, 1000, 1000, 4, 4, d, dtype, causal)
    fixed_case(1, 333, 517, 8, 2, d, dtype, causal)
    varlen_case([37, 1030, 1, 400], [50, 1029, 3, 400], 4, 1, d, dtype, causal)


def test_kaiojit_arrays(kj_backend, monkeypatch):
    """kaiojit arrays in, a kaiojit array out (the serial schedule with the register epilogue:
    the arrays' path is the point here, and on the cpu backend it compiles fastest)."""
    monkeypatch.setitem(F.SCHEDULE_BY_HEAD_DIM, 128, "serial")
    monkeypatch.setitem(F.FORM_BY_HEAD_DIM, 128, "regs")
    q = RNG.standard_normal((1, 70, 1, 128)).astype(np.float16)
    k = RNG.standard_normal((1, 90, 1, 128)).astype(np.float16)
    v = RNG.standard_normal((1, 90, 1, 128)).astype(np.float16)
    out = A.attention(*(kj.to_device(x) for x in (q, k, v)))
    want, _ = reference.forward(*(x[0].astype(np.float64) for x in (q, k, v)), False,
                                1 / math.sqrt(128))
    got = out.copy_to_host()[0].astype(np.float64)
    assert np.abs(got - want).max() <= 4 * EPS["f16"] * np.abs(v).max()


def test_no_keys(kj_backend):
    """seqlen_k == 0: every row is 0, its lse -inf (nothing launched but a fill)."""
    q, _ = tensor((2, 5, 2, 64), "bf16")
    kv, _ = tensor((2, 0, 1, 64), "bf16")
    out, lse = A.attention(q, kv, kv, return_lse=True)
    assert out.shape == q.shape and (out == 0).all()
    assert lse.shape == (2, 2, 5) and bool(torch.isneginf(lse).all())


@pytest.mark.parametrize("make, words", [
    (lambda t: (t((1, 8, 2, 64)), t((1, 8, 2, 32)), t((1, 8, 2, 32))), "head_dim must be 64"),
    (lambda t: (t((1, 8, 3, 64)), t((1, 8, 2, 64)), t((1, 8, 2, 64))), "multiple of k's"),
    (lambda t: (t((1, 8, 2, 64)), t((1, 9, 2, 64)), t((1, 8, 2, 64))), "k and v must have one"),
    (lambda t: (t((8, 2, 64)), t((8, 2, 64)), t((8, 2, 64))), r"q must be \(batch, seqlen"),
    (lambda t: (np.zeros((1, 8, 2, 64)),) * 3, "q must be a device array"),
], ids=["head_dim", "heads", "kv_shape", "rank", "numpy"])
def test_argument_errors(kj_backend, make, words):
    def t(shape):
        return torch.zeros(shape, dtype=torch.bfloat16, device=device())
    with pytest.raises((ValueError, TypeError), match=words):
        A.attention(*make(t))
