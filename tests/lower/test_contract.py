"""``kj.jit(contract=False)``: no multiply-add is fused, on the GPU or the host."""

import numpy as np

import kaiojit as kj


def muladd(o, a, b, c):
    i = kj.grid(1)
    o[i] = a[i] * b[i] + c[i]


SIG = "void(float32[::1], float32[::1], float32[::1], float32[::1])"


def test_contraction_is_the_default_and_can_be_turned_off():
    fused = kj.compile_ptx(muladd, SIG)
    assert "fma.rn.f32" in fused
    plain = kj.compile_ptx(muladd, SIG, contract=False)
    assert "fma" not in plain
    assert "mul.rn.f32" in plain and "add.rn.f32" in plain


def test_uncontracted_kernel_rounds_each_step(kj_backend):
    # a * b + c where the fma and the two rounded steps differ in the last bit
    rng = np.random.default_rng()
    a = (1 + rng.integers(1, 1 << 20, 64) * 2.0**-23).astype(np.float32)
    c = -(a.astype(np.float64) * a).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    kj.jit(contract=False)(muladd)[1, 64](out, a, a, c)
    expected = (a * a) + c  # NumPy rounds the product, then the sum
    np.testing.assert_array_equal(out, expected)
