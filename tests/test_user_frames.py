"""User-facing errors show the user's frames only: a kernel fault, a launch error and a compile
error leave a launch with no frame of kaiojit's code below it, pytest reports each at the
user's line (not kaiojit/launch/launcher.py), and ``dir(kaiojit)`` lists the whole public API."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.errors import KAIOJIT_DIR, source_position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng()


@kj.jit(debug=True)
def writes_past_the_end(out, k):
    out[kj.grid(1) + k] = 1.0


def _kaiojit_frames(err: BaseException) -> list[str]:
    return [f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(err.__traceback__)
            if f.filename.startswith(KAIOJIT_DIR)]


def test_a_kernel_fault_keeps_one_hidden_entry_frame():
    previous = kj.set_backend("cpu")
    try:
        k = int(rng.integers(1, 8))
        with pytest.raises(kj.KernelError, match=r"index (3[2-9]) is out of bounds") as info:
            writes_past_the_end[1, 32](kj.device_array(32, np.float32), k)
        frames = [f for f in traceback.extract_tb(info.value.__traceback__)]
        inside = [f for f in frames if f.filename.startswith(KAIOJIT_DIR)]
        # the one frame is the entry point that kaiojit.errors.user_facing wraps a launch in
        assert len(inside) == 1 and inside[0].filename.endswith("errors.py")
        assert inside[0].name == "entry_point"
        tb = info.value.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert tb.tb_frame.f_locals.get("__tracebackhide__") is True  # pytest hides it
        with pytest.raises(kj.LaunchError, match="block") as info:
            writes_past_the_end[1, 4096](kj.device_array(32, np.float32), k)
        assert len(_kaiojit_frames(info.value)) == 1
        with pytest.raises(TypeError, match=r"writes_past_the_end\(\): parameter 'out': kaiojit "
                                            r"cannot pass an object of type builtins\.list"
                           ) as info:
            writes_past_the_end[1, 32]([1.0] * 32, k)
        assert len(_kaiojit_frames(info.value)) == 1
    finally:
        kj.set_backend(previous)


def test_pytest_reports_kernel_failures_at_the_users_line(tmp_path):
    k = int(rng.integers(1, 8))
    test_file = tmp_path / "test_users_kernel.py"
    test_file.write_text(textwrap.dedent(f"""\
        import numpy as np
        import kaiojit as kj

        @kj.jit(debug=True)
        def overrun(out, k):
            out[kj.grid(1) + k] = 1.0

        @kj.jit
        def untyped(out):
            out[0] = nowhere

        def test_fault():
            out = kj.device_array(32, np.float32)
            overrun[1, 32](out, {k})

        def test_compile_error():
            untyped[1, 1](kj.device_array(1, np.float32))
        """))
    env = dict(os.environ, KAIOJIT_BACKEND="cpu", PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--no-header", "-rN", str(test_file)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "2 failed" in out, out
    assert "launcher.py" not in out and "dispatcher.py" not in out, out
    assert f"{test_file.name}:14: KernelError" in out, out
    assert f"{test_file.name}:17: TypingError" in out, out
    assert f"{test_file}:10:14: name 'nowhere' is not defined" in out, out


def test_source_position_outside_a_notebook_is_file_line_col():
    line, col = int(rng.integers(1, 500)), int(rng.integers(1, 80))
    assert source_position("/a/b.py", line, col) == f"/a/b.py:{line}:{col}"
    assert source_position("/a/b.py", line) == f"/a/b.py:{line}"


def test_dir_lists_the_lazy_public_names():
    names = dir(kj)
    for name in ("to_device", "device_array", "Stream", "vectorize", "reduce", "autotune",
                 "Config", "occupancy", "syncthreads", "shfl_down_sync", "DeviceArray",
                 "synchronize", "jit", "cg", "atomic"):
        assert name in names, name
    assert all(hasattr(kj, n) for n in names)
    assert not [n for n in names if n.startswith("_")]


def test_one_decorator_strips_kaiojit_frames():
    """Entry points are marked with ``kaiojit.errors.user_facing``; the frame-stripping
    ``raise e.with_traceback(None)`` stands in it, and inline only in ``kernel[...]`` (run at
    every launch, where a wrapper would add a call)."""
    import ast
    from pathlib import Path

    package = Path(KAIOJIT_DIR)
    found = []

    def visit(node: ast.AST, where: str, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, where, child.name)
                continue
            if isinstance(child, ast.Raise) and "with_traceback(None)" in ast.unparse(child):
                found.append(f"{where}:{function}")
            visit(child, where, function)

    for path in sorted(package.rglob("*.py")):
        visit(ast.parse(path.read_text()), str(path.relative_to(package)), "<module>")
    assert sorted(found) == ["dispatcher.py:__getitem__", "errors.py:entry_point"]


def test_user_facing_strips_the_errors_it_is_given():
    from kaiojit.errors import user_facing

    @user_facing(errors=(ValueError,))
    def checks(value: int) -> int:
        if value < 0:
            raise ValueError(f"negative: {value}")
        if value == 0:
            raise KeyError("zero")
        return value * 2

    value = int(rng.integers(1, 100))
    assert checks(value) == 2 * value and checks.__name__ == "checks"
    with pytest.raises(ValueError, match=f"negative: {-value}") as info:
        checks(-value)
    assert not _kaiojit_frames(info.value) or all(
        "errors.py" in f for f in _kaiojit_frames(info.value))
    inner = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "checks" not in inner and info.value.__suppress_context__
    with pytest.raises(KeyError) as info:  # not one of its errors: the traceback is whole
        checks(0)
    assert "checks" in [f.name for f in traceback.extract_tb(info.value.__traceback__)]

    @user_facing
    def fails() -> None:
        raise kj.LaunchError("a launch the user got wrong")

    with pytest.raises(kj.LaunchError) as info:
        fails()
    assert "fails" not in [f.name for f in traceback.extract_tb(info.value.__traceback__)]
