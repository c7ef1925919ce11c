"""Tuples and named tuples as kernel arguments (issue 28; numba passes them): passed flat, one
parameter per item (a nested tuple's items in order, an array's pointer and extents), read by
index, by ``len`` and, for a named tuple, by field name. NumPy arrays inside a tuple are
copied in and out as NumPy arguments are."""

from collections import namedtuple

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as T

rng = np.random.default_rng()
Point = namedtuple("Point", ("x", "y", "w"))


def test_nested_tuples_of_scalars_and_arrays(kj_backend):
    n = int(rng.integers(2, 30))
    weights = rng.standard_normal(n)
    written = np.full(n, np.nan)
    scale, shift = int(rng.integers(2, 9)), float(rng.standard_normal())

    @kj.jit
    def combine(out, x):
        i = kj.grid(1)
        if i < out.size:
            out[i] = x[0] * x[1][0][i] + x[1][1] + len(x[2]) + len(x)
            x[3][i] = x[1][0][i] - x[0]

    out = kj.to_device(np.full(n, np.nan))
    with pytest.warns(kj.PerformanceWarning, match=r"parameter 'x\[3\]'"):
        combine[1, 32](out, (scale, (kj.to_device(weights), shift), (), written))
    np.testing.assert_allclose(out.copy_to_host(), scale * weights + shift + 0 + 4)
    np.testing.assert_array_equal(written, weights - scale)  # copied back after the launch


def test_named_tuples_are_read_by_field_and_by_index(kj_backend):
    p = Point(int(rng.integers(1, 100)), int(rng.integers(1, 100)), float(rng.standard_normal()))

    @kj.jit
    def read(ints, floats, q):
        ints[0] = q.x
        ints[1] = q[1]
        ints[2] = len(q)
        floats[0] = q.w

    ints, floats = kj.to_device(np.full(3, -1, np.int64)), kj.to_device(np.full(1, np.nan))
    read[1, 1](ints, floats, p)
    assert ints.copy_to_host().tolist() == [p.x, p.y, 3]
    assert floats.copy_to_host()[0] == p.w
    assert str(kj.runtime.typeof(p)) == "Point(x: int64, y: int64, w: float64)"


def test_an_item_kaiojit_cannot_pass_is_named(kj_backend):
    @kj.jit
    def first(out, x):
        out[0] = x[0]

    with pytest.raises(TypeError, match=r"parameter 'x': kaiojit cannot pass an object of "
                                        r"type builtins\.str"):
        first[1, 1](kj.to_device(np.full(1, np.nan)), (1.0, "two"))


def test_a_tuple_parameter_compiles_to_flat_ptx_parameters():
    def total(out, x):
        out[0] = x[0] + x[1][0] + x[2][1]

    sig = T.Signature((T.ArrayType(T.float64, 1, "C"),
                       T.TupleType((T.int32, T.TupleType((T.float32,)),
                                    T.ArrayType(T.float64, 1, "A")))))
    ptx = kj.compile_ptx(total, sig)
    entry = ptx[ptx.index(".entry"):ptx.index(")", ptx.index(".entry"))]
    # out: pointer and extent; x: int32, float32, then the array's pointer, extent and stride
    assert entry.count(".param") == 2 + 1 + 1 + 3
    assert ".param .f32" in entry and ".param .u32" in entry
