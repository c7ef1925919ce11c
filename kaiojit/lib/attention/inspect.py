"""What ptxas made of the attention kernels, without a GPU: its registers, spills and numbered
notes for each configuration, and an outline of the SASS (the order of the tensor-core
instructions, their waits, the exponentials and the barriers), which shows whether a schedule
is the one written: with the overlap, ``WARPGROUP.DEPBAR.LE gsb0, 0x1`` (S_j done, P V still
in flight) then the softmax's ``MUFU.EX2`` then ``DEPBAR.LE 0x0``; with the ping-pong, each
consumer's HGMMAs between its ``BAR.SYNC`` and its ``BAR.ARV``.

``benchmarks/attention.py --resources`` prints both for every configuration."""

from __future__ import annotations

import re

from . import forward as F

MAP = "tensormap({t}, 3)"
_EVENT = re.compile(r"(HGMMA\.\w+|WARPGROUP\.DEPBAR\.LE gsb0, 0x\d|MUFU\.EX2|BAR\.SYNC[.\w]* "
                    r"R\d+|BAR\.ARV R\d+|SYNCS\.PHASECHK)")


def forward_signature(t: str) -> str:
    """The forward kernel's signature for element type ``t`` ("bfloat16", "float16")."""
    m = MAP.format(t=t)
    return (f"void({t}[:, :, ::1, align=16], float32[::1, align=16], {m}, {m}, {m}, {m}, "
            "int32[::1, align=16], int32[::1, align=16], int64, int64, int64, float32)")


def forward_ptx(cfg: F.ForwardConfig) -> str:
    import kaiojit as kj
    t = {"bf16": "bfloat16", "f16": "float16"}[cfg.dtype]
    return kj.compile_ptx(F.forward_kernel(cfg), forward_signature(t), arch="sm_90")


def backward_signature(t: str, dq: str = "atomics") -> str:
    """The backward's main kernel's signature for element type ``t``: its fifth map is the
    float32 dQ accumulator's in the reduce mode, Q's stand-in otherwise."""
    m = MAP.format(t=t)
    dq_map = MAP.format(t="float32") if dq == "reduce" else m
    return (f"void(float32[:, :, ::1], {t}[:, :, ::1], {t}[:, :, ::1], {m}, {m}, {m}, {m}, "
            f"{dq_map}, float32[:, ::1], float32[:, ::1], int32[::1], int32[::1], int64, int64, "
            "int64, float32)")


def backward_ptx(cfg) -> str:
    """The PTX of the backward's main kernel for ``cfg`` (a ``backward.BackwardConfig``)."""
    import kaiojit as kj

    from . import backward as B
    t = {"bf16": "bfloat16", "f16": "float16"}[cfg.dtype]
    _, main, _ = B.kernels(cfg)
    return kj.compile_ptx(main, backward_signature(t, cfg.dq), arch="sm_90")


def sass_outline(sass: str) -> list[str]:
    """The SASS's tensor-core, wait, exponential and barrier instructions in order, runs of
    one kind merged: ``["8x HGMMA.64x128x16", "WARPGROUP.DEPBAR.LE gsb0, 0x1",
    "66x MUFU.EX2", ...]`` (named-barrier ids by register: the ping-pong's)."""
    out: list[str] = []
    last, count = None, 0
    for m in _EVENT.finditer(sass):
        e = re.sub(r" R\d+", "", m.group(1))
        if e == last:
            count += 1
            continue
        if last is not None:
            out.append(f"{count}x {last}" if count > 1 else last)
        last, count = e, 1
    if last is not None:
        out.append(f"{count}x {last}" if count > 1 else last)
    return out


def highest_register(sass: str) -> int:
    """One past the highest general register the SASS names: what the warpgroups that raised
    their limit with ``setmaxnreg`` use (ptxas's "Used N registers" is the count at entry)."""
    return max((int(r) for r in re.findall(r"\bR(\d+)\b", sass)), default=-1) + 1


def spills_in_loop(sass: str) -> int:
    """The local-memory spills and refills (``STL`` / ``LDL``) between the first and the last
    tensor-core instruction: in the key-tile loop, where each costs every tile (0 when the
    spills, if any, are per work item only)."""
    lines = sass.splitlines()
    gemms = [i for i, line in enumerate(lines) if "HGMMA" in line]
    if not gemms:
        return 0
    return sum(bool(re.search(r"\b(STL|LDL)\b", line))
               for line in lines[gemms[0]:gemms[-1] + 1])


def softmax_under_pv(outline: list[str]) -> int:
    """The most ``MUFU.EX2`` between a ``DEPBAR.LE 0x1`` and the next ``DEPBAR.LE 0x0``: the
    exponentials computed while a P V GEMM is in flight (0 when none is)."""
    best, inside, n = 0, False, 0
    for e in outline:
        if e.endswith("DEPBAR.LE gsb0, 0x1"):
            inside, n = True, 0
        elif e.endswith("DEPBAR.LE gsb0, 0x0"):
            if inside:
                best = max(best, n)
            inside = False
        elif inside and e.endswith("MUFU.EX2"):
            n += int(e.split("x ")[0]) if "x " in e else 1
    return best


__all__ = ["forward_ptx", "forward_signature", "highest_register", "sass_outline",
           "softmax_under_pv", "spills_in_loop"]
