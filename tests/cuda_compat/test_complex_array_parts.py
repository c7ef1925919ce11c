"""``a.real`` and ``a.imag`` of a complex array in a kernel: strided views of the parts, as
NumPy's (reads, writes and atomics reach ``a``); ``.real`` of a real array is the array
(issue 28: both attributes were refused, so numba's atomics on complex parts failed)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.errors import TypingError

rng = np.random.default_rng()


@cuda.jit
def count_into_parts(values, hits_re, hits_im):
    i = cuda.grid(1)
    if i < hits_re.size:
        cuda.atomic.add(values.real, hits_re[i], 1)
        cuda.atomic.add(values.imag, hits_im[i], 2)


@cuda.jit
def swap_parts(z, re_out, im_out, plain):
    i, j = cuda.grid(2)
    if i < z.shape[0] and j < z.shape[1]:
        re_out[i, j] = z.real[i, j]
        im_out[i, j] = z.imag[i, j]
        plain.real[i, j] = plain[i, j] + 1


def imag_of_real(a):
    a.imag[0] = 1.0


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_atomics_on_the_parts_of_a_complex_array(kj_backend, dtype):
    n = int(rng.integers(4, 16))
    values = (rng.integers(0, 9, n) + 1j * rng.integers(0, 9, n)).astype(dtype)
    hits_re = rng.integers(0, n, 64)
    hits_im = rng.integers(0, n, 64)
    d = cuda.to_device(values)
    count_into_parts[1, 64](d, cuda.to_device(hits_re), cuda.to_device(hits_im))
    want = values.copy()
    np.add.at(want.real, hits_re, 1)
    np.add.at(want.imag, hits_im, 2)
    np.testing.assert_array_equal(d.copy_to_host(), want)


def test_part_views_of_a_strided_2d_array(kj_backend):
    z = (rng.standard_normal((6, 10)) + 1j * rng.standard_normal((6, 10)))[:, ::2]
    re_out = cuda.to_device(np.full((6, 5), np.nan))
    im_out = cuda.to_device(np.full((6, 5), np.nan))
    plain = rng.standard_normal((6, 5))
    d_plain = cuda.to_device(plain)
    swap_parts[(1, 1), (8, 8)](cuda.to_device(np.ascontiguousarray(z)), re_out, im_out, d_plain)
    np.testing.assert_array_equal(re_out.copy_to_host(), z.real)
    np.testing.assert_array_equal(im_out.copy_to_host(), z.imag)
    np.testing.assert_array_equal(d_plain.copy_to_host(), plain + 1)


def test_imag_of_a_real_array_is_refused_where_it_is_used():
    with pytest.raises(TypingError, match=r"not \.imag") as info:
        cuda.jit("void(float64[::1])")(imag_of_real)
    line = imag_of_real.__code__.co_firstlineno + 1
    assert f"test_complex_array_parts.py:{line}:5:" in str(info.value)


def test_atomic_on_imag_part_in_ptx():
    ptx, _ = cuda.compile_ptx(count_into_parts, "void(complex128[::1], int64[::1], int64[::1])")
    assert "atom.global.add.f64" in ptx and "+8]" in ptx  # the imaginary part, 8 bytes in
