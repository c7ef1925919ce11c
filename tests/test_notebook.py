"""The first hour in a notebook, run for real through nbclient and an IPython kernel: the
README's first example, an inspection, a compile error, a kernel fault, a print from a kernel and
an autotune, with assertions on every cell's outputs (issue 30's "done when")."""

from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSI = re.compile(r"\x1b\[[0-9;]*m")
rng = np.random.default_rng()

README_EXAMPLE = """\
import numpy as np
import kaiojit as kj

@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]

n = 1 << 20
x = kj.to_device(np.random.rand(n).astype(np.float32))
y = kj.to_device(np.random.rand(n).astype(np.float32))
out = kj.device_array(n, np.float32)
saxpy[(n + 255) // 256, 256](out, x, y, np.float32(2.0), np.int32(n))
print(out.copy_to_host()[:4])
print("matches:", np.allclose(out.copy_to_host(), 2 * x.copy_to_host() + y.copy_to_host()))
"""

COMPILE_ERROR = """\
@kj.jit
def broken(out, x):
    i = kj.grid(1)
    # the name below was never defined
    out[i] = x[i] + {name}
broken[1, 32](out, x)
"""

KERNEL_FAULT = """\
@kj.jit(debug=True)
def faulty(out, k):
    i = kj.grid(1)
    out[i + k] = 1.0
faulty[1, 32](kj.device_array(32, np.float32), {k})
"""

KERNEL_PRINT = """\
@kj.jit
def hello(token):
    if kj.threadIdx.x == 0:
        print("hello from block", kj.blockIdx.x, "token", token)
hello[{blocks}, 32](np.int32({token}))
"""

AUTOTUNE = """\
kj.set_log_level("INFO")  # progress: each config tried and the best so far
@kj.autotune(configs=[kj.Config(block=b, grid=lambda a, b=b: ((a["n"] + b - 1) // b,))
                      for b in (64, 128, 256)], key=["n"])
@kj.jit
def double(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = 2 * x[i]

small = kj.to_device(np.arange({n}, dtype=np.float32))
doubled = kj.device_array({n}, np.float32)
double(doubled, small, np.int32({n}))
print("best:", double.chosen[next(iter(double.chosen))].block)
print("doubled:", np.array_equal(doubled.copy_to_host(), 2 * np.arange({n}, dtype=np.float32)))
"""


COMPARISON = """\
from kaiojit import bench
table = bench.Comparison.from_autotune(double)
table.plot()
table
"""


def _errors(cell) -> list:
    return [o for o in cell.outputs if o.output_type == "error"]


def _stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def _assert_only_user_frames(error, cell_number: int, line: int) -> None:
    text = ANSI.sub("", "\n".join(error.traceback))
    assert "kaiojit" + os.sep not in text and "launcher.py" not in text, text
    frames = re.findall(r"^Cell In\[(\d+)\], line (\d+)", text, re.M)
    assert frames[-1] == (str(cell_number), str(line)), text


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    name = f"undefined_{rng.integers(1000, 9999)}"
    k = int(rng.integers(1, 30))
    blocks, token = int(rng.integers(2, 5)), int(rng.integers(0, 1 << 30))
    n = int(rng.integers(1000, 5000))
    cells = [README_EXAMPLE, "saxpy.inspect_ptx(saxpy.signatures[0])",
             COMPILE_ERROR.format(name=name), KERNEL_FAULT.format(k=k),
             KERNEL_PRINT.format(blocks=blocks, token=token), AUTOTUNE.format(n=n)]
    if importlib.util.find_spec("matplotlib") is not None:
        cells.append(COMPARISON)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    env = {"KAIOJIT_BACKEND": "cpu", "KAIOJIT_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}
    old = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": ROOT}}).execute()
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return nb, {"name": name, "k": k, "blocks": blocks, "token": token, "n": n}


def test_readme_example_runs(notebook):
    nb, _ = notebook
    cell = nb.cells[0]
    assert not _errors(cell)
    first, second = _stdout(cell).splitlines()
    assert len(first.strip("[]").split()) == 4 and second == "matches: True"


def test_inspection_is_highlighted_without_errors_under_resources(notebook):
    nb, _ = notebook
    (result,) = [o for o in nb.cells[1].outputs if o.output_type == "execute_result"]
    html, plain = result.data["text/html"], result.data["text/plain"]
    assert 'class="err"' not in html and "border: 1px solid #FF0000" not in html
    assert "monospace" in html and "<b>kernel</b> saxpy(" in html and "<b>target</b> sm_90" in html
    assert ".entry saxpy" in plain and not plain.startswith("'")  # the text, not its repr
    assert "\\n" not in plain.splitlines()[0]


def test_compile_error_names_the_cell(notebook):
    nb, facts = notebook
    (error,) = _errors(nb.cells[2])
    source = nb.cells[2].source.splitlines()
    col = source[4].index(facts["name"]) + 1
    assert error.ename == "TypingError"
    assert error.evalue.startswith(f"Cell In[3], line 5, column {col}: name {facts['name']!r} "
                                   "is not defined"), error.evalue
    assert "ipykernel_" not in error.evalue
    _assert_only_user_frames(error, 3, 6)


def test_kernel_fault_names_the_cell_and_only_user_frames(notebook):
    nb, facts = notebook
    (error,) = _errors(nb.cells[3])
    assert error.ename == "KernelError"
    found = re.search(r"index (\d+) is out of bounds .* at Cell In\[4\], line 4, "
                      r"block \(0, 0, 0\), thread \((\d+), 0, 0\)", error.evalue)
    assert found, error.evalue
    index, thread = int(found.group(1)), int(found.group(2))
    assert 32 <= index <= 31 + facts["k"] and thread == index - facts["k"]
    _assert_only_user_frames(error, 4, 5)


def test_kernel_print_reaches_the_cell(notebook):
    nb, facts = notebook
    cell = nb.cells[4]
    assert not _errors(cell)
    lines = sorted(_stdout(cell).splitlines())
    assert lines == [f"hello from block {b} token {facts['token']}"
                     for b in range(facts["blocks"])]


def test_autotune_chooses_and_computes(notebook):
    nb, _ = notebook
    cell = nb.cells[5]
    assert not _errors(cell), [e.evalue for e in _errors(cell)]
    out = _stdout(cell)
    best = re.search(r"^best: (\d+)$", out, re.M)
    assert best and int(best.group(1)) in (64, 128, 256)
    assert "doubled: True" in out
    progress = [ln for ln in "".join(o.text for o in cell.outputs if o.output_type == "stream"
                                     and o.name == "stderr").splitlines() if "autotune" in ln]
    assert [re.search(r"config (\d)/3", ln).group(1) for ln in progress] == ["1", "2", "3"]
    assert all("best so far" in ln for ln in progress)


def test_an_autotuners_configs_as_a_table_and_a_plot(notebook):
    nb, _ = notebook
    if len(nb.cells) < 7:
        pytest.skip("needs matplotlib")
    cell = nb.cells[6]
    assert not _errors(cell), [e.evalue for e in _errors(cell)]
    kinds = {kind for o in cell.outputs for kind in getattr(o, "data", {})}
    assert "image/png" in kinds  # the bar plot, drawn by the inline backend
    (table,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    html = table.data["text/html"]
    assert html.count("<tr>") == 4 and "kj.autotune: " in html and "Config(block=64" in html
