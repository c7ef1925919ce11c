"""The documentation: every ```python block of docs/*.md and README.md runs (a page's blocks in
order, in one namespace, on the cpu backend unless a GPU is there), and the Sphinx site builds
with warnings as errors. A block preceded by an ``<!-- skip-run -->`` line is a fragment and is
not run (the reason goes next to the marker); one preceded by ``<!-- run: gpu -->`` needs a GPU
(CUDA graphs) and runs, with the rest of its page, in a ``gpu`` test only; a page whose block
imports an optional package that is not installed (torch, cupy) is skipped."""

from __future__ import annotations

import glob
import os
import re
import runpy
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
FENCE = re.compile(r"^```python\s*$")
SKIP_MARK = "<!-- skip-run"
GPU_MARK = "<!-- run: gpu -->"
OPTIONAL = {"torch", "cupy", "matplotlib", "triton", "numba", "jax"}


def runnable_source(path: str, gpu: bool = False) -> str:
    """The page's runnable python blocks as one script whose line numbers are the page's (with
    ``gpu``, its GPU-only blocks too)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out = [""] * len(lines)
    inside = False
    skip = False
    for i, line in enumerate(lines):
        if not inside and FENCE.match(line):
            inside = True
            mark = lines[i - 1].strip() if i > 0 else ""
            skip = mark.startswith(SKIP_MARK) or (mark == GPU_MARK and not gpu)
        elif inside and line.startswith("```"):
            inside = False
        elif inside and not skip:
            out[i] = line
    return "\n".join(out) + "\n"


def _run_page(page: str, source: str, tmp_path, monkeypatch) -> None:
    script = tmp_path / (os.path.splitext(os.path.basename(page))[0] + "_md.py")
    script.write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path / "cache"))
    try:
        runpy.run_path(str(script), run_name="__docs__")
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"needs {e.name}")
        raise
    finally:
        import kaiojit as kj

        kj.set_log_level("OFF")


@pytest.mark.parametrize("page", PAGES, ids=[os.path.relpath(p, ROOT) for p in PAGES])
def test_code_blocks_run(page, tmp_path, monkeypatch):
    source = runnable_source(page)
    if not source.strip():
        pytest.skip("no python block")
    _run_page(page, source, tmp_path, monkeypatch)


GPU_PAGES = [p for p in PAGES if GPU_MARK in open(p, encoding="utf-8").read()]


@pytest.mark.gpu
@pytest.mark.parametrize("page", GPU_PAGES, ids=[os.path.relpath(p, ROOT) for p in GPU_PAGES])
def test_gpu_code_blocks_run(page, tmp_path, monkeypatch):
    """The pages with GPU-only blocks, run whole on a GPU."""
    _run_page(page, runnable_source(page, gpu=True), tmp_path, monkeypatch)


def test_no_fragment_is_skipped_without_a_reason():
    """A ``<!-- skip-run -->`` marker says why (``<!-- skip-run: a shell command -->``)."""
    for page in PAGES:
        for n, line in enumerate(open(page, encoding="utf-8"), 1):
            if line.strip().startswith(SKIP_MARK):
                assert line.strip() not in ("<!-- skip-run -->", "<!-- skip-run: -->"), \
                    f"{os.path.relpath(page, ROOT)}:{n}: give the reason the block cannot run"
    assert GPU_PAGES, "the CUDA-graph block of docs/torch.md is marked <!-- run: gpu -->"
    for page in GPU_PAGES:  # here, without a GPU: the GPU-only blocks at least compile
        compile(runnable_source(page, gpu=True), page, "exec")


def test_the_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                        "html", os.path.join(ROOT, "docs"), str(tmp_path / "site")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    for page in ("getting-started", "language", "launching", "inspection", "testing",
                 "performance", "api", "semantics", "benchmarks", "cooperative", "cli"):
        assert f'href="{page}.html"' in index, page
    api = (tmp_path / "site" / "api.html").read_text()
    assert 'id="kaiojit.jit"' in api and 'id="kaiojit.bench.do_bench"' in api
