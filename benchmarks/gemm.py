"""GEMMs written in kaiojit against cuBLAS (torch.matmul), Triton and numba-cuda, in one run:

* bf16 8192^3 on tensor cores: examples/gemm.py (mma.sync + ldmatrix + a 4-stage cp.async
  pipeline) vs cuBLAS vs a standard Triton matmul (benchmarks/_triton_gemm.py); C is bfloat16.
* fp32 SGEMM 4096^3 without tensor cores: register-tiled kaiojit SGEMMs (128 x 128 tiles,
  8 x 8 a thread, float4 accesses; benchmarks/_kaiojit_gemm.py, each of its SGEMM_CONFIGS
  printed with its TFLOP/s, share of cuBLAS and registers) vs cuBLAS with TF32 off vs Triton in
  IEEE mode.
* numba's documented shared-memory matmul (16 x 16 tiles), 4096^3, compiled by kaiojit and by
  numba-cuda (a subprocess: set KAIOJIT_NUMBA_PYTHONPATH, see run_h200.sh).
* Hopper (benchmarks/_hopper_gemm.py; ``--hopper`` runs it alone): examples/hopper_gemm.py, the
  warp-specialized persistent wgmma GEMM, vs cuBLAS vs Triton at bf16 8192^3, 8192x8192x16384,
  K = 512 and fp8 e4m3 8192^3, then what each step of its structure is worth.

Every kernel is first checked against NumPy at small sizes that are not multiples of its tiles
(``--small`` stops there, and runs on the cpu backend too). Times are CUDA-event medians after a
warm-up; TFLOP/s counts 2 M N K. Each kaiojit kernel's registers, shared memory and spills (ptxas)
say what limits it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

import kaiojit as kj
from kaiojit.tools.resources import ptxas_resources

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _hopper_gemm
import _kaiojit_gemm as kgemm


def _load_example():
    path = os.path.join(HERE, "..", "examples", "gemm.py")
    spec = importlib.util.spec_from_file_location("example_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tc = _load_example()
# tile configurations of the tensor-core GEMM timed side by side (the first is the example's)
TC_CONFIGS = [tc.CONFIG,
              tc.GemmConfig(128, 128, 32, 64, 32, 4, max_registers=128),  # 2 blocks an SM
              tc.GemmConfig(128, 128, 32, 64, 64, 4),  # 4 warps, 64 x 64 each
              tc.GemmConfig(128, 256, 32, 64, 64, 3),
              tc.GemmConfig(256, 128, 32, 64, 64, 3),
              tc.GemmConfig(128, 128, 64, 64, 32, 3)]  # half the barriers a K (126 regs)
TC_KERNELS = [tc.gemm_bf16] + [tc.make_gemm(cfg) for cfg in TC_CONFIGS[1:]]


def _bf16():
    """ml_dtypes' bfloat16, or None without ml_dtypes (the GPU checks then go through PyTorch)."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


# --- correctness at small, odd sizes -------------------------------------------------------------

def check_kaiojit() -> None:
    rng = np.random.default_rng()
    have_ml_dtypes = _bf16() is not None
    for m, n, k in [(200, 136, 72), (131, 67, 45)]:
        a32 = rng.standard_normal((m, k), dtype=np.float32)
        b32 = rng.standard_normal((k, n), dtype=np.float32)
        if have_ml_dtypes:
            a, b = a32.astype(_bf16()), b32.astype(_bf16())
            c = kj.to_device(np.full((m, n), np.nan, np.float32))
            tc.matmul(kj.to_device(a), kj.to_device(b), c)
            expect = a.astype(np.float64) @ b.astype(np.float64)
            _close(c.copy_to_host(), expect, 1e-5, f"kaiojit bf16 GEMM {m}x{n}x{k}")
        sgemm_configs = list(zip(kgemm.SGEMM_CONFIGS, kgemm.SGEMM_KERNELS))
        if kj.backend() != "cuda":
            sgemm_configs = sgemm_configs[:1]  # each compile takes seconds on the cpu backend
        for cfg, kernel in sgemm_configs:
            c = kj.to_device(np.full((m, n), np.nan, np.float32))
            kgemm.sgemm_launch(c, kj.to_device(a32), kj.to_device(b32), kernel, cfg)
            _close(c.copy_to_host(), a32.astype(np.float64) @ b32, 1e-5,
                   f"kaiojit SGEMM ({cfg}) {m}x{n}x{k}")
    n = 72
    a32 = rng.standard_normal((n, n), dtype=np.float32)
    b32 = rng.standard_normal((n, n), dtype=np.float32)
    c = kj.to_device(np.full((n, n), np.nan, np.float32))
    kgemm.numba_doc_launch(c, kj.to_device(a32), kj.to_device(b32))
    _close(c.copy_to_host(), a32.astype(np.float64) @ b32, 1e-5, "kaiojit numba-doc matmul")
    print(f"kaiojit kernels correct at small sizes on the {kj.backend()} backend")


