"""Every PTX the tests produce is assembled with ``ptxas -arch=sm_90``.

An autouse fixture records each kernel compiled for the NVPTX target during a test and, when
the test is done, assembles its PTX (once per distinct text). Without ptxas the check is
skipped with a reason, except under ``CI=true``, where a missing ptxas fails the run.
Imported by ``tests/conftest.py``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

import pytest

from kaiojit.tools.binutils import find_tool

ARCH = "sm_90"
NOT_FOUND = ("ptxas not found (neither on PATH nor through cuda.pathfinder): install a CUDA "
             "toolkit or `pip install nvidia-cuda-nvcc`")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def find_ptxas() -> str | None:
    """ptxas on PATH, else the one cuda.pathfinder finds (e.g. from nvidia-cuda-nvcc)."""
    return find_tool("ptxas")


def require_ptxas() -> str:
    """The ptxas path; skips the calling test without one (fails it under CI=true)."""
    path = find_ptxas()
    if path is None:
        if in_ci():
            pytest.fail(f"CI=true and {NOT_FOUND}")
        pytest.skip(NOT_FOUND)
    return path


_ASSEMBLED: set[str] = set()
STATS = {"assembled": 0, "missing": False}


def assemble(ptx: str, arch: str = ARCH) -> None:
    """Assemble ``ptx`` for ``arch``; raises AssertionError with ptxas's log if it is rejected."""
    ptxas = require_ptxas()
    key = hashlib.sha1(f"{arch}\0{ptx}".encode()).hexdigest()
    if key in _ASSEMBLED:
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        # PTX that calls foreign device code (kj.declare_device) is relocatable: it links
        relocatable = ["-c"] if ".extern .func" in ptx else []
        r = subprocess.run([ptxas, f"-arch={arch}", *relocatable, src, "-o",
                            os.path.join(tmp, "k.cubin")], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"ptxas -arch={arch} rejected the PTX:\n{r.stderr}\n--- PTX ---\n{ptx}")
    _ASSEMBLED.add(key)
    STATS["assembled"] += 1


def _recording(original, produced: list):
    def compile_kernel(*args, **kwargs):
        ck = original(*args, **kwargs)
        if getattr(ck.target, "kind", "") == "nvptx" and ck.ptx:
            # an arch-specific kernel (wgmma: sm_90a) assembles for its own arch
            arch = ck.target.arch if ck.target.arch.endswith("a") else ARCH
            produced.append((ck.ptx, arch))
            if getattr(ck, "coarse", None) is not None:  # compiled here, to be assembled too
                produced.append((ck.coarse.ptx, arch))
        return ck
    return compile_kernel


@pytest.fixture(autouse=True)
def ptxas_check(monkeypatch):
    """Assemble every PTX compiled during the test once it is done."""
    from kaiojit import compiler, dispatcher

    produced: list[str] = []
    original = compiler.compile_kernel
    wrapper = _recording(original, produced)
    monkeypatch.setattr(compiler, "compile_kernel", wrapper)
    if getattr(dispatcher, "compile_kernel", None) is original:
        monkeypatch.setattr(dispatcher, "compile_kernel", wrapper)
    yield produced
    if not produced:
        return
    if find_ptxas() is None:
        STATS["missing"] = True
        if in_ci():
            pytest.fail(f"CI=true and {NOT_FOUND}")
        return
    for ptx, arch in produced:
        assemble(ptx, arch)


def take_refused_for_shared(produced: list) -> int:
    """Take out of ``produced`` (the ``ptxas_check`` fixture's list) the PTX that ptxas refuses
    for using too much shared memory, as the driver did when the test launched it; any other
    refusal still fails the test. Returns how many were taken (none without ptxas)."""
    if find_ptxas() is None:
        return 0
    keep, refused = [], 0
    for ptx, arch in produced:
        try:
            assemble(ptx, arch)
        except AssertionError as e:
            if "uses too much shared data" not in str(e):
                raise
            refused += 1
        else:
            keep.append((ptx, arch))
    produced[:] = keep
    return refused


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if STATS["missing"]:
        terminalreporter.write_line(f"ptxas check SKIPPED: {NOT_FOUND}")
    elif STATS["assembled"]:
        terminalreporter.write_line(
            f"ptxas check: {STATS['assembled']} distinct PTX assembled with -arch={ARCH} "
            f"(sm_90a for arch-specific kernels)")
