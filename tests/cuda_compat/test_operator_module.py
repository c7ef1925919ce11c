"""Python's ``operator`` functions in kernels (issue 28): each is the expression it names,
called directly, through a closure variable, or passed to a device function."""

import operator

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()


@cuda.jit(device=True)
def apply2(f, a, b):
    return f(a, b)


@cuda.jit
def operators(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = operator.add(x[i], y[i])
        out[i, 1] = apply2(operator.mul, x[i], y[i])
        out[i, 2] = operator.truediv(x[i], y[i])
        out[i, 3] = operator.floordiv(x[i], y[i])
        out[i, 4] = operator.mod(x[i], y[i])
        out[i, 5] = apply2(operator.lt, x[i], y[i])
        out[i, 6] = operator.neg(x[i])
        out[i, 7] = apply2(operator.pow, x[i], 2)


def test_operator_functions(kj_backend):
    x = rng.uniform(-10, 10, 40)
    y = rng.uniform(0.5, 3, 40)
    out = cuda.to_device(np.full((40, 8), np.nan))
    operators[1, 64](cuda.to_device(x), cuda.to_device(y), out)
    want = np.stack([x + y, x * y, x / y, x // y, x % y, x < y, -x, x**2], axis=1)
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-15)


def make_kernel(op):
    @cuda.jit
    def kernel(a, b, out):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = op(a[i], b[i])
    return kernel


@pytest.mark.parametrize("op", [operator.sub, operator.xor, operator.rshift, operator.ge])
def test_operator_from_a_closure(kj_backend, op):
    a = rng.integers(0, 1 << 20, 40)
    b = rng.integers(0, 16, 40)
    out = cuda.to_device(np.full(40, -1, np.int64))
    make_kernel(op)[1, 64](cuda.to_device(a), cuda.to_device(b), out)
    np.testing.assert_array_equal(out.copy_to_host(), op(a, b).astype(np.int64))


@cuda.jit
def wrong_arity(out):
    out[0] = operator.add(1.0)


def test_operator_arity_is_located():
    with pytest.raises(Exception) as info:
        wrong_arity[1, 1](np.zeros(1))
    line = wrong_arity.py_func.__code__.co_firstlineno + 2
    assert "operator.add() takes 2 positional arguments" in str(info.value)
    assert f"test_operator_module.py:{line}:" in str(info.value)
