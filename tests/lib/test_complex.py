"""Complex numbers in kernels: arithmetic with NumPy's semantics (and its promotion with real
scalars), abs, cmath, the parts and the constructors, on both backends; the PTX assembles."""

from __future__ import annotations

import cmath

import numpy as np
import pytest

import kaiojit as kj
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()


def crandom(n: int, dtype) -> np.ndarray:
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


@kj.jit
def arith(out, a, b, s, f):
    i = kj.grid(1)
    if i < out.shape[0]:
        z = a[i] * b[i] + s - a[i] / b[i]
        out[i, 0] = z * f - f / b[i] + (1 + 2j)
        out[i, 1] = -z.conjugate() * abs(a[i]) + complex(f, 1.5)
        out[i, 2] = kj.complex128(a[i].imag, b[i].real) if out[i, 2].real != 7.0 else 0j
        out[i, 3] = a[i] ** 2 + (1.0 if a[i] == b[i] else 0.0) + (2.0 if a[i] != b[i] else 0.0)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_arithmetic_matches_numpy(backend, dtype):
    n = int(rng.integers(100, 300))
    a, b = crandom(n, dtype), crandom(n, dtype)
    b[:3] = a[:3]  # == is true somewhere
    real = np.float32 if dtype == np.complex64 else np.float64
    s, f = dtype(complex(*rng.standard_normal(2))), real(rng.standard_normal())
    out = kj.to_device(np.full((n, 4), np.nan, dtype))
    arith[(n + 63) // 64, 64](out, kj.to_device(a), kj.to_device(b), s, f)
    got = out.copy_to_host()
    z = a * b + s - a / b
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.complex64 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[:, 0], z * f - f / b + (1 + 2j), **tol)
    np.testing.assert_allclose(got[:, 1], -np.conj(z) * np.abs(a) + (f + 1.5j), **tol)
    np.testing.assert_allclose(got[:, 2], a.imag + 1j * b.real, **tol)
    np.testing.assert_allclose(got[:, 3], a ** 2 + np.where(a == b, 1.0, 2.0), **tol)
    assert got.dtype == dtype
    compile_for_gpu(arith)


@kj.jit
def cmath_all(out, z):
    i = kj.grid(1)
    if i < z.size:
        v = z[i]
        out[i, 0] = cmath.exp(v)
        out[i, 1] = cmath.log(v)
        out[i, 2] = cmath.sqrt(v)
        out[i, 3] = cmath.sin(v)
        out[i, 4] = cmath.cos(v)
        out[i, 5] = cmath.tan(v)
        out[i, 6] = cmath.sinh(v)
        out[i, 7] = cmath.cosh(v)
        out[i, 8] = cmath.tanh(v)
        out[i, 9] = cmath.log10(v)
        out[i, 10] = cmath.rect(abs(v), cmath.phase(v))
        r, phi = cmath.polar(v)
        out[i, 11] = complex(r, phi)
        out[i, 12] = v ** z[0]
        out[i, 13] = 1.0 if cmath.isfinite(v) and not cmath.isnan(v) \
            and not cmath.isinf(v) else 0.0


