"""The attention kernels' PTX for sm_90a, assembled by ptxas (the autouse check): the forward
and backward of head dim 128 (the largest register footprint), with the wgmma forms they use."""

from __future__ import annotations

import pytest

import kaiojit as kj
from kaiojit.lib.attention import backward as B
from kaiojit.lib.attention import forward as F
from kaiojit.lib.attention import inspect
from kaiojit.tools.resources import ptxas_notes, ptxas_resources
from kaiojit.tools.sass import sass_of_ptx

MAP = "tensormap({t}, 3)"


def resources(ptx: str):
    return ptxas_resources(ptx, "sm_90a")


def forward_signature(t: str) -> str:
    return inspect.forward_signature(t)


def backward_signature(t: str) -> str:
    return inspect.backward_signature(t)


def test_forward_ptx():
    """The split form (the GPU's; the cpu backend runs the lockstep one), causal."""
    cfg = F.ForwardConfig(128, "bf16", True, False, lockstep=False)
    ptx = kj.compile_ptx(F.forward_kernel(cfg), forward_signature("bfloat16"), arch="sm_90")
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    assert "cvt.rn.bf16x2.f32" in ptx and "ex2.approx.ftz.f32" in ptx
    assert "cp.async.bulk.tensor.3d" in ptx and "mbarrier.try_wait" in ptx
    assert ".maxnreg 168" in ptx  # 384 threads: 65536 registers / 384
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx  # the producer's registers ...
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx  # ... to the consumers'
    assert resources(ptx).spill_store_bytes == 0  # head dim 128 fits in 232 registers


@pytest.mark.parametrize("schedule", list(F.SCHEDULES))
@pytest.mark.parametrize("d", [64, 128])
def test_forward_schedules_ptxas(schedule, d):
    """Each schedule's split form as ptxas sees it: no spill, and none of its notes that it
    serialized the wgmmas (C7514) or injected a wait or a fence (C7517, C7519); in the SASS,
    with the overlap, the softmax's 64 exponentials of a tile (and the 2 of its rescale) run
    while a P V GEMM is in flight; with the ping-pong, the consumers' HGMMAs sit between a
    named barrier's sync and arrive."""
    cfg = F.ForwardConfig.scheduled(d, "bf16", d == 128, False, schedule, lockstep=False)
    ptx = inspect.forward_ptx(cfg)
    assert ptxas_notes(ptx, "sm_90a") == []
    assert not resources(ptx).spills
    overlap, pingpong = F.SCHEDULES[schedule]
    outline = inspect.sass_outline(sass_of_ptx(ptx, "sm_90a"))
    assert inspect.softmax_under_pv(outline) == (66 if overlap else 0), outline
    bars = [e for e in outline if e.startswith("BAR.")]
    if pingpong:  # sync, GEMMs, arrive: each consumer's turn
        assert bars and bars == ["BAR.SYNC.DEFER_BLOCKING", "BAR.ARV"] * (len(bars) // 2)
        for i, e in enumerate(outline):
            if "HGMMA" in e:
                assert [b for b in outline[:i] if b.startswith("BAR.")][-1].startswith(
                    "BAR.SYNC"), outline
    else:
        assert bars == [], outline


def test_backward_ptx():
    cfg = B.BackwardConfig(128, "f16", False, True)
    _, main, _ = B.kernels(cfg)
    ptx = kj.compile_ptx(main, backward_signature("float16"), arch="sm_90")
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx  # S^T, dP^T, dQ
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx  # dV, dK
    assert "red.global.add.f32" in ptx or "atom.global.add.f32" in ptx


@pytest.mark.parametrize("d", [64, 128])
def test_backward_reduce_ptx(d):
    """The reduce mode: each dQ warpgroup's two TMA reduce-adds a step (one bulk group), the
    read wait before its buffer is rewritten, the completion wait at the end, no atomic add
    left; no ptxas note; no spill at head dim 64, and at 128 (where the atomics mode spills
    too) no more than a dozen spill instructions in the step loop beyond the atomics mode's
    (benchmarks/RESULTS.md: 10-23 against 10-15 by configuration; here 20 against 10)."""
    cfg = B.BackwardConfig(d, "bf16", True, True, dq="reduce")
    ptx = inspect.backward_ptx(cfg)
    assert ptx.count("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group") \
        == 2
    assert "cp.async.bulk.wait_group.read 0" in ptx and "cp.async.bulk.wait_group 0" in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    assert "red.global.add.f32" not in ptx and "atom.global.add.f32" not in ptx
    assert ptxas_notes(ptx, "sm_90a") == []
    if d == 64:
        assert not resources(ptx).spills
    else:
        atomics = inspect.backward_ptx(B.BackwardConfig(d, "bf16", True, True))
        in_loop = inspect.spills_in_loop(sass_of_ptx(ptx, "sm_90a"))
        assert in_loop <= inspect.spills_in_loop(sass_of_ptx(atomics, "sm_90a")) + 12


@pytest.mark.parametrize("form", ["smem", "persistent"])
@pytest.mark.parametrize("schedule", ["overlap", "overlap+pingpong"])
@pytest.mark.parametrize("d", [64, 128])
def test_forward_smem_epilogue_ptxas(schedule, d, form):
    """The shared-memory epilogue: O by stmatrix into the Q tile (persistent: its own
    buffer), TMA stores, and the copies of a half crossing a sequence's end as 128-bit accesses
    (each thread D / 16 chunks: no 2-byte store left); no ptxas note, the overlap still
    intact; the epilogue's barrier (each consumer's own, after its last GEMM) the last of the
    SASS's barriers. No spill but in the persistent form at head dim 128, where the item
    loop's state takes the last registers: a few words, spilled and refilled per item,
    none in the key-tile loop."""
    cfg = F.ForwardConfig.scheduled(d, "bf16", True, False, schedule, lockstep=False,
                                    form=form)
    ptx = inspect.forward_ptx(cfg)
    assert ptxas_notes(ptx, "sm_90a") == []
    sass = sass_of_ptx(ptx, "sm_90a")
    r = resources(ptx)
    if form == "persistent" and d == 128:
        assert r.spill_store_bytes <= 64 and inspect.spills_in_loop(sass) == 0
    else:
        assert not r.spills
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == d // 16
    assert ptx.count("cp.async.bulk.tensor.3d.global.shared::cta") == d // 64
    assert "cp.async.bulk.wait_group.read 0" in ptx
    assert ptx.count("st.global.v4.b32") == ptx.count("ld.shared.v4.b32") == d // 16
    assert "st.global.b16" not in ptx
    outline = inspect.sass_outline(sass)
    assert inspect.softmax_under_pv(outline) == 66, outline
    last_gemm = max(i for i, e in enumerate(outline) if "HGMMA" in e)
    assert any(e.endswith("BAR.SYNC.DEFER_BLOCKING") for e in outline[last_gemm:]), outline
