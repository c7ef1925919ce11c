"""End to end: kj.wgmma (warpgroup MMA for sm_90a). Fragment layout, descriptors with every
swizzle, GEMMs with masked edges, against NumPy; sm_90a PTX (assembled by ptxas through the
autouse check) and located errors. The cpu backend runs these in CI; ``-m gpu`` runs the
marked ones on a GPU (they are the same checks)."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from tests.located import assert_located

RNG = np.random.default_rng()
KT = 64  # the K of a shared tile
SWIZZLES = (None, 128, 64, 32)
FRAGMENT32 = tuple(range(32))  # the accumulator is indexed by constants only (see the docs)


def fragment_coords(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of each thread's accumulator element i for m64nNk16 (PTX ISA)."""
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    warp, lane = t // 32, t % 32
    g, q = lane // 4, lane % 4
    return 16 * warp + g + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * q + i % 2


def make_gemm(swizzle, bn: int):
    """C[m, n] = A[m, k] @ B[n, k].T, 64 x bn tiles, A and B staged into shared memory in the
    canonical K-major layout of ``swizzle`` with ordinary loads and stores."""
    width = swizzle or 16          # bytes of a row of the layout (a core matrix row: 16)
    mask = {None: 0, 128: 7, 64: 3, 32: 1}[swizzle]
    per_row = width // 2           # float16 elements in such a row
    regs = bn // 2
    fragment = tuple(range(regs))  # loops over a tuple unroll: acc stays in registers

    @kj.jit(device=True)
    def smem_index(r, kk, rows):
        if width == 16:            # no swizzle: 8x16-byte core matrices, K-adjacent (LBO 128)
            byte = (r % 8) * 16 + (r // 8) * (KT * 16) + (kk % 8) * 2 + (kk // 8) * 128
        else:                      # rows of `width` bytes, one atom column after another
            byte = (kk // per_row) * rows * width + r * width + (kk % per_row) * 2
            byte = byte ^ (((byte >> 7) & mask) << 4)
        return byte // 2

    @kj.jit(device=True)
    def desc(tile, kk, rows):
        if width == 16:
            return kj.wgmma.descriptor(tile, kk * 128, swizzle=None, leading_byte_offset=128,
                                       stride_byte_offset=KT * 16)
        k = kk * 16
        return kj.wgmma.descriptor(tile, (k // per_row) * rows * per_row + k % per_row,
                                   swizzle=swizzle, stride_byte_offset=8 * width)

    @kj.jit
    def gemm(c, a, b, m, n, k):
        sa = kj.shared.array(64 * KT, kj.float16)
        sb = kj.shared.array(bn * KT, kj.float16)
        acc = kj.local.array(regs, kj.float32)
        t = kj.threadIdx.x
        m0 = kj.blockIdx.y * 64
        n0 = kj.blockIdx.x * bn
        for k0 in range(0, k, KT):
            for e in range(t, 64 * KT, 128):
                r, kk = e // KT, e % KT
                v = kj.float16(0)
                if m0 + r < m and k0 + kk < k:
                    v = a[m0 + r, k0 + kk]
                sa[smem_index(r, kk, 64)] = v
            for e in range(t, bn * KT, 128):
                r, kk = e // KT, e % KT
                v = kj.float16(0)
                if n0 + r < n and k0 + kk < k:
                    v = b[n0 + r, k0 + kk]
                sb[smem_index(r, kk, bn)] = v
            kj.wgmma.fence_proxy_async()
            kj.syncthreads()
            kj.wgmma.fence()
            for kk in range(KT // 16):
                kj.wgmma.mma_async(acc, desc(sa, kk, 64), desc(sb, kk, bn), shape=(64, bn, 16),
                                   scale_d=(k0 > 0 or kk > 0))
            kj.wgmma.commit_group()
            kj.wgmma.wait_group(0, acc)
            kj.syncthreads()
        warp, lane = t // 32, t % 32
        for i in fragment:
            row = m0 + 16 * warp + lane // 4 + 8 * ((i // 2) % 2)
            col = n0 + 8 * (i // 4) + 2 * (lane % 4) + i % 2
            if row < m and col < n:
                c[row, col] = acc[i]

    return gemm


_GEMMS: dict = {}


def gemm_kernel(swizzle, bn):
    key = (swizzle, bn)
    if key not in _GEMMS:
        _GEMMS[key] = make_gemm(swizzle, bn)
    return _GEMMS[key]


def run_gemm(a: np.ndarray, b: np.ndarray, swizzle=128, bn=128) -> np.ndarray:
    m, k = a.shape
    n = b.shape[0]
    c = kj.to_device(np.full((m, n), np.nan, np.float32))  # poisoned: every element written
    grid = (-(-n // bn), -(-m // 64))
    gemm_kernel(swizzle, bn)[grid, 128](c, kj.to_device(a), kj.to_device(b), m, n, k)
    return c.copy_to_host()


# --- the fragment layout -------------------------------------------------------------------------

@kj.jit
def raw_fragment(out, a, b):
    """One m64n64k16 from unswizzled tiles; each thread stores its raw 32 accumulators."""
    sa = kj.shared.array(64 * 16, kj.float16)
    sb = kj.shared.array(64 * 16, kj.float16)
    acc = kj.local.array(32, kj.float32)
    t = kj.threadIdx.x
    for i in FRAGMENT32:
        acc[i] = out[t, i]  # scale_d=1 adds to what was there
    for e in range(t, 64 * 16, 128):
        sa[e] = a[e]
        sb[e] = b[e]
    kj.wgmma.fence_proxy_async()
    kj.syncthreads()
    da = kj.wgmma.descriptor(sa, leading_byte_offset=128, stride_byte_offset=256)
    db = kj.wgmma.descriptor(sb, leading_byte_offset=128, stride_byte_offset=256)
    kj.wgmma.fence()
    kj.wgmma.mma_async(acc, da, db, shape=(64, 64, 16))
    kj.wgmma.commit_group()
    kj.wgmma.wait_group(0, acc)
    for i in FRAGMENT32:
        out[t, i] = acc[i]


def core_matrix_pack(x: np.ndarray) -> np.ndarray:
    """A (rows, 16) float16 operand in the unswizzled K-major layout: LBO 128, SBO 256."""
    r, k = np.meshgrid(np.arange(x.shape[0]), np.arange(16), indexing="ij")
    out = np.empty(x.size, np.float16)
    out[(r % 8) * 8 + (r // 8) * 128 + (k % 8) + (k // 8) * 64] = x
    return out


def _fragment_case():
    a = RNG.integers(-4, 5, (64, 16)).astype(np.float16)
    b = RNG.integers(-4, 5, (64, 16)).astype(np.float16)
    d0 = RNG.integers(-50, 50, (128, 32)).astype(np.float32)
    out = kj.to_device(d0)
    raw_fragment[1, 128](out, kj.to_device(core_matrix_pack(a)), kj.to_device(core_matrix_pack(b)))
    rows, cols = fragment_coords(64)
    d = a.astype(np.float32) @ b.astype(np.float32).T
    # small integers: every partial sum is exact, so the GPU's and the cpu's agree bit for bit
    np.testing.assert_array_equal(out.copy_to_host(), d[rows, cols] + d0)


def test_fragment_layout(kj_backend):
    _fragment_case()


@pytest.mark.gpu
def test_fragment_layout_gpu(kj_backend):
    _fragment_case()


# --- descriptors and swizzles: identity and permutation matrices --------------------------------

def _permutation_case(swizzle, bn):
    n = bn
    a = RNG.integers(-1000, 1000, (64, n)).astype(np.float16)
    perm = RNG.permutation(n)
    b = np.zeros((n, n), np.float16)
    b[np.arange(n), perm] = 1  # C = A @ B.T picks column perm[j] of A into column j
    np.testing.assert_array_equal(run_gemm(a, b, swizzle, bn), a[:, perm].astype(np.float32))
    eye = np.eye(64, dtype=np.float16)
    bt = RNG.integers(-1000, 1000, (n, 64)).astype(np.float16)
    np.testing.assert_array_equal(run_gemm(eye, bt, swizzle, bn), bt.T.astype(np.float32))


@pytest.mark.parametrize("swizzle", SWIZZLES, ids=str)
def test_identity_and_permutation(kj_backend, swizzle):
    _permutation_case(swizzle, 64)


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", SWIZZLES, ids=str)
@pytest.mark.parametrize("bn", [64, 128, 256])
def test_identity_and_permutation_gpu(kj_backend, swizzle, bn):
    _permutation_case(swizzle, bn)


# --- GEMMs against NumPy -------------------------------------------------------------------------

def _gemm_case(m, n, k, swizzle, bn):
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((n, k)).astype(np.float16)
    got = run_gemm(a, b, swizzle, bn)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    # float32 sums of exact float16 products: the order differs from NumPy's (and on the GPU
    # is not defined), so the error bound is a few float32 ulps of the sum of |products|
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
    assert np.all(np.abs(got - want) <= 4 * k * np.finfo(np.float32).eps * bound + 1e-30)


@pytest.mark.parametrize("m, n, k, swizzle, bn", [
    (64, 128, 64, 128, 128),     # one tile, four k16 steps inside a 128B swizzle row
    (50, 72, 40, 128, 64),       # masked edges in m, n and k
    (64, 64, 128, None, 64),     # two K tiles, no swizzle
])
def test_gemm(kj_backend, m, n, k, swizzle, bn):
    _gemm_case(m, n, k, swizzle, bn)


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", SWIZZLES, ids=str)
@pytest.mark.parametrize("bn", [64, 128, 256])
def test_gemm_gpu(kj_backend, swizzle, bn):
    _gemm_case(200, 3 * bn - 24, 200, swizzle, bn)


# --- the target: sm_90a and located errors -------------------------------------------------------

SIG = "void(float32[:, :], float16[:], float16[:])"


def test_compiled_for_sm90a():
    ptx = kj.compile_ptx(raw_fragment, SIG, arch="sm_90")  # autouse: ptxas -arch=sm_90a
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx
    for op in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
               "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"):
        assert op in ptx
    assert ".shared .align 1024" in ptx


@pytest.mark.parametrize("bn", [8, 64, 128, 256])
def test_gemm_ptx_assembles(bn):
    gemm = gemm_kernel(128, bn)
    ptx = kj.compile_ptx(gemm, "void(float32[:, :], float16[:, :], float16[:, :], int64, int64, "
                               "int64)", arch="sm_90")  # autouse: ptxas -arch=sm_90a
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.f16.f16" in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_100"])
def test_other_arch_is_a_located_error(arch):
    with pytest.raises(kj.CompileError, match=f"needs exactly sm_90a; this kernel is compiled "
                                              f"for {arch}") as info:
        kj.compile_ptx(raw_fragment, SIG, arch=arch)
    assert_located(info.value, raw_fragment.py_func, "kj.wgmma.descriptor(sa")


def mma_shape(acc, da):
    kj.wgmma.mma_async(acc, da, da, shape=(64, 100, 16))


def mma_trans(acc, da):
    kj.wgmma.mma_async(acc, da, da, shape=(64, 64, 16), trans_b=1)


def mma_dtype(acc, da):
    kj.wgmma.mma_async(acc, da, da, shape=(64, 64, 16), dtype=kj.float32)


def mma_acc(acc, da):
    kj.wgmma.mma_async(da, da, da, shape=(64, 64, 16))


def mma_keyword(acc, da):
    kj.wgmma.mma_async(acc, da, da, shape=(64, 64, 16), scale=2)


def wait_acc(acc, da):
    kj.wgmma.wait_group(0, acc)


def wait_n(acc, da):
    kj.wgmma.wait_group(da)


def desc_swizzle(acc, da):
    sa = kj.shared.array(1024, kj.float16)
    acc[0] = kj.float32(kj.wgmma.descriptor(sa, swizzle=16))


def desc_sbo(acc, da):
    sa = kj.shared.array(1024, kj.float16)
    acc[0] = kj.float32(kj.wgmma.descriptor(sa, stride_byte_offset=1000))


@pytest.mark.parametrize("fn, snippet, words", [
    (mma_shape, "(64, 100, 16)", "shape=(64, N, 16) with N a multiple of 8"),
    (mma_trans, "1)", "trans_b=1 (an MN-major operand) is not supported"),
    (mma_dtype, "kj.float32)", "multiplies float16, bfloat16, float8_e4m3fn, float8_e5m2 inputs, got float32"),
    (mma_acc, "da, da, da", "accumulates into a 1-d float32 local array of N/2 = 32"),
    (mma_keyword, "2)", "has no argument 'scale'"),
    (wait_acc, "acc)", "acc must be the accumulator"),
    (wait_n, "da)", "n must be a constant integer"),
    (desc_swizzle, "16))", "swizzle=128, 64, 32 or None, got 16"),
    (desc_sbo, "1000)", "multiple of 16"),
], ids=lambda v: getattr(v, "__name__", None))
def test_typing_errors_are_located(fn, snippet, words):
    kernel = kj.jit(fn)
    with pytest.raises(kj.CompileError, match=words.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*")) as info:
        kj.compile_ptx(kernel, "void(float32[::1], uint64)", arch="sm_90")
    assert_located(info.value, fn, snippet)


def test_disk_cache_keeps_the_arch(tmp_path, monkeypatch):
    """A kernel compiled for sm_90 that became sm_90a comes back from the disk cache as
    sm_90a (SASS inspection and the occupancy calculator assemble for its arch)."""
    from kaiojit import diskcache
    from kaiojit.target import TargetSpec

    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    asked = TargetSpec("nvptx", "sm_90", 80)
    ck = raw_fragment.compile(SIG, asked)
    assert ck.target.arch == "sm_90a"
    lookup = diskcache.lookup_key(raw_fragment.py_func, SIG, ck.options, asked, kj.__version__)
    assert diskcache.store_kernel(lookup, ck) is not None
    back, _ = diskcache.load_kernel(lookup, raw_fragment.py_func, ck.signature, ck.options,
                                    asked)
    assert back.target.arch == "sm_90a" and back.ptx == ck.ptx


def test_benchmark_kernel(kj_backend):
    """The kernel benchmarks/gemm_wgmma.py times (two stages, registers two tiles ahead, int64
    words, dynamic shared memory) against NumPy, through two K tiles."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gemm_wgmma.py")
    spec = importlib.util.spec_from_file_location("bench_gemm_wgmma", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.check(128, 3 * 128, 256, 128) <= 1  # a partial group of block rows
