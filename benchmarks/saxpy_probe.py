"""What limits the one-element-a-thread saxpy (issue 15): the PTX kaiojit emits for it, launched
as is and with changes a compiler could make, side by side (TB/s, CUDA events, median).

    python benchmarks/saxpy_probe.py

Rows: Triton's saxpy on the same data (first and last); the PTX compiled with
``prefetch=False`` (block 256, as users write it, and block 1024); the PTX kaiojit compiles by
default, with its L2 prefetches of the two streams (docs/semantics.md); the ``prefetch=False``
PTX with the loads' L2 prefetch-size qualifier (``ld.global.nc.L2::256B``), which asks the
memory system to fetch the next sectors into L2 with each miss; and the ``prefetch=False`` PTX
prefetching into L2 what later blocks will load, ``D`` elements ahead (one to four waves of
resident threads: 132 SMs x 2048), either each thread its own element (``prefetch.global.L2``,
with or without ``evict_last``) or the block's first thread the block's whole span
(``cp.async.bulk.prefetch.L2``), all only within ``n``. A prefetch holds no register, so it
raises the bytes in flight that one 4-byte load a thread caps; these rows chose the distance
and the form of kaiojit's pass. Then kaiojit's default PTX in blocks of 128 and 512 (fewer or
more threads a block to retire together), and with other cache operators: loads cached in L2
only (``.cg``), marked last-use (``.lu``), not allocated in L1, with the 256-byte L2 fetch,
and stores marked streaming (``.cs``, evict first)."""

from __future__ import annotations

import re
import sys

import numpy as np

import kaiojit as kj
import kaiojit.runtime as rt

sys.path.insert(0, ".")
from benchmarks.bandwidth import saxpy, saxpy_no_prefetch, tbps, time_ms

SIG = ("void(float32[::1, align=16], float32[::1, align=16], float32[::1, align=16], float32, "
       "int32)")


_LOADS = re.compile(r"\tld\.global\.nc\.b32 \t%r\d+, \[(%rd\d+)\];\n")
_GUARD = re.compile(r"\tsetp\.ge\.s64 \t%p\d+, (%rd\d+), (%rd\d+);")


def variant(ptx: str, qualifier: str) -> str:
    if qualifier == " (kaiojit's default: prefetch)":
        return saxpy.compile(SIG).ptx
    if not qualifier.startswith(".pf"):
        return ptx if not qualifier else re.sub(r"ld\.global\.nc\.b32",
                                                f"ld.global.nc{qualifier}.b32", ptx)
    kind = qualifier.split(".")[2]
    return prefetching(ptx, kind=kind if not kind.isdigit() else "last",
                       ahead=int(qualifier.rsplit(".", 1)[1]))


def prefetching(ptx: str, kind: str, ahead: int, block: int = 256) -> str:
    """The PTX with an L2 prefetch of the element ``ahead`` places on, after its two loads:
    ``last``, each thread its own with the evict_last hint; ``plain``, the same without a
    hint; ``warp``, each warp's first thread its warp's line; ``bulk``, the block's first
    thread its block's span."""
    bulk = kind == "bulk"
    index, n = _GUARD.search(ptx).groups()
    addrs = _LOADS.findall(ptx)
    assert len(addrs) == 2, addrs
    last = list(_LOADS.finditer(ptx))[-1]
    lines = ["\t{", "\t.reg .pred %pf<3>;", "\t.reg .b64 %rf<2>;",
             f"\tadd.s64 %rf1, {index}, {ahead + (block - 1 if bulk else 0)};",
             f"\tsetp.lt.s64 %pf1, %rf1, {n};"]
    if kind in ("bulk", "warp"):
        mask = block - 1 if bulk else 31
        first = (f"\t{{ .reg .b32 %tf; mov.u32 %tf, %tid.x; and.b32 %tf, %tf, {mask}; "
                 "setp.eq.u32 %pf2, %tf, 0; }")
        lines += [first, "\tand.pred %pf1, %pf1, %pf2;"]
    if bulk:
        lines += [f"\t@%pf1 cp.async.bulk.prefetch.L2.global [{a}+{4 * ahead}], {4 * block};"
                  for a in addrs]
    else:
        hint = "::evict_last" if kind == "last" else ""
        lines += [f"\t@%pf1 prefetch.global.L2{hint} [{a}+{4 * ahead}];" for a in addrs]
    lines.append("\t}")
    return ptx[:last.end()] + "\n".join(lines) + "\n" + ptx[last.end():]


