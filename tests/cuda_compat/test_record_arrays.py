"""Records with array fields (NumPy subarrays, numba's nested arrays) and record scalars as
kernel arguments (numba passes them by reference: the kernel's writes reach the element)."""

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda
from tests.located import assert_located, compile_error

rng = np.random.default_rng()
NESTED = np.dtype([("g", np.int32), ("h", np.float32, (2,)), ("m", np.float64, (3, 2))],
                  align=True)


@cuda.jit
def through_fields(recs, out):
    i = cuda.grid(1)
    if i < recs.size:
        r = recs[i]
        out[i] = r.h[0] * r.h[1] + r.m[2, 1] - r.g
        r.m[0, 0] = r.h.size + r.m.shape[0] * 10  # a view of the record's memory
        r["h"][1] = 0.5


def test_array_fields_read_and_written(kj_backend):
    n = int(rng.integers(3, 40))
    recs = np.zeros(n, NESTED)
    recs["g"] = rng.integers(-50, 50, n)
    recs["h"] = rng.standard_normal((n, 2))
    recs["m"] = rng.standard_normal((n, 3, 2))
    before = recs.copy()
    out = np.full(n, np.nan)
    through_fields[1, 64](recs, out)
    h = before["h"].astype(np.float64)
    np.testing.assert_allclose(out, h[:, 0] * h[:, 1] + before["m"][:, 2, 1] - before["g"],
                               rtol=1e-6)
    assert (recs["m"][:, 0, 0] == 32).all() and (recs["h"][:, 1] == 0.5).all()
    np.testing.assert_array_equal(recs["m"][:, 1:], before["m"][:, 1:])
    assert kj.types.from_dtype(NESTED)[:].dtype.np_dtype == NESTED


@cuda.jit
def set_from(rec, out, value):
    out[0] = rec.h[1] + rec.g
    rec.g = value


def test_record_scalar_argument_is_passed_by_reference(kj_backend):
    recs = np.zeros(4, NESTED)
    recs["g"] = rng.integers(-50, 50, 4)
    recs["h"] = rng.standard_normal((4, 2))
    k = int(rng.integers(4))
    before = recs.copy()
    value = int(rng.integers(100, 200))
    out = np.full(1, np.nan)
    set_from[1, 1](recs[k], out, value)
    assert out[0] == pytest.approx(float(before["h"][k, 1]) + int(before["g"][k]))
    expected = before["g"].copy()
    expected[k] = value
    np.testing.assert_array_equal(recs["g"], expected)
    eager = cuda.jit(cuda.void(kj.types.from_dtype(NESTED), kj.float64[:], kj.int64))(
        set_from.py_func)
    other = np.zeros(1, np.dtype([("g", np.int32)]))[0]
    with pytest.raises(TypeError, match="parameter 'rec'"):
        eager[1, 1](other, out, value)


@cuda.jit
def copy_records(recs, other):
    recs[0] = recs[recs.size - 1]  # a whole record
    recs[1].m = other[0].m  # an array field from a field of its shape


def test_whole_record_and_array_field_assignment(kj_backend):
    recs, other = np.zeros(4, NESTED), np.zeros(1, NESTED)
    for r in (recs, other):
        r["g"] = rng.integers(-50, 50, r.size)
        r["m"] = rng.standard_normal((r.size, 3, 2))
    expected = recs.copy()
    expected[0] = expected[3]
    expected[1]["m"] = other[0]["m"]
    copy_records[1, 1](recs, other)
    np.testing.assert_array_equal(recs, expected)


def test_assigning_an_array_of_other_dimensions_to_an_array_field_is_an_error():
    # an array of the field's dtype and dimensions fills it (test_record_field_fill.py)
    def bad(recs, src):
        recs[0].h = src

    err = compile_error(bad, cuda.void(kj.types.from_dtype(NESTED)[:], kj.float32[:, :]))
    assert_located(err, bad, "recs[0].h = src")
    assert "field 'h' is an array" in str(err)
