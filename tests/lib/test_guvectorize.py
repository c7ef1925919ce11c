"""kj.guvectorize (numba's cuda.guvectorize): generalized ufuncs from core functions, against
NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda, float32, float64, int32, void
from tests.lib.conftest import compile_for_gpu

rng = np.random.default_rng()


@kj.guvectorize([void(float32[:, :], float32[:, :], float32[:, :]),
                 void(float64[:, :], float64[:, :], float64[:, :])], "(m,n),(n,p)->(m,p)")
def matmul(a, b, c):
    m, n = a.shape
    p = b.shape[1]
    for i in range(m):
        for j in range(p):
            acc = 0
            for k in range(n):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc


@cuda.guvectorize(["void(float32, float32[:], float32[:], float32[:])"], "(),(t),(t)->(t)",
                  target="cuda")
def saxpy(a, x, y, out):
    for i in range(out.shape[0]):
        out[i] = a * x[i] + y[i]


@kj.guvectorize([(int32[:], int32[:], float64[:])], "(n)->(),()")
def sum_and_mean(x, total, mean):
    s = 0
    for i in range(x.shape[0]):
        s += x[i]
    total[0] = s
    mean[0] = s / x.shape[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_broadcasts_loop_dimensions(backend, dtype):
    a = rng.standard_normal((3, int(rng.integers(2, 6)), 4, 5)).astype(dtype)
    b = rng.standard_normal((5, 2)).astype(dtype)  # no loop dimensions: broadcast
    got = matmul(a, b)
    assert got.shape == a.shape[:2] + (4, 2) and got.dtype == dtype
    np.testing.assert_allclose(got, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-12)
    compile_for_gpu(*matmul._kernels.values())


def test_device_operands_and_out(backend):
    a = rng.standard_normal((7, 3, 4)).astype(np.float32)
    b = rng.standard_normal((7, 4, 2)).astype(np.float32)
    out = kj.to_device(np.full((7, 3, 2), np.nan, np.float32))
    returned = matmul(kj.to_device(a), kj.to_device(b), out=out)
    assert returned is out
    np.testing.assert_allclose(out.copy_to_host(), a @ b, rtol=1e-5)


def test_scalar_core_and_host_out(backend):
    a = np.float32(rng.uniform(1, 3))
    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.standard_normal((5, 6)).astype(np.float32)
    # the GPU contracts a * x + y into one fma: one rounding of the product fewer, so a result
    # near zero may differ by an ulp of the product, not of the result (atol)
    np.testing.assert_allclose(saxpy(a, x, y), a * x + y, rtol=1e-6, atol=1e-6)
    per_row = rng.standard_normal(5).astype(np.float32)  # a () core with loop dimensions
    out = np.full((5, 6), np.nan, np.float32)
    assert saxpy(per_row, x, y, out) is out
    np.testing.assert_allclose(out, per_row[:, None] * x + y, rtol=1e-6, atol=1e-6)


def test_several_outputs_and_scalar_outputs(backend):
    x = rng.integers(-100, 100, (int(rng.integers(2, 20)), 9)).astype(np.int32)
    total, mean = sum_and_mean(x)
    np.testing.assert_array_equal(total, x.sum(axis=1))
    np.testing.assert_allclose(mean, x.mean(axis=1), rtol=1e-12)


def test_bad_calls_are_named():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"accepts 2 positional arguments or 3 .* Got 1 "
                                        r"positional argument\."):
        matmul(x)
    with pytest.raises(ValueError, match="both positional and keyword"):
        matmul(x, x.T, x, out=x)
    with pytest.raises(ValueError, match="dimension 'n' is 3 and 4"):
        matmul(x, np.ones((4, 2), np.float32))
    with pytest.raises(TypeError, match="cannot return values: .* specifies int32 return type"):
        kj.guvectorize([int32(int32[:], int32[:])], "(m)->(m)")(lambda x, y: None)
    with pytest.raises(TypeError, match="target options are not supported: 'what'"):
        kj.guvectorize([void(int32[:], int32[:])], "(m)->(m)", what=1)
    with pytest.raises(ValueError, match="gufunc layout"):
        kj.guvectorize([void(int32[:], int32[:])], "(m)(m)")
