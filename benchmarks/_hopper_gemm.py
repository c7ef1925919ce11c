"""The Hopper section of benchmarks/gemm.py (issue 32): examples/hopper_gemm.py, the
warp-specialized persistent GEMM, beside cuBLAS (``torch.matmul``; ``torch._scaled_mm`` for
fp8) and Triton's matmul (benchmarks/_triton_gemm.py) in one run, each as a fraction of
cuBLAS, then a table of what each step of the kernel's structure is worth.

C = A @ B.T, A (M, K) and B (N, K) row-major (K-major, as wgmma reads both), C (M, N) bfloat16.
Every row is guarded: a failure (a peer that does not import, a kernel that does not compile
or gives a wrong result) is printed and the run goes on. Each kaiojit kernel is checked against
cuBLAS's result on the same inputs before it is timed.

    python benchmarks/gemm.py --hopper          # this section alone (an H100 / H200)
    KAIOJIT_BACKEND=cpu python benchmarks/gemm.py --hopper --small   # the checks, no GPU
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace

import numpy as np

import kaiojit as kj

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_example():
    path = os.path.join(HERE, "..", "examples", "hopper_gemm.py")
    spec = importlib.util.spec_from_file_location("hopper_gemm", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


hg = _load_example()
BASE = hg.GemmConfig()
# the structure steps (bf16 8192^3), each one change from the full kernel
STEPS = [
    ("full kernel (4 stages, wait_group 1, TMA epilogue, persistent, setmaxnreg)", BASE),
    ("2 stages", replace(BASE, stages=2)),
    ("3 stages", replace(BASE, stages=3)),
    ("wait_group 0 (no wgmma left in flight)", replace(BASE, wait=0)),
    ("register epilogue (no stmatrix / TMA store)", replace(BASE, tma_epilogue=False)),
    ("not persistent (one block a tile)", replace(BASE, persistent=False)),
    ("no setmaxnreg (168 registers everywhere)", replace(BASE, reg_alloc=False)),
    ("no warp specialization (producer step in the consumers' loop)",
     replace(BASE, lockstep=True)),
]
SHAPES = [(8192, 8192, 8192), (8192, 8192, 16384), (8192, 8192, 512)]


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def time_ms(launch: Callable[[], None], reps: int = 15, inner: int = 10) -> float:
    """Milliseconds a launch: the median over ``reps`` CUDA-event timings of ``inner``
    launches each (queued back to back, so host time between launches is hidden, as in a
    real workload), after warm-up launches."""
    for _ in range(3):
        launch()
    kj.synchronize()
    start, end = kj.Event(), kj.Event()
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(inner):
            launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return float(np.median(times))


def guarded(what: str, fn: Callable[[], float | None]) -> float | None:
    """``fn()``, or None after printing why it failed."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - one row failing must not stop the run
        print(f"  FAILED {what}: {type(e).__name__}: {e}")
        traceback.print_exc(limit=3)
        return None


# every configuration timed, by name: the steps, then fp8
FP8_PROMOTED = replace(BASE, dtype="e4m3", bn=128, stages=6, promote=True)
CONFIGS = dict(STEPS) | {"fp8 e4m3": replace(BASE, dtype="e4m3"),
                         "fp8 e4m3, promoted (128x128, 6 stages)": FP8_PROMOTED,
                         "fp8 e5m2": replace(BASE, dtype="e5m2"),
                         "fp8 e4m3, 3 stages": replace(BASE, dtype="e4m3", stages=3)}
SMOKE_SECONDS_EACH = 30  # compile and check a configuration (a child gets this per one)


def check_small(names=(STEPS[0][0], "fp8 e4m3, 3 stages", "fp8 e5m2")) -> None:
    """Configurations against NumPy at a shape that is not a multiple of the tile: ``OK name``
    or ``FAILED name`` for each, as soon as it is known."""
    for name in names:
        try:
            err = hg.check(200, 264, 208, CONFIGS[name])
            print(f"OK {name}: 200x264x208 on the {kj.backend()} backend matches NumPy "
                  f"({err:.3f} of the bound)", flush=True)
        except Exception as e:  # noqa: BLE001 - reported, and the configuration left out
            print(f"FAILED {name}: {type(e).__name__}: {e}", flush=True)


