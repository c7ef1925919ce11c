"""assert in kernels: checked under debug=True (a KernelError naming the line, block, thread
and message on the cpu backend; print and trap on the GPU), removed without it, as numba."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import kaiojit as kj
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()


def bounded(x, limit):
    i = kj.grid(1)
    if i < x.size:
        assert x[i] < limit, "x is at the limit"
        x[i] += 1.0


def line_of(fn, snippet: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, t in enumerate(lines) if snippet in t)


def test_failed_assert_is_a_kernel_error_with_the_line(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("the GPU traps (see test_gpu_assert_traps)")
    kernel = kj.jit(debug=True)(bounded)
    n = int(rng.integers(40, 100))
    x = rng.random(n).astype(np.float32)
    bad = int(rng.integers(0, n))
    x[bad] = 7.0
    with pytest.raises(kj.KernelError) as info:
        kernel[(n + 31) // 32, 32](kj.to_device(x), np.float32(5.0))
    where = f"{inspect.getsourcefile(bounded)}:{line_of(bounded, 'assert x[i]')}"
    block, thread = (bad // 32, 0, 0), (bad % 32, 0, 0)
    assert str(info.value).startswith(
        f"kernel 'bounded': assertion failed at {where}, block {block}, thread {thread}: "
        "x is at the limit")
    assert 'assert x[i] < limit, "x is at the limit"' in str(info.value)


def test_passing_asserts_and_no_debug_change_nothing(kj_backend):
    n = 64
    x = rng.random(n).astype(np.float32)
    x[3] = 9.0  # fails the assert, which is not compiled without debug
    for kernel, data in ((kj.jit(bounded), x), (kj.jit(debug=True)(bounded), x.clip(0, 1))):
        d = kj.to_device(data)
        kernel[2, 32](d, np.float32(5.0))
        np.testing.assert_array_equal(d.copy_to_host(), data + 1)
    plain, checked = kj.jit(bounded), kj.jit(debug=True)(bounded)
    sig = "void(float32[::1], float32)"
    assert "trap" not in plain.compile(sig, kj.target.TargetSpec()).ptx
    ptx = checked.compile(sig, kj.target.TargetSpec()).ptx
    assert "trap" in ptx and "vprintf" in ptx  # the message, then the trap
    compile_for_gpu(plain, checked)


ASSERT_SCRIPT = """
import numpy as np
import kaiojit as kj

@kj.jit(debug=True)
def bounded(x, limit):
    i = kj.grid(1)
    if i < x.size:
        assert x[i] < limit, "x is at the limit"

bounded[1, 32](kj.to_device(np.full(32, 9.0, np.float32)), np.float32(5.0))
kj.synchronize()
print("NOT RAISED")
"""


@pytest.mark.gpu
def test_gpu_assert_traps(tmp_path):
    """In a process of its own: a trap poisons the CUDA context."""
    if not kj.is_cuda_available():
        pytest.skip("needs a CUDA device")
    script = tmp_path / "assert_on_gpu.py"
    script.write_text(ASSERT_SCRIPT)
    env = {**os.environ, "KAIOJIT_BACKEND": "cuda", "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert "NOT RAISED" not in r.stdout
    assert "kaiojit.errors.CudaError" in r.stderr, r.stderr


def message_not_literal(x):
    assert x[0] > 0, x[0]


def condition_is_array(x):
    assert x


@pytest.mark.parametrize("fn, snippet, message", [
    (message_not_literal, "x[0]", r"the message of an assert in a kernel must be a string"),
    (condition_is_array, "x", r"cannot be used as a condition"),
])
def test_assert_errors_name_the_line(fn, snippet, message):
    with pytest.raises(kj.TypingError, match=message) as info:
        kj.jit(fn).compile("void(float32[::1])")
    assert_located(info.value, fn, snippet, occurrence=1 if fn is message_not_literal else 0)
