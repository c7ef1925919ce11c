"""Views by slicing inside kernels (``a[i, :]``, ``a[:, j]``, ``a[1:-1:2]``, negative steps):
the same elements NumPy's basic slicing gives, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj


@kj.jit
def row_and_column(out, m, i, j):
    row = m[i, :]
    col = m[:, j]
    for k in range(row.shape[0]):
        out[0, k] = row[k]
    for k in range(col.shape[0]):
        out[1, k] = col[k]


@kj.jit
def strided_views(out, x, start, stop, step):
    v = x[start:stop:step]
    out[0] = v.shape[0]
    for k in range(v.shape[0]):
        out[k + 1] = v[k]


@kj.jit
def block_of_rows(out, m):
    b = m[1:-1, ::2]
    for r in range(b.shape[0]):
        for c in range(b.shape[1]):
            out[r, c] = b[r, c] * 2.0


def test_row_and_column_views(kj_backend):
    rng = np.random.default_rng()
    m = rng.standard_normal((7, 5)).astype(np.float32)
    i, j = int(rng.integers(0, 7)), int(rng.integers(-5, 5))
    out = kj.to_device(np.full((2, 7), np.nan, np.float32))
    row_and_column[1, 1](out, kj.to_device(m), i, j)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[0, :5], m[i, :])
    np.testing.assert_array_equal(got[1, :7], m[:, j])


@pytest.mark.parametrize("case", range(6))
def test_python_slice_bounds(kj_backend, case):
    rng = np.random.default_rng()
    n = int(rng.integers(5, 40))
    x = rng.standard_normal(n)
    start, stop = (int(v) for v in rng.integers(-n - 3, n + 3, 2))
    step = int(rng.choice([-3, -2, -1, 1, 2, 5]))
    expected = x[start:stop:step]
    out = kj.to_device(np.full(n + 1, np.nan))
    strided_views[1, 1](out, kj.to_device(x), start, stop, step)
    got = out.copy_to_host()
    assert got[0] == len(expected)
    np.testing.assert_array_equal(got[1:len(expected) + 1], expected)


def test_two_dimensional_slice(kj_backend):
    rng = np.random.default_rng()
    m = rng.standard_normal((6, 9))
    view = m[1:-1, ::2]
    out = kj.to_device(np.full(view.shape, np.nan))
    block_of_rows[1, 1](out, kj.to_device(m))
    np.testing.assert_array_equal(out.copy_to_host(), view * 2.0)


def test_view_types():
    disp = kj.jit(row_and_column.py_func)
    kir = disp.inspect_kir("void(float32[:, ::1], float32[:, ::1], int64, int64)")
    assert "local row: float32[::1]" in kir      # a row of a C array stays contiguous
    assert "local col: float32[:]" in kir        # a column is strided


def test_assigning_to_a_slice_is_located():
    def bad(out):
        out[1:3] = 0.0

    with pytest.raises(kj.UnsupportedError, match="cannot assign to a slice"):
        kj.compile_ptx(bad, "void(float32[::1])")


def test_slicing_kernels_assemble_for_the_gpu():
    sigs = {
        row_and_column: "void(float32[:, ::1], float32[:, ::1], int64, int64)",
        strided_views: "void(float64[::1], float64[::1], int64, int64, int64)",
        block_of_rows: "void(float64[:, ::1], float64[:, ::1])",
    }
    for kernel, sig in sigs.items():
        assert ".entry" in kj.compile_ptx(kernel, sig)
