"""numba's ``forall`` (no work is no launch, a negative count numba's ValueError),
``cuda.vectorize``'s options (``nopython`` redundant, an unknown option a KeyError), and
numba's errors for a bad ``kernel[griddim, blockdim]`` and for a kernel called without a
configuration, raised where numba raises them (issue 28: the dimensions were checked only at
the launch, as kaiojit's LaunchError, and an unconfigured call was a TypeError)."""

import warnings

import numpy as np
import pytest

from kaiojit import cuda, float32

rng = np.random.default_rng()


@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def test_forall(kj_backend):
    a = rng.integers(0, 9, int(rng.integers(5, 300))).astype(np.int64)
    before = a.copy()
    add_one.forall(0)(a)
    np.testing.assert_array_equal(a, before)
    add_one.forall(a.size)(a)
    add_one.forall(a.size, tpb=32)(a)
    np.testing.assert_array_equal(a, before + 2)
    with pytest.raises(ValueError, match="Can't create ForAll with negative task count"):
        add_one.forall(-1)


def test_vectorize_options(kj_backend):
    def add(x, y):
        return x + y

    with pytest.warns(RuntimeWarning, match="nopython kwarg for cuda target is redundant"):
        f = cuda.vectorize([float32(float32, float32)], target="cuda", nopython=True)(add)
    a = rng.standard_normal(7).astype(np.float32)
    np.testing.assert_array_equal(f(a, a), a + a)
    with pytest.raises(KeyError, match="Unrecognized options: nonexistent"):
        cuda.vectorize([float32(float32, float32)], nonexistent=2)(add)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuda.vectorize([float32(float32, float32)], fastmath=True)(add)


def test_more_than_three_dimensions_is_a_value_error_when_configured():
    n = int(rng.integers(4, 7))
    with pytest.raises(ValueError, match=r"griddim must be a sequence of 1, 2 or 3 integers, "
                                         rf"got \[{', '.join(['1'] * n)}\]"):
        add_one[(1,) * n, 32]
    with pytest.raises(ValueError, match=r"blockdim must be a sequence of 1, 2 or 3 integers"):
        add_one[1, [2, 2, 2, 2]]


def test_non_integer_dimensions_are_a_type_error_when_configured():
    with pytest.raises(TypeError, match=r"griddim must be a sequence of integers, got \[2\.0\]"):
        add_one[2.0, 3]
    with pytest.raises(TypeError, match=r"blockdim must be a sequence of integers, got \[3\.0\]"):
        add_one[2, (3.0,)]


def test_unconfigured_call_is_a_value_error():
    a = rng.integers(0, 9, 8)
    with pytest.raises(ValueError, match="launch configuration was not specified"):
        add_one(a)
    typed = cuda.jit("void(int64[:])")(add_one.py_func)
    with pytest.raises(ValueError, match=r"add_one\[grid, block\]"):
        typed(a)


def test_good_configurations_still_launch(kj_backend):
    a = rng.integers(0, 9, int(rng.integers(5, 200))).astype(np.int64)
    d = cuda.to_device(a)
    add_one[(a.size + 31) // 32, 32](d)
    add_one[[np.int64((a.size + 63) // 64)], (64, 1, 1)](d)
    np.testing.assert_array_equal(d.copy_to_host(), a + 2)
