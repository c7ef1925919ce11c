"""cmath in kernels gives what Python's cmath gives: the inverse trigonometric and hyperbolic
functions of complex numbers (``cmath.acos`` ... ``cmath.atanh``, NumPy's ``arccos`` ... of
complex arrays), ``tan``, ``tanh`` and ``rect`` where a part is infinite, NaN or zero, and
``cmath.log(z, base)`` (issue 28: the inverse functions and log with a base were not callable;
tanh(nan + 0j), tan(nanj) and rect(0, inf) gave NaN parts; tanh lost 3 ulps near y = pi/2)."""

import cmath
import math

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()
NAMES = ("acos", "asin", "atan", "acosh", "asinh", "atanh", "tan", "tanh")
EPS = {np.complex128: 2.0**-52, np.complex64: 2.0**-23}


@cuda.jit
def cmath_inverse(out, z):
    i = cuda.grid(1)
    if i < z.size:
        out[i, 0] = cmath.acos(z[i])
        out[i, 1] = cmath.asin(z[i])
        out[i, 2] = cmath.atan(z[i])
        out[i, 3] = cmath.acosh(z[i])
        out[i, 4] = cmath.asinh(z[i])
        out[i, 5] = cmath.atanh(z[i])
        out[i, 6] = cmath.tan(z[i])
        out[i, 7] = cmath.tanh(z[i])


@cuda.jit
def rect(out, r, phi):
    i = cuda.grid(1)
    if i < r.size:
        out[i] = cmath.rect(r[i], phi[i])


@cuda.jit
def numpy_inverse(a, o0, o1, o2, o3, o4, o5):
    np.arccos(a, o0)
    np.arcsin(a, o1)
    np.arctan(a, o2)
    np.arccosh(a, o3)
    np.arcsinh(a, o4)
    np.arctanh(a, o5)


def _close(got: float, want: float, eps: float, ulps: int, scale: float = 0.0) -> bool:
    """Within ``ulps`` of ``want``, or of ``scale`` (the result's magnitude: a part much
    smaller than the other carries the rounding of the larger, in float32 especially)."""
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if math.isinf(want) or math.isinf(got):
        return got == want
    return abs(got - want) <= ulps * eps * max(abs(want), scale, 1e-300)


def _special_and_random(n: int) -> np.ndarray:
    finite = rng.uniform(0.2, 3.5, 3) * rng.choice([-1, 1], 3)
    parts = [math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0, -1.0, *finite]
    special = [complex(x, y) for x in parts for y in parts]
    scale = 10.0 ** rng.integers(-6, 7, (2, n))
    rand = (rng.uniform(-2, 2, n) * scale[0]) + 1j * (rng.uniform(-2, 2, n) * scale[1])
    return np.array(special + list(rand))


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_inverse_functions_match_python_cmath(kj_backend, dtype):
    z = _special_and_random(200).astype(dtype)
    out = cuda.to_device(np.full((z.size, len(NAMES)), complex(12345, -12345), dtype))
    cmath_inverse[(z.size + 63) // 64, 64](out, cuda.to_device(z))
    got = out.copy_to_host()
    checked = 0
    for i, v in enumerate(z):
        for j, name in enumerate(NAMES):
            try:
                want = complex(dtype(getattr(cmath, name)(complex(v))))
            except (ValueError, OverflowError):  # Python raises where C returns a value
                continue
            if dtype is np.complex64 and not all(map(math.isfinite, (want.real, want.imag))) \
                    and all(map(math.isfinite, (v.real, v.imag))):
                continue  # finite in float64, overflowing in float32: not this test's point
            g = complex(got[i, j])
            size = abs(want) if math.isfinite(abs(want)) else 0.0
            ok = _close(g.real, want.real, EPS[dtype], 4, size) and \
                _close(g.imag, want.imag, EPS[dtype], 4, size)
            assert ok, f"{name}({v}) = {g}, expected {want} ({np.dtype(dtype)})"
            checked += 1
    assert checked > 1500


def test_tanh_near_a_pole_of_tan_is_accurate(kj_backend):
    # (1 + 1.5j): cos 2y is near -1, where (sinh 2x + i sin 2y) / (cosh 2x + cos 2y) lost
    # 3 ulps; Kahan's form keeps one
    z = np.array([complex(rng.uniform(0.9, 1.1), rng.uniform(1.45, 1.55)) for _ in range(8)])
    out = cuda.to_device(np.full((z.size, len(NAMES)), complex(math.nan, math.nan)))
    cmath_inverse[1, 8](out, cuda.to_device(z))
    got = out.copy_to_host()[:, 7]
    # the GPU's libdevice tan and sinh are within 2 ulps each (the host's libm within 1)
    ulps = 4 if kj_backend == "cuda" else 2
    for v, g in zip(z, got):
        want = cmath.tanh(v)
        assert _close(g.real, want.real, 2.0**-52, ulps) and \
            _close(g.imag, want.imag, 2.0**-52, ulps), f"tanh({v}) = {g}, expected {want}"


def test_rect_special_values(kj_backend):
    parts = [math.inf, -math.inf, math.nan, 0.0, -0.0, *rng.uniform(0.5, 3.0, 2)]
    pairs = [(r, p) for r in parts for p in parts]
    r = np.array([a for a, _ in pairs])
    phi = np.array([b for _, b in pairs])
    out = cuda.to_device(np.full(len(pairs), complex(12345, -12345)))
    rect[1, 64](out, cuda.to_device(r), cuda.to_device(phi))
    got = out.copy_to_host()
    checked = 0
    for (a, p), g in zip(pairs, got):
        try:
            want = cmath.rect(a, p)
        except ValueError:
            continue
        assert _close(g.real, want.real, 2.0**-52, 2) and _close(g.imag, want.imag, 2.0**-52, 2), \
            f"rect({a}, {p}) = {g}, expected {want}"
        checked += 1
    assert checked > 30


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_numpy_inverse_ufuncs_of_complex_arrays(kj_backend, dtype):
    a = (rng.uniform(-0.9, 0.9, 16) + 1j * rng.uniform(-0.9, 0.9, 16)).astype(dtype)
    outs = [cuda.to_device(np.full(16, complex(math.nan, math.nan), dtype)) for _ in range(6)]
    numpy_inverse[1, 1](cuda.to_device(a), *outs)
    funcs = (np.arccos, np.arcsin, np.arctan, np.arccosh, np.arcsinh, np.arctanh)
    for f, o in zip(funcs, outs):
        np.testing.assert_allclose(o.copy_to_host(), f(a), rtol=8 * EPS[dtype],
                                   err_msg=f.__name__)


@cuda.jit
def log_base(out, z, base):
    i = cuda.grid(1)
    if i < z.size:
        out[i] = cmath.log(z[i], base[i])


def test_log_with_a_base_is_a_quotient_of_logs(kj_backend):
    # cmath.log(z, base) took one argument only
    n = 32
    z = rng.uniform(-3, 3, n) + 1j * rng.uniform(-3, 3, n)
    base = rng.uniform(1.5, 9, n) + 1j * rng.uniform(-2, 2, n)
    base[:4] = rng.uniform(1.5, 9, 4)  # real bases too
    out = cuda.to_device(np.full(n, complex(math.nan, math.nan)))
    log_base[1, n](out, cuda.to_device(z), cuda.to_device(base))
    want = np.array([cmath.log(a, b) for a, b in zip(z, base)])
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=4 * 2.0**-52)
