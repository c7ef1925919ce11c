"""More of Python's ``math`` in kernels, as numba has it (issue 28): ``exp2``, ``cbrt``,
``remainder``, ``nextafter``, and numba's ``cuda.cbrt``; on the host and in PTX."""

import math

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()


@cuda.jit
def more_math(out, x, y):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = math.exp2(x[i])
        out[i, 1] = math.cbrt(x[i])
        out[i, 2] = math.remainder(x[i], y[i])
        out[i, 3] = math.nextafter(x[i], y[i])
        out[i, 4] = cuda.cbrt(x[i])


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-15), (np.float32, 2e-6)])
def test_more_math(kj_backend, dtype, rtol):
    x = rng.uniform(-5, 5, 40).astype(dtype)
    y = rng.uniform(0.5, 3, 40).astype(dtype)
    out = cuda.to_device(np.full((40, 5), np.nan, dtype))
    more_math[1, 64](out, cuda.to_device(x), cuda.to_device(y))
    got = out.copy_to_host()
    want = np.array([[2.0 ** a, math.cbrt(a), math.remainder(a, b), 0.0, math.cbrt(a)]
                     for a, b in zip(x.astype(float), y.astype(float))])
    want[:, 3] = np.nextafter(x, y)  # in the array's own precision
    np.testing.assert_allclose(got, want.astype(dtype), rtol=rtol, atol=rtol)


def test_more_math_ptx():
    ptx, _ = cuda.compile_ptx(more_math.py_func, "void(float32[:, :], float32[:], float32[:])")
    assert ".entry" in ptx and "call" not in ptx  # libdevice linked in; ptxas checks it
