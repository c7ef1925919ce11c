"""Python's ``pow(x, y)`` in a kernel is ``x ** y`` for every kind of number, as Python's and
numba's is (issue 28: complex operands were refused and integers came back as floats)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.errors import TypingError

rng = np.random.default_rng()


@cuda.jit
def pows(rc, xc, yc, ri, xi, yi, rf, xf, yf):
    i = cuda.grid(1)
    if i < rc.size:
        rc[i] = pow(xc[i], yc[i])
        ri[i] = pow(xi[i], yi[i])
        rf[i] = pow(xf[i], yf[i])


def modular_pow(out):
    out[0] = pow(3, 4, 5)


def test_pow_of_complex_integers_and_floats(kj_backend):
    n = 16
    xc = rng.uniform(-2, 2, n) + 1j * rng.uniform(-2, 2, n)
    yc = rng.uniform(-2, 2, n) + 1j * rng.uniform(-2, 2, n)
    xi = rng.integers(-9, 9, n)
    yi = rng.integers(0, 12, n)
    xf = rng.uniform(0.1, 3, n)
    yf = rng.uniform(-3, 3, n)
    outs = [cuda.to_device(np.full(n, np.nan + 0j)), cuda.to_device(np.full(n, -7, np.int64)),
            cuda.to_device(np.full(n, np.nan))]
    ins = [cuda.to_device(v) for v in (xc, yc, xi, yi, xf, yf)]
    pows[1, n](outs[0], ins[0], ins[1], outs[1], ins[2], ins[3], outs[2], ins[4], ins[5])
    np.testing.assert_allclose(outs[0].copy_to_host(), xc ** yc, rtol=1e-13)
    np.testing.assert_array_equal(outs[1].copy_to_host(), xi ** yi)  # exact: an integer
    np.testing.assert_allclose(outs[2].copy_to_host(), xf ** yf, rtol=1e-15)


def test_three_argument_pow_is_refused_at_its_call():
    with pytest.raises(TypingError, match=r"pow\(\) takes 2 arguments, got 3") as info:
        cuda.jit("void(int64[::1])")(modular_pow)
    line = modular_pow.__code__.co_firstlineno + 1
    assert f"test_builtin_pow.py:{line}:14" in str(info.value)
