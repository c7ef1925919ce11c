"""The attention forward's epilogue and grid forms (``forward.FORMS``) against the float64
reference: O through shared memory (stmatrix into the Q tile, TMA stores of whole 64-row
halves, 16-byte copies of a half that crosses its sequence's end), and the persistent grid (a
few blocks walking every work item). On the cpu backend with small shapes; the ``gpu`` twins
are test_forward.py's test_forward_gpu."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.lib.attention import forward as F
from kaiojit.lib.attention import interface as I
from tests.attention import reference
from tests.attention.test_forward import (
    RNG,
    check_lse,
    check_out,
    device,
    fixed_case,
    tensor,
    varlen_case,
)

torch = pytest.importorskip("torch")


def use_form(monkeypatch, form: str, schedule: str) -> None:
    for d in (64, 128):
        monkeypatch.setitem(F.FORM_BY_HEAD_DIM, d, form)
        monkeypatch.setitem(F.SCHEDULE_BY_HEAD_DIM, d, schedule)


def test_smem_epilogue(kj_backend, monkeypatch):
    """Fixed lengths of 200 rows, batch 2: block 1's first half is stored by TMA, its second
    (rows 192-199) by the 16-byte copies, which must stop at the batch's end (the next
    batch's rows follow in memory); GQA, causal."""
    use_form(monkeypatch, "smem", "serial")
    fixed_case(2, 200, 150, 2, 1, 64, "bf16", True)


@pytest.mark.parametrize("form", ["smem", "persistent"])
def test_smem_epilogue_writes_only_its_rows(kj_backend, monkeypatch, form):
    """Packed sequences in an array longer than they are, O and lse poisoned with NaN before the
    launch: every row of a sequence is right (halves inside by TMA, the 6 and 7 rows of the
    halves crossing an end by 16-byte copies), and the rows past the last sequence, which no
    block owns, keep their poison (no store runs past a sequence's end). Persistent: 2 blocks
    walk the 8 items (2 query blocks, 2 heads, 2 sequences), the O buffer and Q's barrier
    reused from one item to the next."""
    monkeypatch.setattr(F, "PERSISTENT_BLOCKS", 2)
    heads, kv_heads, d, extra = 2, 1, 128, 60
    lens_q, lens_k = [70, 135], [90, 135]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    total = int(cu_q[-1])
    q, q64 = tensor((total + extra, heads, d), "f16")
    k, k64 = tensor((cu_k[-1], kv_heads, d), "f16")
    v, v64 = tensor((cu_k[-1], kv_heads, d), "f16")
    o = torch.full(q.shape, float("nan"), dtype=q.dtype, device=device())
    lse = torch.full((heads, total + extra), float("nan"), dtype=torch.float32,
                     device=device())
    scale = 1 / math.sqrt(d) * RNG.uniform(0.5, 2)
    cfg = F.ForwardConfig.scheduled(d, "f16", False, True, "overlap",
                                    lockstep=kj.backend() != "cuda", form=form)
    I._launch(cfg, o, lse, q, k, v, torch.from_numpy(cu_q).to(device()),
              torch.from_numpy(cu_k).to(device()), max(lens_q), 0, heads // kv_heads, scale,
              (-(-max(lens_q) // F.BM), heads, len(lens_q)))
    for i in range(len(lens_q)):
        qs, ks = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        want, want_lse = reference.forward(q64[qs], k64[ks], v64[ks], False, scale)
        check_out(o[qs], want, v64, "f16")
        check_lse(lse[:, qs], want_lse)
    assert bool(o[total:].isnan().all()) and bool(lse[:, total:].isnan().all())


@pytest.mark.parametrize("schedule", ["serial", "overlap+pingpong"])
def test_persistent(kj_backend, monkeypatch, schedule):
    """The persistent form, 3 blocks walking every item (the longest causal rows first): the
    stage ring's barrier phases and Q's go on across items of 1 to 3 key tiles, items past a
    shorter sequence's end are skipped by producer and consumers alike, items whose rows see no
    key still load Q; fixed lengths (GQA, batch 2) and packed ones; with the ping-pong, its
    token's protocol starts anew each item, and the epilogue's barriers are each consumer's."""
    use_form(monkeypatch, "persistent", schedule)
    monkeypatch.setattr(F, "PERSISTENT_BLOCKS", 3)
    if schedule == "serial":  # (each case a kernel of its own: the ping-pong's compiles slowly)
        fixed_case(2, 300, 333, 2, 1, 64, "bf16", True)
    varlen_case([37, 290, 1, 20], [50, 129, 3, 0], 2, 1, 64, "bf16", True)