CMATH = [cmath.exp, cmath.log, cmath.sqrt, cmath.sin, cmath.cos, cmath.tan, cmath.sinh,
         cmath.cosh, cmath.tanh, cmath.log10, lambda v: cmath.rect(abs(v), cmath.phase(v)),
         lambda v: complex(*cmath.polar(v))]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_cmath_matches_python(backend, dtype):
    n = int(rng.integers(50, 120))
    z = crandom(n, dtype) * 2
    z[0] = complex(0.5, -0.75)
    z[1] = complex(-2.0, 0.0)  # the branch cut of sqrt and log, from above
    out = kj.to_device(np.full((n, 14), np.nan, dtype))
    cmath_all[(n + 31) // 32, 32](out, kj.to_device(z))
    got = out.copy_to_host()
    rtol = 1e-4 if dtype == np.complex64 else 1e-11
    for k, fn in enumerate(CMATH):
        want = np.array([fn(complex(v)) for v in z])
        np.testing.assert_allclose(got[:, k], want, rtol=rtol, atol=rtol, err_msg=str(k))
    want = np.array([complex(v) ** complex(z[0]) for v in z])
    np.testing.assert_allclose(got[:, 12], want, rtol=rtol * 10, atol=rtol)
    np.testing.assert_array_equal(got[:, 13], np.ones(n))
    compile_for_gpu(cmath_all)


@kj.jit
def promote(out, x, i32):
    i = kj.grid(1)
    if i < out.size:
        w = x[i] * 1j  # float32 and a Python complex: complex64 (NEP 50)
        v = w + i32  # complex64 and int32: complex128
        out[i] = v


def test_promotion_follows_numpy(backend):
    x = rng.standard_normal(40).astype(np.float32)
    out = kj.to_device(np.full(40, np.nan, np.complex128))
    promote[1, 64](out, kj.to_device(x), np.int32(3))
    w = x * 1j
    assert w.dtype == np.complex64 and (w + np.int32(3)).dtype == np.complex128
    np.testing.assert_allclose(out.copy_to_host(), w + np.int32(3), rtol=1e-6)
    kir = promote.inspect_kir(promote.signatures[0])
    assert "local w: complex64" in kir and "local v: complex128" in kir


def drops_imag(out, z):
    out[0] = z[0]


def orders(out, z):
    out[0] = 1.0 if z[0] < z[1] else 0.0


def floor_div(out, z):
    out[0] = z[0] // z[1]


@pytest.mark.parametrize("fn, snippet, message", [
    (drops_imag, "out[0] = z[0]", r"cannot convert complex64 to float32 \(it would drop the imaginary "
                         r"part\): take .real, .imag or abs\(\)"),
    (orders, "z[0] < z[1]", r"complex numbers have no order: < of complex64 and complex64"),
    (floor_div, "z[0] // z[1]", r"// is not defined for complex numbers"),
])
def test_errors_name_the_line(fn, snippet, message):
    kernel = kj.jit(fn)
    with pytest.raises(kj.TypingError, match=message) as info:
        kernel.compile("void(float32[::1], complex64[::1])")
    assert_located(info.value, fn, snippet)


@kj.jit
def show(z):
    print("z =", z[0])


def test_print_writes_complex_as_python(kj_backend, capfd):
    if kj_backend != "cpu":
        pytest.skip("GPU printf output reaches the terminal, not capfd, reliably only on the host")
    re, im = (round(float(v), 3) for v in rng.standard_normal(2))
    show[1, 1](kj.to_device(np.array([complex(re, im)], np.complex64)))
    kj.synchronize()
    re32, im32 = float(np.float32(re)), float(np.float32(im))
    assert capfd.readouterr().out == f"z = ({re32:f}{im32:+f}j)\n"


def test_complex_arrays_travel_through_dlpack(kj_backend):
    from kaiojit.runtime.dlpack import consume, release

    z = crandom(int(rng.integers(5, 50)), np.complex64)
    d = kj.to_device(z)
    t = consume(d)  # kDLComplex, 64 bits: complex64 again
    assert t.dtype == np.complex64 and t.shape == z.shape and t.ptr == d.ptr
    release(t.address)


@kj.jit
def numpy_spelled(out, z):
    i = kj.grid(1)
    if i < z.size:
        out[i, 0] = np.exp(z[i]) + np.sqrt(z[i]) + np.conj(z[i]) + np.log(z[i])
        out[i, 1] = np.abs(z[i]) + np.real(z[i]) * 1j + np.imag(z[i]) + np.conjugate(z[i])


def test_numpy_functions_take_complex_numbers(backend):
    n = int(rng.integers(30, 90))
    z = crandom(n, np.complex128)
    out = kj.to_device(np.full((n, 2), np.nan, np.complex128))
    numpy_spelled[1, 128](out, kj.to_device(z))
    got = out.copy_to_host()
    np.testing.assert_allclose(got[:, 0], np.exp(z) + np.sqrt(z) + np.conj(z) + np.log(z),
                               rtol=1e-12)
    np.testing.assert_allclose(got[:, 1], np.abs(z) + z.real * 1j + z.imag + np.conj(z),
                               rtol=1e-12)
    compile_for_gpu(numpy_spelled)


@kj.jit
def powers(out, z):
    i = kj.grid(1)
    if i < z.size:
        out[i, 0] = z[i] ** 2
        out[i, 1] = z[i] ** -3
        out[i, 2] = z[i] ** 0


def test_small_integer_powers_multiply_out_as_numpy(backend):
    z = np.concatenate([[-2 + 0j, 3j, 0.5 + 0j], crandom(13, np.complex128)])
    out = kj.to_device(np.full((z.size, 3), np.nan, np.complex128))
    powers[1, 32](out, kj.to_device(z))
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:3, 0], z[:3] ** 2)  # exact where NumPy is: 4+0j, ...
    np.testing.assert_array_equal(got[:, 2], np.ones(z.size))
    np.testing.assert_allclose(got[:, 0], z ** 2, rtol=1e-14)
    np.testing.assert_allclose(got[:, 1], z ** -3, rtol=1e-13)
