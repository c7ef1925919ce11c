"""cmath on infinite and NaN parts follows C99 Annex G, as Python's cmath and numba do, and
``0j ** 0j`` is 1 (issue 28: each gave NaN parts or 0j)."""

import cmath
import math

import numpy as np
import pytest

from kaiojit import cuda

rng = np.random.default_rng()
FUNCS = (cmath.exp, cmath.sqrt, cmath.sin, cmath.cos, cmath.sinh, cmath.cosh)


@cuda.jit
def cmath_all(out, z):
    i = cuda.grid(1)
    if i < z.size:
        out[i, 0] = cmath.exp(z[i])
        out[i, 1] = cmath.sqrt(z[i])
        out[i, 2] = cmath.sin(z[i])
        out[i, 3] = cmath.cos(z[i])
        out[i, 4] = cmath.sinh(z[i])
        out[i, 5] = cmath.cosh(z[i])


@cuda.jit
def power(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] ** b[i]


def _same(got: float, want: float) -> bool:
    # NaN matches NaN; the sign of a zero is left unspecified by Annex G for these cases;
    # infinities and zeros exactly; a finite part within a few ulps (the GPU's libdevice
    # rounds cosh(1.93) one ulp away from the host's libm)
    if math.isnan(got) or math.isnan(want) or math.isinf(want) or want == 0:
        return (math.isnan(got) and math.isnan(want)) or got == want
    return math.isclose(got, want, rel_tol=1e-14)


def test_cmath_infinite_and_nan_parts(kj_backend):
    finite = rng.uniform(0.5, 3.0, 3) * rng.choice([-1, 1], 3)
    parts = [math.inf, -math.inf, math.nan, 0.0, *finite]
    z = np.array([complex(x, y) for x in parts for y in parts])
    out = cuda.to_device(np.full((z.size, len(FUNCS)), complex(12345, -12345)))
    cmath_all[1, 64](out, cuda.to_device(z))
    got = out.copy_to_host()
    checked = 0
    for i, v in enumerate(z):
        for j, f in enumerate(FUNCS):
            try:
                want = f(v)
            except (ValueError, OverflowError):  # Python raises where C returns a value
                continue
            g = got[i, j]
            assert _same(g.real, want.real) and _same(g.imag, want.imag), \
                f"{f.__name__}({v}) = {g}, expected {want}"
            checked += 1
    assert checked > 150


def test_zero_to_the_zero_is_one(kj_backend):
    b = rng.uniform(0.5, 2.0, 4) + 1j * rng.uniform(-2.0, 2.0, 4)
    a = np.array([0j, 0j, 0j, complex(rng.uniform(1, 2), rng.uniform(1, 2))])
    b = np.array([0j, b[1].real + 0j, b[2], 0j])
    out = cuda.to_device(np.full(4, complex(math.nan, math.nan)))
    power[1, 4](out, cuda.to_device(a), cuda.to_device(b))
    got = out.copy_to_host()
    assert got[0] == 1 and got[3] == 1  # Python: 0j ** 0j == z ** 0j == 1
    assert got[1] == 0 and got[2] == 0  # 0 to a power with a positive real part
    assert got[0] == pytest.approx(0j ** 0j)
