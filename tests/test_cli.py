"""``python -m kaiojit ptx``: one-line errors with the documented exit codes (0 done, 1 compile
error, 2 usage, 3 the file raised on import, 4 a tool missing), and the stage on success."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kaiojit.__main__ import EXIT_COMPILE, EXIT_IMPORT, EXIT_OK, EXIT_TOOL, EXIT_USAGE, main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng()
PREFIX = "python -m kaiojit: error: "

KERNELS = textwrap.dedent("""\
    import kaiojit as kj

    @kj.jit
    def axpy(out, x, a):
        i = kj.grid(1)
        if i < x.size:
            out[i] = a * x[i]

    @kj.jit
    def broken(out):
        out[0] = missing_name
    """)


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return str(path)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    return lines[0][len(PREFIX):]


def test_a_stage_is_printed(capsys, kernel_file):
    code, out, err = run_cli(capsys, "ptx", f"{kernel_file}:axpy", "--sig",
                             "void(float32[:], float32[:], float32)", "--emit", "kir")
    assert (code, err) == (EXIT_OK, "")
    assert out.startswith("kernel axpy(out: float32[:], x: float32[:], a: float32) -> void:")


def test_wrong_arity_is_one_line_and_exit_1(capsys, kernel_file):
    n = int(rng.integers(1, 3))
    sig = "void(" + ", ".join(["float32[:]"] * n) + ")"
    code, out, err = run_cli(capsys, "ptx", f"{kernel_file}:axpy", "--sig", sig)
    assert code == EXIT_COMPILE and out == ""
    assert _one_line(err) == (f"{kernel_file}:axpy --sig {sig!r}: axpy() takes 3 arguments, "
                              f"the signature gives {n}")


def test_unknown_type_and_compile_error(capsys, kernel_file):
    code, _, err = run_cli(capsys, "ptx", f"{kernel_file}:axpy", "--sig", "void(quux, int32)")
    assert code == EXIT_COMPILE and "unknown type 'quux'" in _one_line(err)
    code, _, err = run_cli(capsys, "ptx", f"{kernel_file}:broken", "--sig", "void(int32[:])")
    head, *excerpt = err.splitlines()
    assert code == EXIT_COMPILE
    assert head == f"{PREFIX}{kernel_file}:11:14: name 'missing_name' is not defined", err
    assert excerpt == ["    out[0] = missing_name", "             ^^^^^^^^^^^^"]


@pytest.mark.parametrize("spec,message", [
    ("{file}", "expected FILE.py:KERNEL, got '{file}'"),
    ("{file}x:axpy", "no such file: {file}x"),
    ("{file}:nope", "{file} has no 'nope' (its kernels: axpy, broken)"),
])
def test_usage_errors_are_exit_2(capsys, kernel_file, spec, message):
    code, _, err = run_cli(capsys, "ptx", spec.format(file=kernel_file), "--sig", "void()")
    assert code == EXIT_USAGE and _one_line(err) == message.format(file=kernel_file)


def test_an_old_arch_is_a_usage_error(capsys, kernel_file):
    code, _, err = run_cli(capsys, "ptx", f"{kernel_file}:axpy", "--sig",
                           "void(float32[:], float32[:], float32)", "--arch", "sm_35")
    assert code == EXIT_USAGE and _one_line(err) == ("--arch sm_35: kaiojit compiles for sm_70 "
                                                     "and newer")


def test_a_file_that_raises_is_exit_3(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import kaiojit as kj\n\nvalue = 1 // 0\n")
    code, _, err = run_cli(capsys, "ptx", f"{bad}:k", "--sig", "void()")
    assert code == EXIT_IMPORT
    assert _one_line(err) == f"importing {bad} raised at {bad}:3: ZeroDivisionError: " \
                             "integer division or modulo by zero"


def test_a_missing_tool_is_exit_4(capsys, kernel_file, monkeypatch):
    from kaiojit.tools import sass

    monkeypatch.setattr(sass, "find_tool", lambda name: None)
    code, _, err = run_cli(capsys, "ptx", f"{kernel_file}:axpy", "--sig",
                           "void(float32[:], float32[:], float32)", "--emit", "sass")
    assert code == EXIT_TOOL and _one_line(err).startswith("inspect_sass needs ptxas")


def test_bad_arguments_are_argparses_exit_2(kernel_file):
    r = subprocess.run([sys.executable, "-m", "kaiojit", "ptx", f"{kernel_file}:axpy"],
                       env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert r.stderr.splitlines()[-1] == ("python -m kaiojit ptx: error: the following arguments "
                                         "are required: --sig")
