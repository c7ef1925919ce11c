"""bfloat16 subnormals survive on every backend, as the GPU's ``cvt.rn.bf16.f32`` and its moves
keep them.

On the host, LLVM holds a ``bfloat`` in a register as float32 and narrows it again before a
store: on a CPU with AVX512-BF16 by VCVTNEPS2BF16, which flushed every subnormal to zero (a
subnormal scalar arrived as 0, a rounding to one gave 0), and elsewhere by calling
``__truncsfbf2``, which libgcc before GCC 13 lacks (the call jumped to address 0). Each host
module now defines that function itself and the feature is off (kaiojit/lower/narrowfloat.py,
kaiojit/target.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng()


def store(out, x):
    out[0] = x


def narrow(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = kj.bfloat16(x[i])


def subnormal_codes(n: int) -> np.ndarray:
    """``n`` random bfloat16 subnormals' codes (exponent 0, mantissa not 0), either sign."""
    return (RNG.integers(1, 0x80, n) | (RNG.integers(0, 2, n) << 15)).astype(np.uint16)


@pytest.mark.parametrize("passed", ["typed", "declared"])
def test_a_subnormal_scalar_arrives_intact(kj_backend, passed):
    kernel = kj.jit(store) if passed == "typed" else kj.jit("void(bfloat16[::1], bfloat16)")(
        store)
    for code in subnormal_codes(4):
        value = np.array([code], np.uint16).view(BF16)[0]
        out = kj.to_device(np.full(1, 0x7FC1, np.uint16).view(BF16))  # a NaN: poisoned
        kernel[1, 1](out, value if passed == "typed" else float(value))
        assert out.copy_to_host().view(np.uint16)[0] == code, hex(code)


def test_float32_rounds_to_bfloat16_subnormals_as_ml_dtypes_does(kj_backend):
    """Random float32 subnormals and normals just above bfloat16's smallest normal, rounded
    to nearest even: bit for bit ml_dtypes' rounding, never flushed."""
    n = 256
    bits = RNG.integers(1, 0x00800000, n, dtype=np.uint32) | (RNG.integers(0, 2, n,
                                                              dtype=np.uint32) << 31)
    bits[: n // 4] += 0x00800000  # some normals, whose bfloat16 neighbours are normal too
    x = bits.view(np.float32)
    out = kj.to_device(np.full(n, 0x7FC1, np.uint16).view(BF16))
    kj.jit(narrow)[(n + 63) // 64, 64](out, kj.to_device(x))
    got = out.copy_to_host().view(np.uint16)
    want = x.astype(BF16).view(np.uint16)
    assert np.count_nonzero(want[n // 4:] & 0x7FFF) > 0  # the sample has subnormal results
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(bits[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
