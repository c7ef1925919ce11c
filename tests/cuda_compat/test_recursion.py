"""Self-recursive device functions (numba's self-recursion): with an eager signature given at
decoration, before the function's name is bound (at module level and in a closure), and
without one (the return type from the returns before the call); the errors of recursion
that cannot be typed."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()


@cuda.jit("i8(i8)", device=True)
def fib_declared(n):  # typed at decoration: 'fib_declared' is not bound yet
    if n < 2:
        return n
    return fib_declared(n - 1) + fib_declared(n - 2)


def make_fib_in_closure():
    @cuda.jit("int64(int64)", device=True)
    def fib_inner(n):  # its closure cell is still empty at decoration
        if n < 2:
            return n
        return fib_inner(n - 1) + fib_inner(n - 2)
    return fib_inner


@kj.jit(device=True)
def fib_lazy(n):
    if n < 2:
        return n
    return fib_lazy(n - 1) + fib_lazy(n - 2)


@kj.jit(device=True)
def fill_down(a, i, scale):  # returns nothing, writes its array argument through the recursion
    if i < 0:
        return
    a[i] = i * scale
    fill_down(a, i - 1, scale)


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@pytest.mark.parametrize("fn", [fib_declared, make_fib_in_closure(), fib_lazy],
                         ids=["declared", "closure", "lazy"])
def test_self_recursive_fibonacci(kj_backend, fn):
    @kj.jit
    def kernel(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = fn(x[i])

    x = rng.integers(0, 16, int(rng.integers(5, 40))).astype(np.int64)
    out = kj.to_device(np.full(x.size, -1, np.int64))
    kernel[1, 64](out, kj.to_device(x))
    np.testing.assert_array_equal(out.copy_to_host(), [fib(int(v)) for v in x])
    ptx = compile_for_gpu(kernel)[0]  # a real call: the recursion stays
    assert ptx.count(".func") >= 1 and "call" in ptx
    kir = str(kernel.inspect_kir(kernel.signatures[0]))
    assert kir.count(f"device {fn.__qualname__}(n: int64) -> int64:") == 1  # printed once


def test_a_recursive_function_returning_nothing_writes_its_array(kj_backend):
    @kj.jit
    def kernel(a, scale):
        fill_down(a, a.size - 1, scale)

    n, scale = int(rng.integers(3, 60)), float(rng.uniform(0.5, 4.0))
    a = kj.to_device(np.full(n, np.nan))
    kernel[1, 1](a, scale)
    np.testing.assert_array_equal(a.copy_to_host(), np.arange(n) * scale)


@kj.jit(device=True)
def runaway(x):
    return runaway(x)


def calls_runaway(out):
    out[0] = runaway(1)


@kj.jit(device=True)
def growing(n):
    if n <= 0:
        return None
    return (n, growing(n - 1))


def calls_growing(out):
    growing(100)


@pytest.mark.parametrize("kernel, fn, snippet, words", [
    (calls_runaway, runaway, "runaway(x)",
     (r"runaway\(\) calls itself before any of its returns has a type: cannot type infer "
     r"runaway recursion \(return a value before the call, or declare the function's "
     r"signature\)")),
    (calls_growing, growing, "growing(n - 1)",
     (r"growing\(\): Return type of recursive function does not converge: a call of itself "
     r"takes the type of the returns before it \(None\), and then a tuple cannot hold "
     r"nothing")),
], ids=["runaway", "growing"])
def test_recursion_that_cannot_be_typed_is_a_located_error(kernel, fn, snippet, words):
    with pytest.raises(kj.TypingError, match=words) as e:
        kj.jit(kernel).compile("void(int64[:])")
    assert_located(e.value, fn.py_func, snippet)
