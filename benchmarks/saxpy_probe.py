"""What limits the one-element-a-thread saxpy (issue 15): the PTX kaiojit emits for it, launched
as is and with changes a compiler could make, side by side (TB/s, CUDA events, median).

    python benchmarks/saxpy_probe.py

Rows: the PTX as compiled (block 256, as users write it, and block 1024); the same PTX with the
loads' L2 prefetch-size qualifier (``ld.global.nc.L2::128B`` / ``L2::256B``), which asks the
memory system to fetch the next sectors into L2 with each miss."""

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


def variant(ptx: str, qualifier: str) -> str:
    return ptx if not qualifier else re.sub(r"ld\.global\.nc\.b32", f"ld.global.nc{qualifier}.b32",
                                            ptx)


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
    for qualifier in ("", ".L2::128B", ".L2::256B"):
        fn = rt.Module.from_ptx(variant(ptx, qualifier)).get_function(name)
        for block in (256, 1024):
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
