"""kj.mma, kj.ldmatrix and kj.cp_async: every fragment layout exact (the PTX ISA's, written
out in kaiojit/intrinsics/tensorcore.py) on the cpu backend and, under the gpu marker, on a GPU;
the GEMM of examples/gemm.py at sizes that are not multiples of its tiles; the PTX assembled
for sm_90; located errors."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.errors import TypingError, UnsupportedError
from kaiojit.lower.nvptx import NVPTXTarget
from tests.kir.lowering import assert_at, llvm_ir
from tests.lib import bf16data
from tests.lib.conftest import compile_for_gpu
from tests.lib.test_examples import load
from tests.located import assert_located, compile_error

rng = np.random.default_rng()


@kj.jit
def mma_k16(d, a, b, c):
    """One m16n8k16 mma, each lane's fragments gathered as the documented layout says."""
    lane = kj.laneid
    g = lane // 4
    t = lane % 4
    fa = (a[g, 2 * t], a[g, 2 * t + 1], a[g + 8, 2 * t], a[g + 8, 2 * t + 1],
          a[g, 2 * t + 8], a[g, 2 * t + 9], a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9])
    fb = (b[2 * t, g], b[2 * t + 1, g], b[2 * t + 8, g], b[2 * t + 9, g])
    fc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = kj.mma(fa, fb, fc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]


