"""What the attention kernel adds to kj.wgmma, end to end: the register-A form of
``kj.wgmma.mma_async`` (A as four 32-bit words a thread per k16 slice), the conversion of a
float32 accumulator into those words (``kj.wgmma.acc_to_a``) and ``kj.ex2_approx``. On the cpu
backend in CI (which executes the hardware's fragment layouts), their PTX assembled by ptxas for
sm_90a, and the same checks under ``gpu``."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from tests.lib import bf16data
from tests.located import assert_located

RNG = np.random.default_rng()
K = 64                      # P's columns: four k16 slices of the second GEMM
P_REGS = tuple(range(K // 2))
DTYPES = {"f16": kj.float16, "bf16": kj.bfloat16}


def fragment_coords(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of each thread's accumulator element i of an m64nN tile (PTX ISA)."""
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    warp, lane = t // 32, t % 32
    g, q = lane // 4, lane % 4
    return 16 * warp + g + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * q + i % 2


def make_pv(dtype, bn: int, trans_b: int):
    """D (64 x bn) = P (64 x 64) @ B.T, P given in the accumulator layout and fed to wgmma from
    registers. B in shared memory with the 128-byte swizzle, as TMA writes a tile: K-major
    (``trans_b`` 0: B is bn x 64, rows of 64 k) or MN-major (1: B.T is given, 64 x bn, rows of
    n in atoms of 64 columns, as attention's V tile)."""
    regs = tuple(range(bn // 2))

    @kj.jit
    def pv(d, p, b):
        sb = kj.shared.array(bn * K, dtype)
        acc = kj.local.array(K // 2, kj.float32)
        words = kj.local.array(K // 4, kj.uint32)
        out = kj.local.array(bn // 2, kj.float32)
        t = kj.threadIdx.x
        for i in P_REGS:
            acc[i] = p[t, i]
        kj.wgmma.acc_to_a(acc, words, dtype, n=K)
        for e in range(t, bn * K, 128):
            if trans_b:  # b is (k, n): atom n // 64 holds 64 rows (k) of 128 bytes
                kk, n = e // bn, e % bn
                sb[(n // 64) * 64 * K + kk * 64 + (((n % 64) // 8) ^ (kk % 8)) * 8 + n % 8] = \
                    b[kk, n]
            else:
                r, kk = e // K, e % K
                sb[r * K + ((kk // 8) ^ (r % 8)) * 8 + kk % 8] = b[r, kk]
        kj.wgmma.fence_proxy_async()
        kj.syncthreads()
        kj.wgmma.fence()
        for s in kj.static_range(K // 16):
            if trans_b:  # the next 16 rows of k; the next atom of n is 64 * 128 bytes on
                db = kj.wgmma.descriptor(sb, 16 * 64 * s, swizzle=128,
                                         leading_byte_offset=64 * 128, stride_byte_offset=1024)
            else:
                db = kj.wgmma.descriptor(sb, 16 * s, swizzle=128, stride_byte_offset=1024)
            kj.wgmma.mma_async(out, words[4 * s:], db, shape=(64, bn, 16), dtype=dtype,
                               scale_d=s > 0, trans_b=trans_b)
        kj.wgmma.commit_group()
        kj.wgmma.wait_group(0, out)
        for i in regs:
            d[t, i] = out[i]
    return pv


_KERNELS: dict = {}


def pv_kernel(name: str, bn: int, trans_b: int = 0):
    key = (name, bn, trans_b)
    if key not in _KERNELS:
        _KERNELS[key] = make_pv(DTYPES[name], bn, trans_b)
    return _KERNELS[key]


def _pv_case(name: str, bn: int, exact: bool, trans_b: int = 0):
    if exact:  # small integers: every sum exact, the GPU and the cpu agree bit for bit
        p = RNG.integers(-8, 9, (64, K)).astype(np.float32)
        b = RNG.integers(-8, 9, (bn, K)).astype(np.float32)
    else:  # values that round: acc_to_a rounds to nearest even, as cvt.rn does
        p = RNG.standard_normal((64, K)).astype(np.float32)
        b = RNG.integers(-8, 9, (bn, K)).astype(np.float32)
    rows, cols = fragment_coords(K)
    given = np.ascontiguousarray(b.T if trans_b else b)
    dev_b = kj.to_device(given.astype(np.float16)) if name == "f16" else \
        bf16data.to_device(given)
    d = kj.to_device(np.full((128, bn // 2), np.nan, np.float32))  # poisoned
    pv_kernel(name, bn, trans_b)[1, 128](d, kj.to_device(np.ascontiguousarray(p[rows, cols])),
                                         dev_b)
    p16 = _round(p, name).astype(np.float64)
    want = p16 @ b.astype(np.float64).T
    drow, dcol = fragment_coords(bn)
    got = d.copy_to_host()
    if exact:
        np.testing.assert_array_equal(got, want[drow, dcol])
    else:
        bound = np.abs(p16) @ np.abs(b.astype(np.float64)).T
        assert np.all(np.abs(got - want[drow, dcol]) <= 4 * K * 2.0 ** -24 * bound[drow, dcol])


def _round(x: np.ndarray, name: str) -> np.ndarray:
    """float32 ``x`` rounded to the 16-bit type (nearest, ties to even), back as float32."""
    return x.astype(np.float16).astype(np.float32) if name == "f16" else bf16data.round_bf16(x)


@pytest.mark.parametrize("name", ["f16", "bf16"])
@pytest.mark.parametrize("bn, exact, trans_b", [(64, True, 0), (128, False, 0), (64, True, 1),
                                                (128, False, 1)])
def test_register_a_mma(kj_backend, name, bn, exact, trans_b):
    _pv_case(name, bn, exact, trans_b)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["f16", "bf16"])
@pytest.mark.parametrize("bn", [64, 128, 256])
@pytest.mark.parametrize("trans_b", [0, 1])
def test_register_a_mma_gpu(kj_backend, name, bn, trans_b):
    _pv_case(name, bn, True, trans_b)
    _pv_case(name, bn, False, trans_b)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_register_a_ptx(trans_b):
    ptx = kj.compile_ptx(pv_kernel("bf16", 128, trans_b), "void(float32[:, :], float32[:, :], "
                         "bfloat16[:, :])", arch="sm_90")  # autouse: ptxas -arch=sm_90a
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    assert f", p, 1, 1, {trans_b};" in ptx
    assert "cvt.rn.bf16x2.f32" in ptx
    assert ".local" not in ptx  # the words and the accumulators stay in registers


# --- ex2.approx ------------------------------------------------------------------------------------

@kj.jit
def exp2_kernel(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = kj.ex2_approx(x[i])


def _exp2_case():
    x = np.concatenate([RNG.uniform(-100, 100, 1000), [0.0, -np.inf, np.inf, np.nan, -150.0]])
    x = x.astype(np.float32)
    out = kj.to_device(np.full_like(x, np.nan))
    exp2_kernel[-(-x.size // 128), 128](out, kj.to_device(x))
    got, want = out.copy_to_host(), np.exp2(x.astype(np.float64))
    finite = np.isfinite(want) & (want > 2.0 ** -126)
    assert np.all(np.abs(got[finite] - want[finite]) <= 2.0 ** -21 * want[finite])
    # what a softmax relies on: exp2(-inf) = 0, exp2(0) = 1; inf and NaN pass through
    np.testing.assert_array_equal(got[-5:-1], [1.0, 0.0, np.inf, np.nan])
    assert got[-1] == 0.0  # 2**-150: below float32's normals, flushed (ftz) on the GPU


def test_ex2_approx(kj_backend):
    _exp2_case()


@pytest.mark.gpu
def test_ex2_approx_gpu(kj_backend):
    _exp2_case()


def test_ex2_approx_ptx():
    ptx = kj.compile_ptx(exp2_kernel, "void(float32[:], float32[:])", arch="sm_80")
    assert "ex2.approx.ftz.f32" in ptx


# --- located errors -------------------------------------------------------------------------------

def rs_trans(acc, w):
    sb = kj.shared.array(1024, kj.float16)
    kj.wgmma.mma_async(acc, w, kj.wgmma.descriptor(sb), shape=(64, 64, 16), trans_a=1)


def rs_words_type(acc, w):
    sb = kj.shared.array(1024, kj.float16)
    kj.wgmma.mma_async(acc, acc, kj.wgmma.descriptor(sb), shape=(64, 64, 16))


def pack_out(acc, w):
    kj.wgmma.acc_to_a(acc, acc, n=64)


def pack_n(acc, w):
    kj.wgmma.acc_to_a(acc, w, n=24)


def pack_unknown_n(acc, w):
    kj.wgmma.acc_to_a(acc, w)


def pack_dtype(acc, w):
    kj.wgmma.acc_to_a(acc, w, kj.float32, n=64)


def exp2_complex(acc, w):
    acc[0] = kj.ex2_approx(1j)


@pytest.mark.parametrize("fn, snippet, words", [
    (rs_words_type, "acc, kj.wgmma.descriptor", "A from registers is a 1-d uint32 array"),
    (rs_trans, "1)", "A from registers has no transpose"),
    (pack_out, "acc, n=64", "writes the A operand's registers into a 1-d uint32 array"),
    (pack_n, "24)", "multiple of 16 from 16 to 256"),
    (pack_unknown_n, "kj.wgmma.acc_to_a(acc, w)", "needs n"),
    (pack_dtype, "kj.float32", "packs to float16 or bfloat16, got float32"),
    (exp2_complex, "1j", "takes a real number"),
], ids=lambda v: getattr(v, "__name__", None))
def test_typing_errors_are_located(fn, snippet, words):
    kernel = kj.jit(fn)
    with pytest.raises(kj.CompileError, match=words) as info:
        kj.compile_ptx(kernel, "void(float32[::1], uint32[::1])", arch="sm_90")
    assert_located(info.value, fn, snippet)
