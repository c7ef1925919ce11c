"""NumPy's whole-array reductions in kernels (``np.sum(a)``, ``a.max()``, ``np.nanmean(a)``,
...), global NumPy arrays as constants of the kernel, and ``literal_unroll`` over a tuple of
arrays of several ranks (issue 28: numba's array reductions)."""

import warnings

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()

FUNCTIONS = (np.sum, np.prod, np.mean, np.var, np.std, np.min, np.max, np.nansum, np.nanprod,
             np.nanmean, np.nanvar, np.nanstd, np.nanmin, np.nanmax, np.all, np.any,
             np.count_nonzero)


def _with_specials(shape):
    a = rng.standard_normal(shape)
    flat = a.reshape(-1)
    picks = rng.permutation(flat.size)[:3]
    flat[picks[0]] = np.nan
    flat[picks[1]] = rng.choice([np.inf, -np.inf])
    flat[picks[2]] = 0.0
    return a


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_reductions_match_numpy_over_arrays_of_several_ranks(kj_backend, fn):
    n = int(rng.integers(3, 7))  # short rows: NumPy's pairwise sums are sequential there
    cases = (rng.standard_normal(n), _with_specials(n), rng.standard_normal((2, n)),
             rng.integers(-5, 5, (n, 2)).astype(np.int32), rng.standard_normal(n) > 0,
             np.float64([np.nan, np.nan]))

    @kj.jit
    def reduce_each(out):
        i = 0
        for case in kj.literal_unroll(cases):
            out[i] = fn(case)
            i += 1  # noqa: SIM113  literal_unroll has no enumerate

    out = kj.to_device(np.full(len(cases), -999.0))
    reduce_each[1, 1](out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's all-NaN warnings
        expected = np.array([float(fn(c)) for c in cases])
    got = out.copy_to_host()
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0, equal_nan=True)
    same = np.isnan(got) == np.isnan(expected)
    assert same.all()


def test_result_types_are_numpys(kj_backend):
    ints = rng.integers(-100, 100, int(rng.integers(3, 9))).astype(np.int32)
    halves = rng.standard_normal(4).astype(np.float16)

    @kj.jit
    def kinds(big, means, small, a, h):
        big[0] = a.sum()  # int64: no wrap at int32
        means[0] = np.mean(a)  # float64
        small[0] = np.mean(h)  # float16, computed in float32
        small[1] = h.max()

    big = kj.to_device(np.full(1, -1, np.int64))
    means = kj.to_device(np.full(1, np.nan))
    small = kj.to_device(np.full(2, np.nan, np.float16))
    big_ints = ints.astype(np.int32) * np.int32(2**24)
    kinds[1, 1](big, means, small, kj.to_device(big_ints), kj.to_device(halves))
    assert big.copy_to_host()[0] == big_ints.astype(np.int64).sum()
    assert means.copy_to_host()[0] == np.mean(big_ints)
    np.testing.assert_array_equal(small.copy_to_host(), [np.mean(halves), halves.max()])


def test_global_arrays_are_constants_and_cannot_be_written(kj_backend):
    table = rng.standard_normal((3, 4))

    @kj.jit
    def read(out):
        i, j = kj.grid(2)
        if i < 3 and j < 4:
            out[i, j] = table[i, j] * 2

    out = kj.to_device(np.full((3, 4), np.nan))
    read[(1, 1), (4, 4)](out)
    np.testing.assert_array_equal(out.copy_to_host(), table * 2)

    @kj.jit
    def write(out):
        table[0, 0] = out[0, 0]

    with pytest.raises(kj.TypingError, match=r"test_array_reductions\.py:90:9: a global NumPy "
                                             r"array is a constant of the kernel"):
        write[1, 1](out)


def test_literal_unroll_over_a_tuple_argument_and_its_errors(kj_backend):
    values = (int(rng.integers(1, 9)), float(rng.standard_normal()), rng.standard_normal(3))

    @kj.jit
    def total(out, t):
        s = 0.0
        for item in kj.literal_unroll(t):
            s += np.sum(item)
        out[0] = s

    with pytest.raises(kj.TypingError, match="np.sum\\(\\) takes an array"):
        total[1, 1](kj.to_device(np.full(1, np.nan)), values)

    @kj.jit
    def arrays_only(out, t):
        s = 0.0
        for item in kj.literal_unroll(t):
            s += item.sum()
        out[0] = s

    arrays = (rng.standard_normal(4), rng.standard_normal((2, 3)))
    out = kj.to_device(np.full(1, np.nan))
    arrays_only[1, 1](out, tuple(kj.to_device(a) for a in arrays))
    np.testing.assert_allclose(out.copy_to_host()[0], sum(a.sum() for a in arrays), rtol=1e-14)

    @kj.jit
    def jumps(out, t):
        for item in kj.literal_unroll(t):
            break

    with pytest.raises(kj.UnsupportedError, match=r"test_array_reductions\.py:125:13: 'break' "
                                                  r"and 'continue' cannot leave a "
                                                  r"literal_unroll\(\) loop"):
        jumps[1, 1](out, arrays)


def test_reshape_in_a_kernel_is_a_view_with_numpys_minus_one(kj_backend):
    rows, cols = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    data = rng.standard_normal(rows * cols)

    @kj.jit
    def regroup(a, shape, got):
        y = a.reshape(shape)
        for i in range(y.shape[0]):
            for j in range(y.shape[1]):
                got[i, j] = y[i, j]
        y[0, 0] = -1.0  # a view: the write reaches a

    for shape in ((rows, cols), (-1, cols), (rows, -1)):
        a = kj.to_device(data)
        got = kj.to_device(np.full((rows, cols), np.nan))
        regroup[1, 1](a, shape, got)
        np.testing.assert_array_equal(got.copy_to_host(), data.reshape(rows, cols))
        assert a.copy_to_host()[0] == -1.0

    @kj.jit
    def strided(a, got):
        got[0] = a[::2].reshape(2, 2)[0, 0]

    with pytest.raises(kj.TypingError, match=r"test_array_reductions\.py:154:18: a\.reshape\(\) "
                                             r"in a kernel needs a C-contiguous array"):
        strided[1, 1](kj.to_device(data), kj.to_device(np.full(1, np.nan)))
