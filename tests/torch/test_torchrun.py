"""A data-parallel training step under ``torchrun --nproc_per_node=2`` (gloo, CPU tensors, the
cpu backend): kaiojit's RMSNorm ops forward and backward inside ``torch.compile``, gradients
all-reduced, parameters equal to plain PyTorch's on the whole batch; the ranks share one
kaiojit cache directory: local rank 0 compiles, rank 1 loads every kernel, and a kernel that
both compile at once leaves a whole cache entry (``examples/torch_ddp.py``)."""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from kaiojit import diskcache
from tests.torch.torch_examples import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_data_parallel_step_under_torchrun(tmp_path: Path, monkeypatch):
    cache = tmp_path / "cache"
    env = dict(os.environ, KAIOJIT_BACKEND="cpu", KAIOJIT_CACHE_DIR=str(cache),
               OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               f"--master_port={_free_port()}", str(ROOT / "examples" / "torch_ddp.py"),
               "--steps=2", "--backend=aot_eager"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=540,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reports = {}
    # the ranks share the pipe: one's report may land before the other's newline
    for found in re.finditer(r"rank \d+: (\{[^{}]*\})", done.stdout):
        report = ast.literal_eval(found.group(1))
        reports[report["rank"]] = report
    assert sorted(reports) == [0, 1]
    for report in reports.values():
        assert report["worst"] < 1e-5 and len(report["losses"]) == 2
        assert report["raced_ok"]
    assert reports[0]["losses"] != reports[1]["losses"]  # each rank trained on its own shard
    assert sorted(reports[0]["compiled"]) == ["rmsnorm_dw_kernel", "rmsnorm_dx_kernel",
                                              "rmsnorm_forward_kernel"]
    assert reports[1]["compiled"] == []  # every kernel came from rank 0's cache entries
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(cache))
    entries = sorted(cache.rglob("*.kjc"))
    assert len(entries) == 4  # three RMSNorm kernels and the racing one, each written whole
    for entry in entries:  # each kernel of each file whole: its digest holds
        found = diskcache._kernels_file(entry.stem)
        assert found is not None, entry
        _, meta, rest = found
        assert meta["kernels"], entry
        assert all(diskcache._kernel_json(rest, k) is not None for k in meta["kernels"]), entry