def smoke(names: list[str]) -> set[str]:
    """The configurations that are correct on a small problem, run in a child process first:
    a kernel that hangs the GPU (a barrier that never completes) costs the child, not this
    run. A child that stops answering is killed, its configuration counted as failed, and a
    new child goes on with the rest."""
    import subprocess

    good: set[str] = set()
    left = list(names)
    while left:
        limit = SMOKE_SECONDS_EACH * len(left) + 60
        cmd = [sys.executable, os.path.abspath(__file__), "--smoke", *left]
        try:
            out, hung = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                                       check=False).stdout, False
        except subprocess.TimeoutExpired as e:
            out, hung = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or "", True
        done = []
        for line in out.splitlines():
            word, _, rest = line.partition(" ")
            name = rest.split(": ")[0]
            if word in ("OK", "FAILED") and name in left:
                print("  " + line)
                done.append(name)
                if word == "OK":
                    good.add(name)
        rest = [x for x in left if x not in done]
        if hung and rest:
            print(f"  FAILED {rest[0]}: no answer in {limit} s (it hangs); left out")
            rest = rest[1:]
        elif rest:
            print(f"  FAILED the smoke test's child (no answer for {rest}): {out[-2000:]}")
            break
        left = rest
    return good


def _resources(cfg) -> str:
    try:
        from kaiojit.tools.resources import ptxas_resources

        k = hg.kernel(cfg)
        r = ptxas_resources(k.compile(k.signatures[-1]).ptx, "sm_90a")
        spill = (f"{r.spill_store_bytes}+{r.spill_load_bytes} B spills" if r.spills
                 else "no spills")
        return f"{r.registers} regs at entry, {spill}"
    except Exception as e:  # noqa: BLE001 - a report, not a result
        return f"(no ptxas report: {e})"


class Problem:
    """Inputs of one shape on the GPU and cuBLAS's result, for checks."""

    def __init__(self, torch, m: int, n: int, k: int, fp8: bool = False):
        self.torch, self.m, self.n, self.k, self.fp8 = torch, m, n, k, fp8
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn(m, k, device="cuda", generator=gen)
        b = torch.randn(n, k, device="cuda", generator=gen)
        dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
        self.a, self.b = a.to(dtype), b.to(dtype)
        self.c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        self.one = torch.tensor(1.0, device="cuda")
        self.want = self.cublas_out()

    def cublas(self, fast_accum: bool = True):
        """cuBLAS's C (fp8: ``_scaled_mm`` with fast accumulation, the wgmma's own float32
        sums as in kaiojit's kernel, unless told otherwise)."""
        if self.fp8:
            return self.torch._scaled_mm(self.a, self.b.T, self.one, self.one,
                                         out_dtype=self.torch.bfloat16,
                                         use_fast_accum=fast_accum)
        return self.torch.matmul(self.a, self.b.T, out=self.c)

    def cublas_out(self):
        return self.cublas(False).float().clone()

    def check(self, what: str) -> None:
        """The result in ``c`` against cuBLAS's (the c is poisoned before the run)."""
        got = self.c.float()
        rel = float((got - self.want).abs().max() / self.want.abs().max())
        if not rel < 2e-2 or not bool(self.torch.isfinite(got).all()):
            raise AssertionError(f"{what}: wrong result, max |diff| {rel:.3g} of max |C|")

    def kaiojit(self, cfg) -> Callable[[], None]:
        torch = self.torch
        a, b = (x.view(torch.uint8) if self.fp8 else x for x in (self.a, self.b))
        return hg.prepare(a, b, self.c, cfg)

    def timed_checked(self, what: str, launch: Callable[[], None]) -> float:
        self.c.fill_(float("nan"))
        launch()
        self.torch.cuda.synchronize()
        self.check(what)
        return time_ms(launch)


