"""numba's ``forall`` (no work is no launch, a negative count numba's ValueError) and
``cuda.vectorize``'s options (``nopython`` redundant, an unknown option a KeyError)."""

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
