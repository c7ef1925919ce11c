"""numba's ``opt=False``: no optimization, and no multiply-add fused into an fma (NVVM's
``-opt=0``; numba's test_optimization.test_device_noopt); left on, the fma is there."""

from __future__ import annotations

import re

import numpy as np

from kaiojit import cuda
from kaiojit.cuda import float64

rng = np.random.default_rng()


def multiply_add(x, y, z):
    return x * y + z


def test_opt_false_fuses_no_multiply_add():
    sig = (float64, float64, float64)
    fused = cuda.jit(sig, device=True)(multiply_add).inspect_asm(sig)
    unfused = cuda.jit(sig, device=True, opt=False)(multiply_add).inspect_asm(sig)
    assert "fma.rn.f64" in fused
    assert "fma.rn.f64" not in unfused
    assert re.search(r"mul\.rn\.f64", unfused) and re.search(r"add\.rn\.f64", unfused), unfused


def test_opt_false_rounds_the_product_on_its_own(kj_backend):
    @cuda.jit(opt=False)
    def kernel(out, x, y, z):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = multiply_add_device(x[i], y[i], z[i])

    n = int(rng.integers(50, 300))
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    z = -(x * y)  # x*y + z is the product's rounding error where fused, 0.0 where not
    out = cuda.to_device(np.full(n, np.nan))
    kernel[(n + 63) // 64, 64](out, cuda.to_device(x), cuda.to_device(y), cuda.to_device(z))
    np.testing.assert_array_equal(out.copy_to_host(), x * y + z)


multiply_add_device = cuda.jit(device=True)(multiply_add)
