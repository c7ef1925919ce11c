"""Kernels built by ``exec()`` from a string compile from that string (numba compiles them;
numba's own tests build kernels that way), and their errors point into it."""

import textwrap

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda

rng = np.random.default_rng()

KERNELS = textwrap.dedent("""
    def scale(out, x, factor):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * factor + OFFSET

    @cuda.jit(device=True)
    def twice(v):
        return 2 * v

    def outer(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = twice(x[i])

    def broken(out):
        i = cuda.grid(1)
        out[i] = undefined_name + 1
""")


def _built(offset: float) -> dict:
    scope: dict = {"cuda": cuda, "OFFSET": offset}
    exec(KERNELS, scope)  # noqa: S102 - the case under test
    return scope


def test_exec_built_kernel_runs(kj_backend):
    offset = float(rng.uniform(1, 2))
    kernel = cuda.jit(_built(offset)["scale"])
    n = int(rng.integers(10, 100))
    x = rng.standard_normal(n)
    out = cuda.to_device(np.full(n, np.nan))
    factor = float(rng.uniform(-3, 3))
    kernel[1, 128](out, cuda.to_device(x), factor)
    np.testing.assert_allclose(out.copy_to_host(), x * factor + offset, rtol=1e-12)  # FMA


def test_exec_built_kernel_calls_exec_built_device_function(kj_backend):
    kernel = kj.jit(_built(0.0)["outer"])
    n = int(rng.integers(10, 100))
    x = rng.standard_normal(n).astype(np.float32)
    out = kj.to_device(np.full(n, np.nan, np.float32))
    kernel[1, 128](out, kj.to_device(x))
    np.testing.assert_array_equal(out.copy_to_host(), 2 * x)


def test_exec_built_kernel_error_names_its_string_line():
    with pytest.raises(kj.TypingError) as info:
        kj.compile_ptx(_built(0.0)["broken"], "void(float32[:])")
    lines = KERNELS.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if "undefined_name" in t)
    col = lines[line - 1].index("undefined_name") + 1
    head, src, caret = str(info.value).split("\n")
    assert head.startswith(f"<string>:{line}:{col}: name 'undefined_name' is not defined")
    assert src.strip() == lines[line - 1].strip()
    assert src[caret.index("^"):].startswith("undefined_name")


def test_eval_built_lambda_reduces(kj_backend):
    add = eval("lambda a, b: a + b")
    x = rng.integers(-1000, 1000, int(rng.integers(10, 500))).astype(np.int64)
    assert kj.reduce(add)(x) == x.sum()


def test_code_without_source_keeps_the_clear_error():
    scope: dict = {}
    exec(compile(KERNELS, "<built>", "exec"), {"cuda": cuda, "OFFSET": 0.0}, scope)  # noqa: S102
    fn = scope["scale"]
    # a function whose code object was made by hand (no string ever compiled): no source
    orphan = type(fn)(fn.__code__.replace(co_filename="<orphan>", co_firstlineno=1),
                      fn.__globals__, "orphan")
    with pytest.raises(kj.CompileError, match="its source code is not available"):
        kj.compile_ptx(orphan, "void(float64[:], float64[:], float64)")


def test_a_string_executed_twice_keeps_its_source_when_the_first_functions_die(kj_backend):
    """Code objects compare equal by content: the second exec of one string must not lose its
    source when the functions of the first exec are collected."""
    import gc

    first = _built(0.0)
    second = _built(0.0)
    assert first["outer"].__code__ == second["outer"].__code__
    del first
    gc.collect()
    kernel = kj.jit(second["outer"])
    n = int(rng.integers(10, 100))
    x = rng.standard_normal(n).astype(np.float32)
    out = kj.to_device(np.full(n, np.nan, np.float32))
    kernel[1, 128](out, kj.to_device(x))
    np.testing.assert_array_equal(out.copy_to_host(), 2 * x)