@kj.jit
def mma_tf32(d, a, b, c):
    lane = kj.laneid
    g = lane // 4
    t = lane % 4
    fa = (a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4])
    fb = (b[t, g], b[t + 4, g])
    fc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = kj.mma(fa, fb, fc)
    for h in kj.static_range(4):
        d[g + 8 * (h // 2), 2 * t + h % 2] = r[h]


def _operands(case: str, k: int):
    """Integer-valued operands (exact in every input type and in float32 sums): a row
    permutation as A, a column selection as B, or both random."""
    a = rng.integers(-8, 9, (16, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, 8)).astype(np.float32)
    if case == "permute_a":
        a = np.eye(16, k, dtype=np.float32)[rng.permutation(16)]
    elif case == "select_b":
        b = np.zeros((k, 8), np.float32)
        b[rng.permutation(k)[:8], np.arange(8)] = 1.0
    c = rng.integers(-100, 101, (16, 8)).astype(np.float32)
    return a, b, c


@pytest.mark.parametrize("case", ["permute_a", "select_b", "random"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "tf32"])
def test_mma_fragment_layout(backend, dtype, case):
    k = 8 if dtype == "tf32" else 16
    a, b, c = _operands(case, k)
    d = kj.to_device(np.full((16, 8), np.nan, np.float32))
    kernel = mma_tf32 if dtype == "tf32" else mma_k16
    if dtype == "bfloat16":
        da, db = bf16data.to_device(a), bf16data.to_device(b)
    else:
        cast = np.float16 if dtype == "float16" else np.float32
        da, db = kj.to_device(a.astype(cast)), kj.to_device(b.astype(cast))
    kernel[1, 32](d, da, db, kj.to_device(c))
    np.testing.assert_array_equal(d.copy_to_host(), a @ b + c)
    compile_for_gpu(kernel)


def test_tf32_reads_nineteen_bits(backend):
    """The tensor core ignores the low 13 mantissa bits of a tf32 operand."""
    a = np.zeros((16, 8), np.float32)
    a[:, 0] = 1.0 + 2.0 ** -11 + 2.0 ** -12  # below tf32's 10 mantissa bits: dropped
    a[:, 1] = 1.0 + 2.0 ** -10  # kept
    b = np.ones((8, 8), np.float32)
    d = kj.to_device(np.full((16, 8), np.nan, np.float32))
    mma_tf32[1, 32](d, kj.to_device(a), kj.to_device(b), kj.to_device(np.zeros((16, 8),
                                                                               np.float32)))
    np.testing.assert_array_equal(d.copy_to_host(), np.full((16, 8), 2.0 + 2.0 ** -10))


@kj.jit
def ldmatrix_all(out, src, rows):
    """Lane l gives row rows[l] of a 32 x 8 shared matrix to x1, x2 and x4, plain and
    transposed; out[l, v, e] is element e of variant v."""
    s = kj.shared.array((32, 8), kj.uint16)
    lane = kj.laneid
    for j in range(8):
        s[lane, j] = src[lane, j]
    kj.syncwarp()
    r = rows[lane]
    x1 = kj.ldmatrix(s, (r, 0), 1)
    x2 = kj.ldmatrix(s, (r, 0), num=2)
    x4 = kj.ldmatrix(s, (r, 0))
    t1 = kj.ldmatrix(s, (r, 0), 1, True)
    t2 = kj.ldmatrix(s, (r, 0), 2, trans=True)
    t4 = kj.ldmatrix(s, (r, 0), 4, True)
    for e in kj.static_range(2):
        out[lane, 0, e] = x1[e]
        out[lane, 3, e] = t1[e]
    for e in kj.static_range(4):
        out[lane, 1, e] = x2[e]
        out[lane, 4, e] = t2[e]
    for e in kj.static_range(8):
        out[lane, 2, e] = x4[e]
        out[lane, 5, e] = t4[e]


def test_ldmatrix_fragment_layout(backend):
    src = rng.permutation(1 << 16)[:256].astype(np.uint16).reshape(32, 8)  # distinct values
    rows = rng.permutation(32).astype(np.int32)
    poison = np.uint16(0xDEAD)
    out = kj.to_device(np.full((32, 6, 8), poison, np.uint16))
    ldmatrix_all[1, 32](out, kj.to_device(src), kj.to_device(rows))
    got = out.copy_to_host()
    expect = np.full((32, 6, 8), poison, np.uint16)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for v, num in enumerate((1, 2, 4)):
            for m in range(num):
                mat = src[rows[8 * m:8 * m + 8]]  # matrix m: the rows lanes 8m..8m+7 gave
                for h in range(2):
                    expect[lane, v, 2 * m + h] = mat[g, 2 * t + h]
                    expect[lane, v + 3, 2 * m + h] = mat[2 * t + h, g]
    np.testing.assert_array_equal(got, expect)
    compile_for_gpu(ldmatrix_all)


@kj.jit
def cp_async_chunks(out, src, valid):
    """Thread i copies 16 bytes of src into shared memory with valid[i] bytes read, and 8
    bytes with half of that; the rest of each chunk must be zero-filled."""
    s16 = kj.shared.array(256, kj.float32)
    s8 = kj.shared.array(128, kj.float32)
    i = kj.threadIdx.x
    for j in range(4):
        s16[4 * i + j] = -1.0
    for j in range(2):
        s8[2 * i + j] = -1.0
    kj.syncthreads()
    kj.cp_async(s16, 4 * i, src, 4 * i, 16, valid[i])
    kj.cp_async(s8, 2 * i, src, 4 * i, size=8, src_size=valid[i] // 8 * 4)
    kj.cp_async_commit()
    kj.cp_async_wait(0)
    kj.syncthreads()
    for j in range(4):
        out[i, j] = s16[4 * i + j]
    for j in range(2):
        out[i, 4 + j] = s8[2 * i + j]


def test_cp_async_copies_and_zero_fills(backend):
    n = 64
    src = rng.standard_normal(4 * n).astype(np.float32) + 5.0
    valid = (rng.integers(0, 5, n) * 4).astype(np.int32)  # 0, 4, 8, 12 or 16 bytes
    out = kj.to_device(np.full((n, 6), np.nan, np.float32))
    cp_async_chunks[1, n](out, kj.to_device(src), kj.to_device(valid))
    expect = np.zeros((n, 6), np.float32)
    for i in range(n):
        expect[i, :valid[i] // 4] = src[4 * i:4 * i + valid[i] // 4]
        expect[i, 4:4 + valid[i] // 8] = src[4 * i:4 * i + valid[i] // 8]
    np.testing.assert_array_equal(out.copy_to_host(), expect)
    ptx = "".join(compile_for_gpu(cp_async_chunks))
    assert "cp.async.cg.shared.global" in ptx and "cp.async.ca.shared.global" in ptx
    assert "cp.async.wait_group 0;" in ptx and "cp.async.commit_group;" in ptx


@pytest.fixture(scope="module")
def gemm():
    return load("gemm")  # one module: its kernels compile once for all the tests here


SMALL = {"bm": 64, "bn": 32, "bk": 16, "wm": 32, "wn": 16, "stages": 3}  # 4 warps, 4 mma a K step


def test_gemm_example_at_sizes_off_the_tiles(backend, gemm):
    """The example's kernel in a small configuration (the cpu backend compiles it quickly):
    (72, 45, 40) and (130, 70, 56) have partial tiles, zero-filled by cp.async; (37, 45, 23)
    has rows that do not start 16-byte aligned, loaded element by element; (16, 8, 16) is one
    mma tile."""
    cfg = gemm.GemmConfig(**SMALL)
    kernel = gemm.make_gemm(cfg)
    for m, n, k in [(72, 48, 40), (130, 70, 56), (37, 45, 23), (16, 8, 16)]:
        a = bf16data.round_bf16(rng.standard_normal((m, k), dtype=np.float32))
        b = bf16data.round_bf16(rng.standard_normal((k, n), dtype=np.float32))
        out = kj.to_device(np.full((m, n), np.nan, np.float32))
        gemm.matmul(bf16data.to_device(a), bf16data.to_device(b), out, kernel, cfg)
        expect = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(out.copy_to_host(), expect, rtol=1e-5, atol=1e-5)
    compile_for_gpu(kernel)


def test_gemm_example_ptx(gemm):
    """The default configuration: 32 mma a K step, fragments in registers, assembled for sm_90."""
    ptx = kj.compile_ptx(gemm.gemm_bf16.py_func,
                         "void(bfloat16[:, ::1], bfloat16[:, ::1], bfloat16[:, ::1])")
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 4
    assert ptx.count("cp.async.cg.shared.global") == 4
    assert "ld.local" not in ptx and "st.local" not in ptx  # fragments stay in registers


@pytest.mark.gpu
def test_gemm_example_bf16_output(gemm):
    """A bfloat16 C (the benchmark's), on the GPU only: the cpu backend's compile of a second
    signature of this large kernel would cost the suite seconds."""
    if not kj.is_cuda_available():
        pytest.skip("needs a CUDA device")
    m, n, k = 48, 40, 64
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    da = bf16data.to_device(a)
    out = bf16data.empty((m, n), da)
    gemm.matmul(da, bf16data.to_device(b), out)
    # integers below 256 in magnitude: exact in a bfloat16 C too
    np.testing.assert_array_equal(bf16data.to_host(out), a @ b)


# --- errors -------------------------------------------------------------------------------------

def mma_short_a(d, a):
    kj.mma((a[0], a[1]), (a[0], a[1], a[2], a[3]), (0.0, 0.0, 0.0, 0.0))


def mma_mixed_b(d, a):
    x = a[0]
    kj.mma((x, x, x, x, x, x, x, x), (x, x, x, d[0]), (0.0, 0.0, 0.0, 0.0))


def ldmatrix_three(d, a):
    s = kj.shared.array((16, 8), kj.bfloat16)
    kj.ldmatrix(s, (0, 0), 3)


def ldmatrix_float32(d, a):
    kj.ldmatrix(d, 0)


def cp_async_size(d, a):
    kj.cp_async(a, 0, a, 8, 12)


def mma_on_sm75(d, a):
    x = a[0]
    r = kj.mma((x, x, x, x, x, x, x, x), (x, x, x, x), (0.0, 0.0, 0.0, 0.0))
    d[0] = r[0]


@pytest.mark.parametrize("kernel, snippet, words", [
    (mma_short_a, "(a[0], a[1])", "A fragment must be a tuple of 8 bfloat16 values"),
    (mma_mixed_b, "(x, x, x, d[0])",
     "B fragment must be a tuple of 4 bfloat16 values; element 3 is float32"),
    (ldmatrix_three, "3", "kj.ldmatrix() loads 1, 2 or 4 matrices, got num=3"),
    (ldmatrix_float32, "d, 0", "needs a shared array of 16-bit elements"),
    (cp_async_size, "12", "kj.cp_async() copies 4, 8 or 16 bytes, got size=12"),
])
def test_typing_errors_are_located(kernel, snippet, words):
    err = compile_error(kernel, "void(float32[::1], bfloat16[::1])", TypingError)
    assert_located(err, kernel, snippet)
    assert words in str(err)


def test_mma_needs_sm_80():
    with pytest.raises(UnsupportedError) as info:
        llvm_ir(mma_on_sm75, "void(float32[::1], bfloat16[::1])", NVPTXTarget("sm_75"))
    assert_at(info.value, mma_on_sm75, "kj.mma(")
    assert "kj.mma() needs sm_80 or newer" in str(info.value)
