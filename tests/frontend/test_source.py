"""Where kernel source comes from: modules, notebook cells (linecache), and none at all."""

from __future__ import annotations

import inspect
import linecache

import pytest

import kaiojit as kj
from tests.located import assert_no_internals

CELL = '''\
import kaiojit as kj

LIMIT = 3

@kj.jit
def cell_kernel(out, n):
    i = kj.grid(1)
    if i < n and i < LIMIT:
        out[i] = i * 2

def cell_bad(out):
    out[0] = out + "oops"
'''


def run_cell(source: str, filename: str) -> dict:
    """What IPython does with a cell: its source goes into linecache, then it is exec'd."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


@pytest.fixture
def cell():
    filename = "<ipython-input-7-0123456789ab>"
    yield run_cell(CELL, filename), filename
    linecache.cache.pop(filename, None)


def test_kernel_from_a_notebook_cell_compiles(cell):
    ns, _ = cell
    text = ns["cell_kernel"].inspect_kir("void(int32[::1], int32)")
    assert "(i < int64(3))" in text  # LIMIT, a constant of the cell's namespace
    ptx = ns["cell_kernel"].inspect_ptx("void(int32[::1], int32)")
    assert ".entry cell_kernel" in ptx


def test_error_in_a_notebook_cell_is_located_in_the_cell(cell):
    ns, filename = cell
    with pytest.raises(kj.TypingError) as info:
        kj.compile_ptx(ns["cell_bad"], "void(float32[::1])")
    line = CELL.splitlines().index('    out[0] = out + "oops"') + 1
    text = str(info.value)
    assert text.startswith(f"{filename}:{line}:14: ")
    assert text.splitlines()[1].strip() == 'out[0] = out + "oops"'
    assert text.splitlines()[2].strip() == "^" * len('out + "oops"')
    assert_no_internals(info.value)


def test_function_without_source_is_a_clear_error():
    namespace: dict = {"kj": kj}
    exec(compile("def nosrc(out):\n    out[0] = 1\n", "<made>", "exec"), namespace)
    # a code object made by hand (from no string kaiojit saw compiled): no source to read
    made = namespace["nosrc"]
    orphan = type(made)(made.__code__.replace(co_filename="<generated>"), namespace, "nosrc")
    with pytest.raises(kj.CompileError) as info:
        kj.compile_ptx(orphan, "void(float32[::1])")
    message = str(info.value)
    assert "'nosrc'" in message and "source code is not available" in message
    assert "'<generated>'" in message
    assert_no_internals(info.value)


def test_a_builtin_is_rejected_as_a_kernel():
    with pytest.raises(TypeError, match="Python function"):
        kj.jit(len)


def make_closure_kernel(scale):
    def scaled(out, x):
        i = kj.grid(1)
        out[i] = x[i] * scale
    return scaled


def test_closure_variables_are_constants():
    text = kj.jit(make_closure_kernel(3)).inspect_kir("void(float32[::1], float32[::1])")
    assert "(x[i] * float32(3.0))" in text


class Holder:
    @staticmethod
    def indented(out):
        i = kj.grid(1)
        out[i] = out + "x"


def test_indented_source_keeps_file_columns():
    with pytest.raises(kj.TypingError) as info:
        kj.compile_ptx(Holder.indented, "void(float32[::1])")
    lines, first = inspect.getsourcelines(Holder.indented)
    idx = next(i for i, t in enumerate(lines) if 'out + "x"' in t)
    col = lines[idx].index('out + "x"') + 1
    assert str(info.value).startswith(f"{__file__}:{first + idx}:{col}: ")
