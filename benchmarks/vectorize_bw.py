"""``@kj.vectorize`` of a + b over 2^28 float32 against a device-to-device copy, in one run.

The copy (cuMemcpyDtoDAsync, 8 bytes an element) is the bandwidth to reach; a + b moves 12
bytes an element (two reads, one write). Also, for context: the same a + b as a hand-written
kaiojit kernel, PyTorch, CuPy and numba-cuda's CUDA ufunc where importable (numba-cuda in a
subprocess: give its directory with KAIOJIT_NUMBA_PYTHONPATH). Times are per call of
back-to-back calls (CUDA events), rotating between two input sets so L2 never serves them;
results are checked against NumPy first.

    PYTHONPATH=. python3 benchmarks/vectorize_bw.py [--small]
"""

from __future__ import annotations

import os
import sys

import numpy as np

import kaiojit as kj

sys.path.insert(0, os.path.dirname(__file__))
from _throughput import numba_peer_rows, per_call_ms  # noqa: E402
from bandwidth import load_peers, tbps  # noqa: E402

N = 1 << 28
SETS = 2


@kj.vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def add(a, b):
    return a + b


@kj.jit
def add_kernel(out, a, b, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a[i] + b[i]


def main() -> None:
    n = N // (8 if "--small" in sys.argv else 1)
    rng = np.random.default_rng()
    hx = [rng.standard_normal(n, dtype=np.float32) for _ in range(SETS)]
    hy = [rng.standard_normal(n, dtype=np.float32) for _ in range(SETS)]
    xs = [kj.to_device(v) for v in hx]
    ys = [kj.to_device(v) for v in hy]
    outs = [kj.to_device(np.full(n, np.nan, np.float32)) for _ in range(SETS)]
    rows = []

    def check(got: np.ndarray, who: str) -> None:
        if not np.array_equal(got, hx[0] + hy[0]):
            raise AssertionError(f"{who}: a + b is wrong")

    ms = per_call_ms(lambda k: outs[k].copy_to_device(xs[k], stream=0), SETS)
    copy_tbps = tbps(8 * n, ms)
    rows.append(("copy (cuMemcpyDtoDAsync)", ms, copy_tbps))

    outs[0] = kj.to_device(np.full(n, np.nan, np.float32))
    add(xs[0], ys[0], out=outs[0])
    check(outs[0].copy_to_host(), "kj.vectorize")
    ms = per_call_ms(lambda k: add(xs[k], ys[k], out=outs[k]), SETS)
    rows.append(("kj.vectorize a + b", ms, tbps(12 * n, ms)))
    ms = per_call_ms(lambda k: add(xs[k], ys[k]), SETS)
    rows.append(("kj.vectorize a + b (new out)", ms, tbps(12 * n, ms)))

    grid = (n + 255) // 256
    n64 = np.int64(n)
    outs[0] = kj.to_device(np.full(n, np.nan, np.float32))
    add_kernel[grid, 256](outs[0], xs[0], ys[0], n64)
    check(outs[0].copy_to_host(), "kernel")
    ms = per_call_ms(lambda k: add_kernel[grid, 256](outs[k], xs[k], ys[k], n64), SETS)
    rows.append(("kaiojit kernel a + b", ms, tbps(12 * n, ms)))

    peers = load_peers()
    if "torch" in peers:
        torch = peers["torch"]
        tx, ty = [torch.from_numpy(v).cuda() for v in hx], [torch.from_numpy(v).cuda() for v in hy]
        tout = [torch.empty_like(v) for v in tx]
        torch.add(tx[0], ty[0], out=tout[0])
        check(tout[0].cpu().numpy(), "torch")
        ms = per_call_ms(lambda k: torch.add(tx[k], ty[k], out=tout[k]), SETS)
        rows.append(("torch.add", ms, tbps(12 * n, ms)))
    if "cupy" in peers:
        cp = peers["cupy"]
        cx, cy = [cp.asarray(v) for v in hx], [cp.asarray(v) for v in hy]
        cout = [cp.empty_like(v) for v in cx]
        cp.add(cx[0], cy[0], out=cout[0])
        check(cp.asnumpy(cout[0]), "cupy")
        ms = per_call_ms(lambda k: cp.add(cx[k], cy[k], out=cout[k]), SETS)
        rows.append(("cupy.add", ms, tbps(12 * n, ms)))
    rows += [(who, ms, rate) for _, who, ms, rate in numba_peer_rows("vectorize", n)]

    print(f"a + b over {n} float32 on the {kj.backend()} backend")
    print(f"{'who':<30} {'ms':>8} {'TB/s':>6} {'of copy':>8}")
    for who, ms, rate in rows:
        print(f"{who:<30} {ms:>8.3f} {rate:>6.2f} {rate / copy_tbps:>8.1%}")


if __name__ == "__main__":
    main()
