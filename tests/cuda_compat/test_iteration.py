"""Loops numba accepts beyond range(): over arrays, enumerate(), zip(), for/while ... else,
and a tuple indexed at a run-time index."""

import numpy as np
import pytest

import kaiojit as kj
from tests.located import assert_located, compile_error

rng = np.random.default_rng()
WEIGHTS = (1.5, -2.0, 0.25)


@kj.jit
def walk(x, y, m, out, limit):
    for i, v in enumerate(x):  # an array's elements with their indices
        out[i] = v * i
    acc = 0.0
    for a, b in zip(x, y):  # the shorter length
        acc += a * b
    out[x.size] = acc
    acc = 0.0
    for (i, a), b in zip(enumerate(x, 10), y):
        acc += i * a - b
    out[x.size + 1] = acc
    acc = 0.0
    for i, j in enumerate(range(limit, 0, -3)):
        acc += i * j
    out[x.size + 2] = acc
    acc = 0.0
    for row in m:  # rows of a 2-d array: views
        acc += row[row.size - 1]
    out[x.size + 3] = acc
    acc = 0.0
    for i, w in enumerate(WEIGHTS):
        acc += w * x[i]
    out[x.size + 4] = acc


def test_loops_over_sequences(kj_backend):
    n = int(rng.integers(4, 9))
    x, y = rng.standard_normal(n), rng.standard_normal(n - 1)
    m = rng.standard_normal((int(rng.integers(2, 5)), 3))
    limit = int(rng.integers(1, 20))
    out = np.full(n + 5, np.nan)
    walk[1, 1](x, y, m, out, limit)
    expected = [v * i for i, v in enumerate(x)]
    expected.append(sum(a * b for a, b in zip(x, y)))
    expected.append(sum(i * a - b for (i, a), b in zip(enumerate(x, 10), y)))
    expected.append(sum(i * j for i, j in enumerate(range(limit, 0, -3))))
    expected.append(m[:, -1].sum())
    expected.append(sum(w * x[i] for i, w in enumerate(WEIGHTS)))
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


@kj.jit
def find(x, target, out):
    for i in range(x.size):
        for j in range(2):  # a break of an inner loop does not skip the outer else
            if j == 1:
                break
        if x[i] == target:
            out[0] = i
            break
    else:
        out[0] = -1
    k = 0
    while k < x.size:
        if x[k] > target:
            break
        k += 1
    else:
        k = -5
    out[1] = k


@pytest.mark.parametrize("present", [True, False])
def test_for_and_while_else(kj_backend, present):
    x = rng.permutation(50)[:int(rng.integers(5, 20))].astype(np.int64)
    target = int(x[rng.integers(x.size)]) if present else 99
    out = np.full(2, -100, np.int64)
    find[1, 1](x, target, out)
    expected_i = int(np.flatnonzero(x == target)[0]) if present else -1
    above = np.flatnonzero(x > target)
    assert out.tolist() == [expected_i, int(above[0]) if above.size else -5]


@kj.jit
def pick(out, i):
    t = (3, 5.5, 7)
    out[0] = t[i]


def test_tuple_at_a_run_time_index(kj_backend):
    out = np.full(1, np.nan)
    for i in range(-3, 3):
        pick[1, 1](out, i)
        assert out[0] == (3, 5.5, 7)[i]


def test_zip_of_a_scalar_is_an_error():
    def bad(out, n):
        for a, b in zip(out, n):
            out[0] = a + b

    err = compile_error(bad, "void(float64[:], int64)")
    assert_located(err, bad, "n)")
    assert "len() of int64" in str(err)