def _close(got, expect, rtol: float, what: str) -> None:
    err = float(np.abs(got - expect).max() / np.abs(expect).max())
    if not err < rtol:
        raise AssertionError(f"{what}: relative error {err:.2e}")


def check_peers(torch, triton_gemm) -> None:
    m, n, k = 200, 136, 72
    for dtype in (torch.bfloat16, torch.float32):
        a = torch.randn(m, k, device="cuda").to(dtype)
        b = torch.randn(k, n, device="cuda").to(dtype)
        expect = a.double().cpu().numpy() @ b.double().cpu().numpy()
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        # kaiojit on torch tensors (zero-copy): the bf16 C path of the benchmark
        if dtype == torch.bfloat16:
            for cfg, kernel in zip(TC_CONFIGS, TC_KERNELS):
                c.fill_(float("nan"))
                tc.matmul(a, b, c, kernel, cfg)
                _close(c.float().cpu().numpy(), expect, 1e-2, f"kaiojit bf16 GEMM ({cfg})")
        if triton_gemm is not None:
            c.fill_(float("nan"))
            triton_gemm.matmul(a, b, c)
            _close(c.float().cpu().numpy(), expect, 1e-2 if dtype == torch.bfloat16 else 1e-5,
                   f"triton matmul {dtype}")


# --- timing ----------------------------------------------------------------------------------------

def time_ms(launch, reps: int) -> float:
    """The median of ``reps`` CUDA-event timings of one launch, after warm-up."""
    return _hopper_gemm.time_ms(launch, reps, inner=1)


tflops = _hopper_gemm.tflops


def resources_of(kernel) -> str:
    sig = kernel.signatures[-1]
    r = ptxas_resources(kernel.compile(sig).ptx, "sm_90")
    spill = (f"{r.spill_store_bytes}+{r.spill_load_bytes} B spills" if r.spills
             else "no spills")
    return f"{r.registers} regs, {r.shared_bytes} B static shared, {r.local_bytes} B local, {spill}"


def bench_bf16(torch, triton_gemm, n: int, rows: list) -> None:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    what = f"bf16 GEMM {n}^3"
    rows.append((what, "cuBLAS", time_ms(lambda: torch.matmul(a, b, out=c), 20)))
    for i, (cfg, kernel) in enumerate(zip(TC_CONFIGS, TC_KERNELS)):
        ms = time_ms(lambda: tc.matmul(a, b, c, kernel, cfg), 20)  # noqa: B023 - timed here
        print(f"  kaiojit bf16 GEMM {n}^3, {cfg}: {ms:.3f} ms, {tflops(n, n, n, ms):.1f} "
              f"TFLOP/s; {resources_of(kernel)}")
        rows.append((what, f"kaiojit #{i}", ms))
    if triton_gemm is not None:
        rows.append((what, "triton", time_ms(lambda: triton_gemm.matmul(a, b, c), 20)))


