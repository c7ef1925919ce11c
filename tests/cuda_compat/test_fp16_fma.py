"""``cuda.fp16.hfma`` rounds once, to float16 (issue 28: it computed an fma in float32 and
then converted, rounding twice: 1.359 * 1.031 - 6e-08 gave 1.402 for 1.401), and on the GPU
a float16 fma is the hardware's ``fma.rn.f16`` (numba's test_hfma_ptx)."""

import numpy as np

from kaiojit import cuda
from kaiojit.cuda import f2

rng = np.random.default_rng()


@cuda.jit
def hfma_all(out, a, b, c):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.fp16.hfma(a[i], b[i], c[i])


def _exact(a, b, c):
    # a float16 product is exact in float64, and so is its sum with a float16 here
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float16)


def test_hfma_rounds_once(kj_backend):
    n = 4096
    a = rng.integers(0x3800, 0x4400, n).astype(np.uint16).view(np.float16)
    b = rng.integers(0x3800, 0x4400, n).astype(np.uint16).view(np.float16)
    c = (rng.standard_normal(n) * rng.choice([1e-3, 1e-5, 1.0], n)).astype(np.float16)
    # cases where rounding to float32 first lands on a float16 halfway point
    a[:3] = np.array([1.359, 1.059, 3.814], np.float16)
    b[:3] = np.array([1.031, 3.447, 2.05], np.float16)
    c[:3] = np.array([-6e-08, 0.0001603, -0.000343], np.float16)
    out = cuda.to_device(np.full(n, np.nan, np.float16))
    hfma_all[(n + 255) // 256, 256](out, cuda.to_device(a), cuda.to_device(b),
                                    cuda.to_device(c))
    np.testing.assert_array_equal(out.copy_to_host(), _exact(a, b, c))


def test_hfma_is_the_gpus_half_fma():
    ptx, _ = cuda.compile_ptx(hfma_all, (f2[::1], f2[::1], f2[::1], f2[::1]))
    assert "fma.rn.f16" in ptx
    assert "fma.rn.f32" not in ptx
