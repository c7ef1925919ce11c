"""fp8 (``kj.float8_e4m3fn``, ``kj.float8_e5m2``): conversions to and from float32 in a kernel
and in Python, bit for bit ml_dtypes' within the range and saturating beyond it (the GPU's
``cvt.rn.satfinite``); arrays and arithmetic (computed in float32, rounded once); the GPU's
hardware conversions on sm_90 and newer, the same rounding in software before."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as kt
from tests.ptxas import assemble

ml_dtypes = pytest.importorskip("ml_dtypes")

FP8 = [kt.float8_e4m3fn, kt.float8_e5m2]


def every_code_value(t: kt.ScalarType) -> np.ndarray:
    """The float32 value of each of the 256 codes (NaN where the code is one)."""
    return np.arange(256, dtype=np.uint8).view(t.np_dtype).astype(np.float32)


def hard_float32s(t: kt.ScalarType, rng: np.random.Generator) -> np.ndarray:
    """float32 values in the type's range that test the rounding: each finite value, the
    midpoints between neighbours (ties) and the float32 next to them, subnormals, and random
    values across the range."""
    values = np.unique(every_code_value(t)[np.isfinite(every_code_value(t))])
    mids = ((values[1:].astype(np.float64) + values[:-1]) / 2).astype(np.float32)
    up, down = np.float32(np.inf), np.float32(-np.inf)
    top = t.float_format.max_value
    parts = [values, mids, np.nextafter(mids, up), np.nextafter(mids, down),
             (rng.standard_normal(4000) * top / 8).astype(np.float32),
             (rng.uniform(-1, 1, 2000) * t.float_format.min_normal).astype(np.float32)]
    x = np.concatenate(parts)
    return rng.permutation(x[np.abs(x) <= top])


def same_bits_or_both_nan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("t", FP8, ids=str)
def test_python_conversions_are_ml_dtypes_bit_for_bit(t):
    rng = np.random.default_rng()
    fmt = t.float_format
    mine = np.array([fmt.decode(c) for c in range(256)], np.float32)
    assert same_bits_or_both_nan(mine, every_code_value(t)).all()
    x = hard_float32s(t, rng)[:3000]
    expected = x.astype(t.np_dtype).view(np.uint8)
    assert (np.array([fmt.encode(float(v)) for v in x], np.uint8) == expected).all()
    # beyond the range the hardware saturates (ml_dtypes would give NaN or infinity)
    big = float(rng.uniform(1.01, 100.0)) * fmt.max_value
    assert fmt.encode(big) == fmt.max_code and fmt.encode(-np.inf) == fmt.max_code | 0x80
    assert np.isnan(fmt.decode(fmt.encode(float("nan"))))


def to_fp8(out, x):
    i = kj.grid(1)
    if i < x.shape[0]:
        out[i] = x[i]  # a store converts to the array's type, as NumPy's assignment does


def from_fp8(out, a):
    i = kj.grid(1)
    if i < a.shape[0]:
        out[i] = kj.float32(a[i])


@pytest.mark.parametrize("t", FP8, ids=str)
def test_kernel_conversions_are_ml_dtypes_bit_for_bit(t):
    rng = np.random.default_rng()
    x = hard_float32s(t, rng)
    special = np.array([np.inf, -np.inf, np.nan, 3.0e38, -7.0 * t.float_format.max_value],
                       np.float32)
    x = np.concatenate([x, special])
    out = kj.to_device(np.full(x.size, 0xA5, np.uint8).view(t.np_dtype))
    kj.jit(to_fp8)[(x.size + 127) // 128, 128](out, kj.to_device(x))
    got = out.copy_to_host().view(np.uint8)
    n = x.size - special.size
    assert (got[:n] == x[:n].astype(t.np_dtype).view(np.uint8)).all()
    fmt = t.float_format
    assert list(got[n:n + 2]) == [fmt.max_code, fmt.max_code | 0x80]  # saturated
    assert np.isnan(np.float32(got[n + 2:n + 3].view(t.np_dtype)[0]))
    assert list(got[n + 3:]) == [fmt.max_code, fmt.max_code | 0x80]

    codes = np.arange(256, dtype=np.uint8).view(t.np_dtype)
    back = kj.to_device(np.full(256, np.nan, np.float32))
    kj.jit(from_fp8)[2, 128](back, kj.to_device(codes))
    assert same_bits_or_both_nan(back.copy_to_host(), every_code_value(t)).all()


def fma_like(out, a, b, s):
    i = kj.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] * b[i] + s  # fp8 * fp8 -> fp8, then + an fp8 scalar -> fp8


@pytest.mark.parametrize("t", FP8, ids=str)
def test_fp8_arrays_and_arithmetic_round_once_per_operation(t):
    rng = np.random.default_rng()
    n = int(rng.integers(100, 400))
    a = rng.uniform(-6, 6, n).astype(np.float32).astype(t.np_dtype)
    b = rng.uniform(-6, 6, n).astype(np.float32).astype(t.np_dtype)
    s = np.float32(rng.uniform(-4, 4)).astype(t.np_dtype)
    out = kj.to_device(np.full(n, 0xA5, np.uint8).view(t.np_dtype))
    kj.jit(fma_like)[(n + 63) // 64, 64](out, kj.to_device(a), kj.to_device(b), s)
    expected = a * b + s  # ml_dtypes: each operation in float32, rounded to the type
    assert (out.copy_to_host().view(np.uint8) == expected.view(np.uint8)).all()


def convert_both_ways(out, x):
    i = kj.grid(1)
    if i < x.shape[0]:
        out[i] = kj.float8_e4m3fn(kj.float32(x[i]) * 2.0) + kj.float8_e5m2(x[i])


@pytest.mark.parametrize("arch, hardware", [("sm_90", True), ("sm_89", False),
                                            ("sm_80", False)])
def test_the_gpu_converts_in_hardware_from_sm_90_on(arch, hardware):
    """sm_89 has the conversions from PTX ISA 8.1 on; kaiojit writes 7.8 for it."""
    ptx = kj.compile_ptx(convert_both_ways, "void(float8_e4m3fn[::1], float8_e4m3fn[::1])",
                         arch=arch)
    cvt = ["cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.f16x2.e4m3x2",
           "cvt.rn.satfinite.e5m2x2.f32", "cvt.rn.f16x2.e5m2x2"]
    assert all((c in ptx) == hardware for c in cvt), arch
    assemble(ptx, arch)