def bench_sgemm(torch, triton_gemm, n: int, rows: list) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    what = f"fp32 SGEMM {n}^3"
    cublas = time_ms(lambda: torch.matmul(a, b, out=c), 10)
    rows.append((what, "cuBLAS", cublas))
    for i, (cfg, kernel) in enumerate(zip(kgemm.SGEMM_CONFIGS, kgemm.SGEMM_KERNELS)):
        ms = time_ms(lambda: kgemm.sgemm_launch(c, a, b, kernel, cfg), 10)  # noqa: B023
        print(f"  kaiojit SGEMM {n}^3 #{i}, {cfg}: {ms:.3f} ms, {tflops(n, n, n, ms):.1f} "
              f"TFLOP/s, {cublas / ms:.1%} of cuBLAS; {resources_of(kernel)}")
        rows.append((what, f"kaiojit #{i}", ms))
    if triton_gemm is not None:
        rows.append((what, "triton", time_ms(lambda: triton_gemm.matmul(a, b, c), 10)))
    rows.append((f"numba-doc matmul {n}^3", "kaiojit",
                 time_ms(lambda: kgemm.numba_doc_launch(c, a, b), 5)))


def numba_rows(n: int) -> list:
    path = os.environ.get("KAIOJIT_NUMBA_PYTHONPATH")
    if not path:
        print("(no KAIOJIT_NUMBA_PYTHONPATH: numba-cuda left out)")
        return []
    r = subprocess.run([sys.executable, os.path.join(HERE, "_numba_gemm_peer.py"), str(n)],
                       env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        print("numba-cuda peer failed:", r.stderr[-2000:])
        return []
    return [(what, who, ms) for what, who, ms, _ in json.loads(r.stdout.strip().splitlines()[-1])]


def summary(rows: list) -> tuple[list, dict, dict]:
    """The table's rows (the fastest configuration of each kaiojit GEMM under cuBLAS's row,
    standing for all of them), cuBLAS's time of each problem, and that fastest row."""
    best = {what: ms for what, who, ms in rows if who == "cuBLAS"}
    fastest: dict = {}
    for r in rows:
        if r[1].startswith("kaiojit #") and (r[0] not in fastest or r[2] < fastest[r[0]][2]):
            fastest[r[0]] = r
    table = []
    for r in rows:
        if not r[1].startswith("kaiojit #"):
            table.append(r)
            if r[1] == "cuBLAS" and r[0] in fastest:
                f = fastest[r[0]]
                table.append((f[0], f"kaiojit {f[1][8:]}", f[2]))
    return table, best, fastest


def main() -> None:
    if "--hopper" in sys.argv:
        _hopper_gemm.main("--small" in sys.argv)
        return
    check_kaiojit()
    if "--small" in sys.argv or kj.backend() != "cuda":
        _hopper_gemm.main(True)
        return
    import torch
    triton_gemm = _hopper_gemm.triton_peer()
    check_peers(torch, triton_gemm)
    rows: list = []
    bench_bf16(torch, triton_gemm, 8192, rows)
    bench_sgemm(torch, triton_gemm, 4096, rows)
    rows += numba_rows(4096)
    rows, best, fastest = summary(rows)
    numba_doc = {who: ms for what, who, ms in rows if what.startswith("numba-doc")}
    print(f"{'problem':24} {'who':11} {'ms':>8} {'TFLOP/s':>8} {'vs cuBLAS':>9}")
    for what, who, ms in rows:
        n = int(what.split()[-1].split("^")[0])
        ratio = f"{best[what] / ms:8.1%}" if what in best else ""
        print(f"{what:24} {who:11} {ms:8.3f} {tflops(n, n, n, ms):8.1f} {ratio:>9}")
    if len(numba_doc) == 2:
        print(f"numba-doc matmul: kaiojit / numba-cuda time = "
              f"{numba_doc['kaiojit'] / numba_doc['numba-cuda']:.2f}")
    for what, (_, who, _) in fastest.items():
        i = int(who[9:])
        cfg = TC_CONFIGS[i] if what.startswith("bf16") else kgemm.SGEMM_CONFIGS[i]
        kernel = TC_KERNELS[i] if what.startswith("bf16") else kgemm.SGEMM_KERNELS[i]
        print(f"{what}: kaiojit #{i} is {cfg}; {resources_of(kernel)}")
    print(f"kaiojit numba-doc: {resources_of(kgemm.numba_doc_matmul)}")
    print()
    _hopper_gemm.main(False)


if __name__ == "__main__":
    main()