# cache operators on kaiojit's default PTX (with its prefetches): loads cached in L2 only
# (.cg) or marked last-use (.lu) or not allocated in L1, stores marked streaming (.cs:
# evict first, so written lines leave L2 before the prefetched ones)
_LD, _ST = "ld.global.nc.b32", "st.global.b32"
DEFAULT_EDITS = {
    "loads .cg": [(_LD, "ld.global.cg.b32")],
    "loads .lu": [(_LD, "ld.global.lu.b32")],
    "loads .nc.L1::no_allocate": [(_LD, "ld.global.nc.L1::no_allocate.b32")],
    "loads .nc.L2::256B": [(_LD, "ld.global.nc.L2::256B.b32")],
    "stores .cs": [(_ST, "st.global.cs.b32")],
    "loads .cg, stores .cs": [(_LD, "ld.global.cg.b32"), (_ST, "st.global.cs.b32")],
}


def triton_row(n, x, y, a, want) -> None:
    """Triton's saxpy on the same data in the same run, for the ratio (skipped without it)."""
    try:
        import torch

        import benchmarks._triton_peer as tri
    except Exception as e:  # noqa: BLE001 - a peer that does not import is left out
        print("triton: not available:", e)
        return
    tx = [torch.from_numpy(v.copy_to_host()).cuda() for v in x]
    ty = [torch.from_numpy(v.copy_to_host()).cuda() for v in y]
    tout = [torch.full_like(v, float("nan")) for v in tx]
    tri.saxpy(tout[0], tx[0], ty[0], float(a), n)
    torch.cuda.synchronize()
    np.testing.assert_allclose(tout[0].cpu().numpy(), want, rtol=1e-6, atol=1e-6)
    ms = time_ms(lambda k: tri.saxpy(tout[k], tx[k], ty[k], float(a), n), 2)
    print(f"saxpy triton (BLOCK=1024): {ms:.3f} ms {tbps(3 * 4 * n, ms):.2f} TB/s")


def main() -> None:
    n = 1 << 28
    rng = np.random.default_rng()
    x = [kj.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(2)]
    y = [kj.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(2)]
    out = [kj.to_device(np.full(n, np.nan, np.float32)) for _ in range(2)]
    a = np.float32(rng.standard_normal())
    want = a * x[0].copy_to_host() + y[0].copy_to_host()
    poison = np.full(n, np.nan, np.float32)
    ptx = saxpy_no_prefetch.compile(SIG).ptx
    name = re.search(r"\.entry (\w+)\(", ptx).group(1)
    print("loads:", re.findall(r"ld\.global\S*", ptx))
    nbytes = 3 * 4 * n
    triton_row(n, x, y, a, want)  # first, and again last: the clocks may still be rising
    variants = ["", " (kaiojit's default: prefetch)", ".L2::256B"]
    variants += [f".pf.{d}" for d in (1 << 18, 1 << 19, 1 << 20)]
    variants += [f".pf.plain.{d}" for d in (1 << 19, 1 << 20)]
    variants += [f".pf.bulk.{d}" for d in (1 << 19, 1 << 20)]
    default = saxpy.compile(SIG).ptx
    rows = [(q, variant(ptx, q), (256, 1024) if q == "" else (256,)) for q in variants]
    rows.append((" (default, blocks of 128 and 512)", default, (128, 512)))
    for label, edits in DEFAULT_EDITS.items():  # kaiojit's default PTX, its cache operators changed
        text = default
        for old, new in edits:
            assert old in text, old
            text = text.replace(old, new)
        rows.append((f" (default, {label})", text, (256,)))
    for qualifier, text, blocks in rows:
        fn = rt.Module.from_ptx(text).get_function(name)
        for block in blocks:
            grid = (n + block - 1) // block
            launches = [fn.grid(grid).block(block).arg_ptr(out[k]).arg_i64(n).arg_ptr(x[k])
                        .arg_i64(n).arg_ptr(y[k]).arg_i64(n).arg_f32(float(a)).arg_i32(n)
                        for k in range(2)]
            out[0].copy_to_device(poison)
            launches[0].launch()
            kj.synchronize()
            np.testing.assert_allclose(out[0].copy_to_host(), want, rtol=1e-6, atol=1e-6)
            ms = time_ms(lambda k: launches[k].launch(), 2)
            print(f"saxpy one element a thread{qualifier or ' (prefetch=False)'}, block {block}: "
                  f"{ms:.3f} ms {tbps(nbytes, ms):.2f} TB/s")
    triton_row(n, x, y, a, want)


if __name__ == "__main__":
    main()