def run(torch, triton_gemm, good: set[str]) -> None:
    """The comparison table, then the structure steps: kaiojit's rows for the configurations
    that passed the smoke test (``good``)."""
    rows: list[tuple[str, str, float | None, float | None]] = []
    problems = [(f"bf16 {m}x{n}x{k}", m, n, k, False) for m, n, k in SHAPES]
    problems.append(("fp8 e4m3 8192^3", 8192, 8192, 8192, True))
    for what, m, n, k, fp8 in problems:
        p = guarded(f"{what} inputs", lambda m=m, n=n, k=k, fp8=fp8: Problem(torch, m, n, k, fp8))
        if p is None:
            continue
        first = len(rows)
        cublas = guarded(f"{what} cuBLAS", lambda p=p: time_ms(p.cublas))
        rows.append((what, "cuBLAS", cublas, cublas))
        if fp8:
            slow = guarded(f"{what} cuBLAS", lambda p=p: time_ms(lambda: p.cublas(False)))
            rows.append((what, "cuBLAS, no fast accumulation", slow, cublas))
        names = ["fp8 e4m3", "fp8 e4m3, promoted (128x128, 6 stages)"] if fp8 \
            else [STEPS[0][0]]
        for name in names:
            ms = None
            if name in good:
                ms = guarded(f"{what} kaiojit", lambda p=p, w=what, c=CONFIGS[name]:
                             p.timed_checked(f"kaiojit {w}", p.kaiojit(c)))
            who = "kaiojit" if name == names[0] else "kaiojit, promoted 128x128"
            rows.append((what, who, ms, cublas))
        if triton_gemm is not None:
            def triton(p=p):
                return p.timed_checked("triton", lambda: triton_gemm.matmul(p.a, p.b.T, p.c))
            rows.append((what, "triton", guarded(f"{what} triton", triton), cublas))
        _print_row_block(rows[first:], m, n, k)
        del p
        torch.cuda.empty_cache()
    print(f"kaiojit kernel: {_resources(BASE)}")
    print("\nwhat each step of the structure is worth (bf16 8192^3):")
    p = guarded("steps inputs", lambda: Problem(torch, 8192, 8192, 8192))
    if p is None:
        return
    cublas = guarded("steps cuBLAS", lambda: time_ms(p.cublas))
    for name, cfg in STEPS:
        ms = None
        if name in good:
            ms = guarded(name, lambda cfg=cfg, name=name: p.timed_checked(name, p.kaiojit(cfg)))
        print(f"  {name:66} {_cell(ms, cublas, 8192, 8192, 8192)}")
    wg = guarded("gemm_wgmma baseline", lambda: _baseline(p))
    print(f"  {'no TMA, no warp specialization (benchmarks/gemm_wgmma.py, 128x256)':66} "
          f"{_cell(wg, cublas, 8192, 8192, 8192)}")


def _baseline(p) -> float:
    import gemm_wgmma

    torch = p.torch
    a, b = p.a.view(torch.int64), p.b.view(torch.int64)
    return p.timed_checked("gemm_wgmma", lambda: gemm_wgmma.launch(256, a, b, p.c, p.k, "bf16"))


def _cell(ms: float | None, cublas: float | None, m: int, n: int, k: int) -> str:
    if ms is None:
        return "failed (see above)"
    ratio = f"{cublas / ms:7.1%} of cuBLAS" if cublas else ""
    return f"{ms:8.3f} ms {tflops(m, n, k, ms):7.1f} TFLOP/s {ratio}"


def _print_row_block(rows, m: int, n: int, k: int) -> None:
    for what, who, ms, cublas in rows:
        print(f"  {what:22} {who:29} {_cell(ms, cublas, m, n, k)}")


def main(small: bool) -> None:
    print("Hopper GEMM (examples/hopper_gemm.py), C = A @ B.T, C bfloat16")
    if small or kj.backend() != "cuda":
        check_small()
        return
    good = smoke(list(CONFIGS))
    import torch

    run(torch, triton_peer(), good)


if __name__ == "__main__" and sys.argv[1:2] == ["--smoke"]:  # smoke()'s child
    check_small(sys.argv[2:])


def triton_peer():
    """benchmarks/_triton_gemm.py, or None (said why) where Triton does not import."""
    try:
        import _triton_gemm
    except Exception as e:  # noqa: BLE001 - a peer that does not import is left out
        print(f"(triton left out: {e})")
        return None
    return _triton_gemm
