"""kj.bfloat16: its promotion (ml_dtypes' with NumPy), arithmetic and conversions bit for bit
against ml_dtypes on the cpu backend and under the gpu marker, constants, DLPack and
kj.static_range."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as T
from kaiojit.errors import UnsupportedError
from kaiojit.frontend.values import convert_const
from kaiojit.runtime import dlpack
from tests.lib.conftest import compile_for_gpu
from tests.promotion import result_type
from tests.located import assert_located, compile_error

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng()


def test_names_and_promotion_follow_ml_dtypes():
    assert kj.bf16 is kj.bfloat16 and T.parse_type("bf16[:, ::1]").dtype == kj.bfloat16
    assert T.from_dtype(BF16) == kj.bfloat16 and kj.bfloat16.np_dtype == BF16
    assert kj.bfloat16.itemsize == 2 and str(kj.bfloat16) == "bfloat16"
    for t in T.SCALARS.values():
        if t == kj.bfloat16:
            continue
        expect = T.from_dtype(result_type(BF16, t.np_dtype))
        assert T.promote(kj.bfloat16, t) == expect, t
        assert T.promote(t, kj.bfloat16) == expect, t


@kj.jit
def bf16_ops(out, a, b, f, i):
    k = kj.grid(1)
    if k < a.shape[0]:
        out[k, 0] = a[k] + b[k]
        out[k, 1] = a[k] - b[k]
        out[k, 2] = a[k] * b[k]
        out[k, 3] = a[k] / b[k]
        out[k, 4] = -a[k]
        out[k, 5] = kj.bfloat16(f[k])  # float32 -> bfloat16: nearest, ties to even
        out[k, 6] = kj.bfloat16(i[k])
        out[k, 7] = math.sqrt(abs(a[k]))
        out[k, 8] = max(a[k], b[k]) if a[k] < b[k] else kj.bfloat16(0.5)


def test_arithmetic_and_conversions_bit_for_bit(backend):
    n = 300
    a = (rng.standard_normal(n, dtype=np.float32) * 10).astype(BF16)
    b = (rng.standard_normal(n, dtype=np.float32) * 10).astype(BF16)
    f = rng.standard_normal(n, dtype=np.float32) * 1e3
    # exact ties between two bfloat16 (low 16 bits 0x8000) and the largest floats (to inf)
    f[:20] = (f[:20].view(np.uint32) & 0xFFFF0000 | 0x8000).view(np.float32)
    f[20:22] = [np.finfo(np.float32).max, -np.finfo(np.float32).max]
    i = rng.integers(-300, 300, n).astype(np.int32)
    out = kj.to_device(np.full((n, 9), np.nan, np.float32).astype(BF16))
    bf16_ops[2, 256](out, kj.to_device(a), kj.to_device(b), kj.to_device(f), kj.to_device(i))
    af, bf_ = a.astype(np.float32), b.astype(np.float32)
    expect = np.stack([a + b, a - b, a * b, a / b, -a, f.astype(BF16), i.astype(BF16),
                       np.sqrt(np.abs(af)).astype(BF16),
                       np.where(af < bf_, np.maximum(a, b), BF16.type(0.5))], axis=1)
    np.testing.assert_array_equal(out.copy_to_host().view(np.uint16), expect.view(np.uint16))
    ptx = compile_for_gpu(bf16_ops)[0]
    assert "cvt.rn.bf16.f32" in ptx


@kj.jit
def bf16_to_wide(out, a):
    k = kj.grid(1)
    if k < a.shape[0]:
        out[k, 0] = a[k]  # bfloat16 -> float32: exact
        out[k, 1] = a[k] * 2.5  # a Python float is weak: the product stays bfloat16
        out[k, 2] = a[k] * kj.float32(2.5)  # float32 wins
        out[k, 3] = kj.bfloat16(1.00390625) + a[k]  # the constant rounds to 1.0 first


def test_widening_weak_literals_and_constants(backend):
    a = rng.standard_normal(64, dtype=np.float32).astype(BF16)
    out = kj.to_device(np.full((64, 4), np.nan, np.float32))
    bf16_to_wide[1, 64](out, kj.to_device(a))
    af = a.astype(np.float32)
    expect = np.stack([af, (a * BF16.type(2.5)).astype(np.float32), af * np.float32(2.5),
                       (BF16.type(1.0) + a).astype(np.float32)], axis=1)
    np.testing.assert_array_equal(out.copy_to_host(), expect)
    assert convert_const(1.00390625, kj.bfloat16) == 1.0
    assert convert_const(3.4e38, kj.bfloat16) == math.inf


def test_dlpack_code_of_bfloat16(backend):
    x = kj.to_device(rng.standard_normal(8, dtype=np.float32).astype(BF16))
    cap = dlpack.to_dlpack_capsule(x, 1)
    t = dlpack.consume(type("Holder", (), {"__dlpack__": lambda self, **k: cap})())
    try:
        assert t.dtype == BF16 and t.ptr == x.ptr
    finally:
        dlpack.release(t.address)


@kj.jit
def unrolled(out, x):
    i = kj.threadIdx.x
    t = (x[i], x[i] * 2.0, x[i] * 3.0)
    for j in kj.static_range(3):
        out[i, j] = t[j]  # j is a constant in each copy: it may index a tuple
    for j in kj.static_range(1, 8, 3):
        out[i, 3 + j // 3] = j


def test_static_range_unrolls(backend):
    x = rng.standard_normal(32, dtype=np.float32)
    out = kj.to_device(np.full((32, 6), np.nan, np.float32))
    unrolled[1, 32](out, kj.to_device(x))
    expect = np.stack([x, x * 2, x * 3, np.full(32, 1.0), np.full(32, 4.0), np.full(32, 7.0)],
                      axis=1).astype(np.float32)
    np.testing.assert_array_equal(out.copy_to_host(), expect)
    assert list(kj.static_range(3)) == [0, 1, 2]  # outside kernels, it is range


def static_break(out):
    for j in kj.static_range(4):
        if out[j] > 0:
            break


def static_bound(out, n):
    for j in kj.static_range(n):
        out[j] = 0


def static_assigned(out):
    for j in kj.static_range(4):
        j = 2
        out[j] = 1


@pytest.mark.parametrize("kernel, snippet, words", [
    (static_break, "break", "'break' and 'continue' cannot leave a kj.static_range() loop"),
    (static_bound, "n)", "kj.static_range()'s bounds must be a constant integer"),
    (static_assigned, "j = 2", "the loop variable 'j' of kj.static_range() cannot be assigned"),
])
def test_static_range_errors_are_located(kernel, snippet, words):
    sig = "void(float32[::1], int32)" if kernel is static_bound else "void(float32[::1])"
    err = compile_error(kernel, sig, kj.CompileError)
    assert_located(err, kernel, snippet)
    assert words in str(err)
    assert isinstance(err, UnsupportedError) == (kernel is not static_bound)
