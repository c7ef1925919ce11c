"""``kj.reduce(lambda a, b: a + b)``, numba's documented example, compiles (issue 28: the
generated kernel was named after ``<lambda>``, a SyntaxError, and lambdas had no source)."""

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda

rng = np.random.default_rng()


def test_reduce_of_a_lambda(kj_backend):
    sum_reduce = kj.reduce(lambda a, b: a + b)
    a = rng.standard_normal(int(rng.integers(1000, 5000)))
    assert sum_reduce(a) == pytest.approx(a.sum(), rel=1e-12)


def test_numba_spelling_and_two_lambdas_on_a_line(kj_backend):
    lo, hi = cuda.reduce(lambda a, b: min(a, b)), cuda.Reduce(lambda x, y: max(x, y))
    a = rng.integers(-10**6, 10**6, int(rng.integers(500, 3000))).astype(np.int64)
    assert lo(a) == a.min() and hi(a) == a.max()
