"""What limits the one-element-a-thread saxpy (issue 15): the PTX kaiojit emits for it, launched
as is and with changes a compiler could make, side by side (TB/s, CUDA events, median).

    python benchmarks/saxpy_probe.py

Rows: the PTX as compiled (block 256, as users write it, and block 1024); the same PTX with the
loads' L2 prefetch-size qualifier (``ld.global.nc.L2::128B`` / ``L2::256B``), which asks the
memory system to fetch the next sectors into L2 with each miss; and the same PTX prefetching
into L2 what later blocks will load, ``D`` elements ahead (about one and two waves of resident
threads: 132 SMs x 2048), either each thread its own element (``prefetch.global.L2``) or the
block's first thread the block's whole span (``cp.async.bulk.prefetch.L2``), both only within
``n``. A prefetch holds no register, so it raises the bytes in flight that one 4-byte load a
thread caps; whether that is worth a compiler pass is what these rows are for."""

from __future__ import annotations

import re
import sys

import numpy as np

import kaiojit as kj
import kaiojit.runtime as rt

sys.path.insert(0, ".")
from benchmarks.bandwidth import saxpy, time_ms, tbps  # noqa: E402

SIG = ("void(float32[::1, align=16], float32[::1, align=16], float32[::1, align=16], float32, "
       "int32)")


_LOADS = re.compile(r"\tld\.global\.nc\.b32 \t%r\d+, \[(%rd\d+)\];\n")
_GUARD = re.compile(r"\tsetp\.ge\.s64 \t%p\d+, (%rd\d+), (%rd\d+);")


def variant(ptx: str, qualifier: str) -> str:
    if not qualifier.startswith(".pf"):
        return ptx if not qualifier else re.sub(r"ld\.global\.nc\.b32",
                                                f"ld.global.nc{qualifier}.b32", ptx)
    return prefetching(ptx, bulk=qualifier.startswith(".pf.bulk"),
                       ahead=int(qualifier.rsplit(".", 1)[1]))


def prefetching(ptx: str, bulk: bool, ahead: int, block: int = 256) -> str:
    """The PTX with an L2 prefetch of the element ``ahead`` places on, after its two loads
    (each thread its own; with ``bulk`` the block's first thread its block's span)."""
    index, n = _GUARD.search(ptx).groups()
    addrs = _LOADS.findall(ptx)
    assert len(addrs) == 2, addrs
    last = list(_LOADS.finditer(ptx))[-1]
    lines = ["\t{", "\t.reg .pred %pf<3>;", "\t.reg .b64 %rf<2>;",
             f"\tadd.s64 %rf1, {index}, {ahead + (block - 1 if bulk else 0)};",
             f"\tsetp.lt.s64 %pf1, %rf1, {n};"]
    if bulk:
        lines += ["\t{ .reg .b32 %tf; mov.u32 %tf, %tid.x; setp.eq.u32 %pf2, %tf, 0; }",
                  "\tand.pred %pf1, %pf1, %pf2;"]
        lines += [f"\t@%pf1 cp.async.bulk.prefetch.L2.global [{a}+{4 * ahead}], {4 * block};"
                  for a in addrs]
    else:
        lines += [f"\t@%pf1 prefetch.global.L2::evict_last [{a}+{4 * ahead}];" for a in addrs]
    lines.append("\t}")
    return ptx[:last.end()] + "\n".join(lines) + "\n" + ptx[last.end():]


def main() -> None:
    n = 1 << 28
    rng = np.random.default_rng()
    x = [kj.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(2)]
    y = [kj.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(2)]
    out = [kj.to_device(np.full(n, np.nan, np.float32)) for _ in range(2)]
    a = np.float32(rng.standard_normal())
    want = a * x[0].copy_to_host() + y[0].copy_to_host()
    poison = np.full(n, np.nan, np.float32)
    ptx = saxpy.compile(SIG).ptx
    name = re.search(r"\.entry (\w+)\(", ptx).group(1)
    print("loads:", re.findall(r"ld\.global\S*", ptx))
    nbytes = 3 * 4 * n
    ahead = (1 << 18, 1 << 19)
    for qualifier in ("", ".L2::128B", ".L2::256B", *(f".pf.{d}" for d in ahead),
                      *(f".pf.bulk.{d}" for d in ahead)):
        fn = rt.Module.from_ptx(variant(ptx, qualifier)).get_function(name)
        for block in ((256,) if qualifier.startswith(".pf") else (256, 1024)):
            grid = (n + block - 1) // block
            launches = [fn.grid(grid).block(block).arg_ptr(out[k]).arg_i64(n).arg_ptr(x[k])
                        .arg_i64(n).arg_ptr(y[k]).arg_i64(n).arg_f32(float(a)).arg_i32(n)
                        for k in range(2)]
            out[0].copy_to_device(poison)
            launches[0].launch()
            kj.synchronize()
            np.testing.assert_allclose(out[0].copy_to_host(), want, rtol=1e-6, atol=1e-6)
            ms = time_ms(lambda k: launches[k].launch(), 2)
            print(f"saxpy one element a thread{qualifier or ' (as compiled)'}, block {block}: "
                  f"{ms:.3f} ms {tbps(nbytes, ms):.2f} TB/s")


if __name__ == "__main__":
    main()
