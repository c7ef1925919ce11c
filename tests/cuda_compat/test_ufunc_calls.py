"""NumPy ufuncs called with an output array in a kernel (numba's array expressions): a loop
over the output in the calling thread, NumPy's broadcasting and NaN and ordering rules."""

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()


@kj.jit
def elementwise(a, b, s, o_sin, o_gt, o_max, o_fmin, o_xor, o_log2, o_and):
    np.sin(a, o_sin)
    np.greater(a, b, o_gt)  # b of fewer dimensions: broadcast
    np.maximum(a, s, out=o_max)  # a scalar operand
    np.fmin(a, b, o_fmin)
    np.logical_xor(a, b, o_xor)
    np.log2(a, o_log2)
    np.bitwise_and(np.int64(7), np.int64(12), o_and)


def test_ufuncs_with_outputs(kj_backend):
    rows = int(rng.integers(1, 5))
    a = rng.uniform(0.1, 2.0, (rows, 4))
    b = rng.uniform(0.1, 2.0, 4)
    a[0, 1], b[2] = np.nan, np.nan
    s = float(rng.uniform(0.5, 1.5))
    outs = [np.full((rows, 4), np.nan), np.zeros((rows, 4), bool), np.full((rows, 4), np.nan),
            np.full((rows, 4), np.nan), np.zeros((rows, 4), bool), np.full((rows, 4), np.nan),
            np.full(3, -1, np.int64)]
    elementwise[1, 1](a, b, s, *outs)
    with np.errstate(invalid="ignore"):
        expected = [np.sin(a), np.greater(a, b), np.maximum(a, s), np.fmin(a, b),
                    np.logical_xor(a, b), np.log2(a), np.full(3, 7 & 12)]
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


@kj.jit
def complex_order(a, b, o_lt, o_max):
    np.less(a, b, o_lt)
    np.maximum(a, b, o_max)


def test_complex_numbers_order_lexicographically(kj_backend):
    re = rng.integers(0, 3, 12).astype(float)
    a = re + 1j * rng.integers(0, 3, 12)
    b = rng.permutation(re) + 1j * rng.integers(0, 3, 12)
    b[5] = complex(np.nan, 1.0)
    o_lt, o_max = np.zeros(12, bool), np.full(12, np.nan, complex)
    complex_order[1, 1](a, b, o_lt, o_max)
    np.testing.assert_array_equal(o_lt, np.less(a, b))
    np.testing.assert_array_equal(o_max, np.maximum(a, b))


def test_a_ufunc_without_output_array_is_typed_as_a_scalar_call():
    def bad(out, x):
        np.sin(x, 1.0)

    with pytest.raises(kj.CompileError):
        kj.compile_ptx(bad, "void(float64[:], float64)")
