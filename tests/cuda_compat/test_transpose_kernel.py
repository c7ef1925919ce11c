"""numba's library transpose (``cuda.kernels.transpose.transpose``) and numba's ``.T`` of a
2-D device array, which is a new array the transpose kernel fills (issue 28)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.cuda.kernels.transpose import transpose

rng = np.random.default_rng()


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int16, np.bool_])
def test_transpose_of_any_scalar_dtype_across_tiles(kj_backend, dtype):
    rows, cols = int(rng.integers(1, 80)), int(rng.integers(1, 80))
    x = (rng.standard_normal((rows, cols)) * 50).astype(dtype)
    out = cuda.to_device(np.zeros((cols, rows), dtype) + np.array(7, dtype))  # poisoned
    returned = transpose(cuda.to_device(x), out)
    assert returned is out
    np.testing.assert_array_equal(out.copy_to_host(), x.T)
    new = transpose(cuda.to_device(x))
    assert new.shape == (cols, rows) and cuda.is_cuda_array(new)
    np.testing.assert_array_equal(new.copy_to_host(), x.T)


def test_transpose_of_records_with_array_fields(kj_backend):
    rec = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])
    rows, cols = int(rng.integers(2, 20)), int(rng.integers(2, 20))
    x = np.empty((rows, cols), rec)
    x["i"] = rng.integers(-1000, 1000, (rows, cols))
    x["j"] = rng.standard_normal((rows, cols, 3, 2))
    out = cuda.device_array_like(x.T)
    transpose(cuda.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), x.T)


def test_numbas_T_of_a_2d_array_is_a_new_array(kj_backend):
    a = rng.standard_normal((10, 12))
    d = cuda.to_device(a)
    t = d[::2, ::2].T
    assert t.shape == (6, 5) and t.strides == (40, 8)  # C-contiguous, numba's strides
    np.testing.assert_array_equal(t.copy_to_host(), a[::2, ::2].T)
    t[0, 0] = np.nan  # a copy: the original keeps its value
    assert d.copy_to_host()[0, 0] == a[0, 0]
    row = cuda.to_device(a[0])
    assert row.T.ptr == row.ptr and row.T.shape == (12,)  # another rank: a view (numba refuses)
    like = cuda.devicearray.from_array_like(np.asfortranarray(a))
    assert like.shape == a.shape and like.strides == np.asfortranarray(a).strides
