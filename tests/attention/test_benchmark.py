"""benchmarks/attention.py runs unattended on a GPU machine: its sweep is run here on the cpu
backend, PyTorch's CUDA calls standing in on the CPU (events by the clock, SDPA's math backend
for its GPU ones), so a Python error in it shows before that run. Every row must be timed, each
kaiojit result having passed the benchmark's own check against SDPA's."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

torch = pytest.importorskip("torch")
PATH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "attention.py")


class ClockEvent:
    """torch.cuda.Event on the CPU: ``perf_counter`` at ``record``."""

    def __init__(self, enable_timing: bool = True):
        self.at = 0.0

    def record(self):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end) -> float:
        return (end.at - self.at) * 1e3


@pytest.fixture
def on_cpu_backend():
    """The cpu backend, whatever backend the test run selected: the dry run's tensors are CPU
    tensors (on a GPU machine the cuda backend refuses them). The session's instance, whose
    kernels stay compiled for the other tests."""
    import kaiojit as kj
    from kaiojit.testing import _backend

    previous = kj.set_backend(_backend("cpu"))
    try:
        yield
    finally:
        kj.set_backend(previous)


def test_sweep_dry_run(on_cpu_backend, monkeypatch, capsys):
    from torch.nn import attention as nn_attention
    spec = importlib.util.spec_from_file_location("bench_attention", PATH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(torch.cuda, "Event", ClockEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "cpu")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    randn, generator, sdpa_kernel = torch.randn, torch.Generator, nn_attention.sdpa_kernel
    monkeypatch.setattr(torch, "randn", lambda *a, device=None, **k: randn(*a, **k))
    monkeypatch.setattr(torch, "Generator", lambda device=None: generator())
    monkeypatch.setattr(nn_attention, "sdpa_kernel", lambda backends: sdpa_kernel(
        [nn_attention.SDPBackend.MATH]))
    monkeypatch.setattr(bench, "BATCH", 1)
    monkeypatch.setattr(bench, "HEADS", 2)
    monkeypatch.setattr(bench, "kaiojit_runs", lambda schedules, dtype: schedules)
    bench.sweep([130], [64], [True], "bf16", True, reps=2, schedules=["overlap+pingpong/smem", "serial/smem"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if " fwd " in line or " bwd " in line]
    # Triton's rows need CUDA tensors: where Triton and a GPU are there, they fail on these
    # CPU tensors (elsewhere Triton is not importable and has no row)
    assert not [r for r in rows if "failed" in r and "triton" not in r], out
    # (the two variants are kernels the other tests of this folder compile on the cpu backend)
    for name in ("kaiojit overlap+pingpong/smem", "kaiojit serial/smem", "sdpa flash"):
        assert any(f"fwd {name} " in r and "TFLOP/s" in r for r in rows), out
    assert any("bwd kaiojit " in r and "TFLOP/s" in r for r in rows), out
    assert "fastest kaiojit variant, d=64 causal=True: " in out, out


def test_schedule_smoke_drops_hangs_and_failures(monkeypatch, capsys):
    """The unattended run's guard: each schedule's first launch runs in a child process with a
    time limit; one that hangs or fails is dropped and the schedules after it still run (a
    stand-in child script here: no GPU)."""
    spec = importlib.util.spec_from_file_location("bench_attention", PATH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "SMOKE", (
        "import sys, time\n"
        "assert sys.argv[1] == 'f16'\n"
        "for s in sys.argv[2:]:\n"
        "    print('smoke start', s, flush=True)\n"
        "    if s == 'hangs':\n"
        "        time.sleep(60)\n"
        "    if s == 'fails':\n"
        "        raise SystemExit(1)\n"
        "    print('smoke ok', s, flush=True)\n"))
    ran = bench.kaiojit_runs(["serial", "hangs", "overlap", "fails", "pingpong"], "f16",
                             limit=3.0)
    assert ran == ["serial", "overlap", "pingpong"]
    out = capsys.readouterr().out
    assert "schedule hangs: dropped" in out and "schedule fails: dropped" in out
    assert "did not finish in 3 s" in out
