"""``r.h = a`` / ``r['h'] = a`` of a record's array field from an array of its dtype and
dimensions: the field's elements from ``a``'s, read through ``a``'s strides (numba's copy
into a nested array; issue 28: only a field of the same shape could be assigned)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit import types as T
from kaiojit.errors import UnsupportedError

rng = np.random.default_rng()
ONE_D = np.dtype([("k", np.float32), ("array1", np.int16, (3,))], align=True)
TWO_D = np.dtype([("k", np.int8), ("array2", np.float64, (3, 2))])  # packed: offset 1


def fill_1d(recs, src):
    i = cuda.grid(1)
    if i < recs.size:
        recs[i]["array1"] = src[i]


def fill_2d(rec, src):
    rec.array2 = src


def fill_wrong_dtype(rec, src):
    rec.array2 = src


def test_fill_1d_fields_from_rows(kj_backend):
    n = int(rng.integers(3, 20))
    recs = np.zeros(n, ONE_D)
    recs["k"] = rng.standard_normal(n)
    src = rng.integers(-300, 300, (n, 3)).astype(np.int16)
    d = cuda.to_device(recs)
    cuda.jit(fill_1d)[1, 32](d, cuda.to_device(src))
    got = d.copy_to_host()
    np.testing.assert_array_equal(got["array1"], src)
    np.testing.assert_array_equal(got["k"], recs["k"])  # the other field untouched


def test_fill_2d_field_from_a_strided_array(kj_backend):
    recs = np.zeros(2, TWO_D)
    recs["k"] = rng.integers(-100, 100, 2)
    src = rng.standard_normal((2, 3))  # its transpose: an F-ordered (3, 2) view
    cuda.jit(fill_2d)[1, 1](recs[1], src.T)
    np.testing.assert_array_equal(recs[1]["array2"], src.T)
    np.testing.assert_array_equal(recs[0]["array2"], np.zeros((3, 2)))


def test_fill_assembles_for_the_gpu():
    ptx, _ = cuda.compile_ptx(fill_2d, (T.from_dtype(TWO_D), T.float64[:, :]))
    assert ".visible .entry" in ptx


def test_fill_from_another_dtype_is_refused_at_the_assignment():
    with pytest.raises(UnsupportedError, match="an array of its dtype and dimensions") as info:
        cuda.jit((T.from_dtype(TWO_D), T.float32[:, :]))(fill_wrong_dtype)
    line = fill_wrong_dtype.__code__.co_firstlineno + 1
    assert f"test_record_field_fill.py:{line}:5:" in str(info.value)
