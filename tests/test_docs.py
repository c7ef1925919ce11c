"""The documentation: every ```python block of docs/*.md and README.md runs (a page's blocks in
order, in one namespace, on the cpu backend unless a GPU is there), and the Sphinx site builds
with warnings as errors. A block preceded by an ``<!-- skip-run -->`` line is a fragment and is
not run; a page whose block imports an optional package that is not installed (torch, cupy) is
skipped."""

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
SKIP_MARK = "<!-- skip-run -->"
OPTIONAL = {"torch", "cupy", "matplotlib", "triton", "numba", "jax"}


def runnable_source(path: str) -> str:
    """The page's runnable python blocks as one script whose line numbers are the page's."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out = [""] * len(lines)
    inside = False
    skip = False
    for i, line in enumerate(lines):
        if not inside and FENCE.match(line):
            inside = True
            skip = i > 0 and lines[i - 1].strip() == SKIP_MARK
        elif inside and line.startswith("```"):
            inside = False
        elif inside and not skip:
            out[i] = line
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("page", PAGES, ids=[os.path.relpath(p, ROOT) for p in PAGES])
def test_code_blocks_run(page, tmp_path, monkeypatch):
    source = runnable_source(page)
    if not source.strip():
        pytest.skip("no python block")
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
