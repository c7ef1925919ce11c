"""End to end: Hopper's warp-specialization primitives (issue 32): kj.warpgroup (index,
setmaxnreg), kj.named_barrier, kj.stmatrix, kj.cvt_pack, fp8 wgmma, kj.sm_count. Each against
NumPy / ml_dtypes on the cpu backend (and, marked ``gpu``, on a GPU); every kernel's PTX is
assembled by ptxas through the autouse check (sm_90a where it needs it); bad input located."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import kaiojit as kj
from kaiojit.lib import pipeline
from kaiojit.runtime import set_backend
from kaiojit.testing import _backend
from tests.located import assert_located, compile_error

RNG = np.random.default_rng()


def _line_of(pyfunc, snippet: str) -> str:
    lines, first = inspect.getsourcelines(pyfunc.py_func)
    k = next(i for i, text in enumerate(lines) if snippet in text)
    return f"{inspect.getsourcefile(pyfunc.py_func)}:{first + k}"


# --- warpgroups and register reallocation --------------------------------------------------------

@kj.jit(max_registers=168)
def warpgroups(out):
    t = kj.threadIdx.x + kj.blockDim.x * kj.threadIdx.y
    wg = kj.warpgroup.index()
    if wg == 0:
        kj.warpgroup.reg_dealloc(40)
    else:
        kj.warpgroup.reg_alloc(232)
    out[t] = wg


@pytest.mark.parametrize("block", [(384, 1), (96, 4)], ids=str)
def test_warpgroup_index(kj_backend, block):
    n = block[0] * block[1]
    out = kj.to_device(np.full(n, -1, np.int32))
    warpgroups[1, block](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(n) // 128)


def test_setmaxnreg_ptx():
    ptx = kj.compile_ptx(warpgroups.py_func, "void(int32[::1])", arch="sm_90",
                         max_registers=168)
    assert ".target sm_90a" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    assert "shfl.sync.idx.b32" in ptx  # the index is lane 0's: warp-uniform for ptxas


def test_setmaxnreg_without_a_register_count_warns():
    with pytest.warns(kj.PerformanceWarning, match=r"pass @kj.jit\(max_registers=...\)"):
        kj.compile_ptx(warpgroups.py_func, "void(int32[::1])", arch="sm_90")


def reg_alloc_odd(out):
    kj.warpgroup.reg_alloc(236)


def reg_alloc_high(out):
    kj.warpgroup.reg_alloc(264)


def reg_dealloc_low(out):
    kj.warpgroup.reg_dealloc(16)


def reg_dealloc_runtime(out):
    kj.warpgroup.reg_dealloc(out[0])


@pytest.mark.parametrize("fn, snippet, words", [
    (reg_alloc_odd, "236)", "a multiple of 8 from 24 to 256 (setmaxnreg), got 236"),
    (reg_alloc_high, "264)", "got 264"),
    (reg_dealloc_low, "16)", "got 16"),
    (reg_dealloc_runtime, "out[0])", "must be a constant integer"),
], ids=lambda v: getattr(v, "__name__", None))
def test_register_totals_the_hardware_refuses_are_located(fn, snippet, words):
    err = compile_error(kj.jit(fn), "void(int32[::1])", arch="sm_90")
    assert words in str(err)
    assert_located(err, fn, snippet)


def test_setmaxnreg_needs_sm_90a():
    err = compile_error(warpgroups.py_func, "void(int32[::1])", arch="sm_80")
    assert "sm_90a" in str(err)
    assert_located(err, warpgroups.py_func, "kj.warpgroup.reg_dealloc(")


# --- named barriers --------------------------------------------------------------------------------

@kj.jit
def producer_consumer(out, data, rounds):
    """Warpgroup 0 writes a round's data to shared memory and arrives; the consumers sync on
    the same barrier (384 threads in all), read it, and tell the producer it may go on."""
    s = kj.shared.array(128, kj.float32)
    t = kj.threadIdx.x
    wg = kj.warpgroup.index()
    for r in range(rounds):
        if wg == 0:
            if r > 0:
                kj.named_barrier.sync(2, 384)         # the consumers have read round r - 1
            s[t] = data[r, t]
            kj.named_barrier.arrive(1, 384)           # round r is there; no waiting
        else:
            kj.named_barrier.sync(1, 384)
            out[r, t - 128] = s[(t - 128) % 128] * wg
            kj.named_barrier.arrive(2, 384)


def _producer_consumer_case():
    rounds = 3
    data = RNG.standard_normal((rounds, 128)).astype(np.float32)
    out = kj.to_device(np.full((rounds, 256), np.nan, np.float32))
    producer_consumer[1, 384](out, kj.to_device(data), rounds)
    want = np.concatenate([data, 2 * data], axis=1)
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_named_barriers_order_producer_and_consumers(kj_backend):
    _producer_consumer_case()


@kj.jit
def per_warpgroup_exchange(out, data):
    """Each warpgroup syncs on its own barrier (two ids at one statement), swapping halves."""
    s = kj.shared.array(256, kj.float32)
    t = kj.threadIdx.x
    wg = kj.warpgroup.index()
    v = data[t]
    for _ in range(3):
        s[t] = v
        kj.named_barrier.sync(1 + wg, 128)
        v = s[wg * 128 + (t + 64) % 128] + 1.0
        kj.named_barrier.sync(1 + wg, 128)
    out[t] = v


def test_named_barriers_of_each_warpgroup(kj_backend):
    data = RNG.standard_normal(256).astype(np.float32)
    out = kj.to_device(np.full(256, np.nan, np.float32))
    per_warpgroup_exchange[1, 256](out, kj.to_device(data))
    idx = np.arange(256)
    partner = idx // 128 * 128 + (idx + 64) % 128
    want = data
    for _ in range(3):
        want = want[partner] + np.float32(1)
    np.testing.assert_array_equal(out.copy_to_host(), want)


@kj.jit
def too_few_for_the_barrier(out):
    if kj.threadIdx.x < 128:
        kj.named_barrier.sync(3, 256)
    out[kj.threadIdx.x] = 1


@kj.jit
def a_phase_left_over(out):
    kj.named_barrier.sync(3, 64)   # 256 threads: four phases of 64
    kj.named_barrier.sync(4, 96)   # two phases of 96, and 64 threads that wait forever
    out[kj.threadIdx.x] = 1


@pytest.mark.parametrize("kernel, words", [
    (too_few_for_the_barrier, "only 128 of its 256 threads"),
    (a_phase_left_over, "only 64 of its 96 threads"),
], ids=lambda v: getattr(v, "__name__", None))
def test_a_named_barrier_that_cannot_complete_is_reported_on_the_cpu_backend(kernel, words):
    previous = set_backend(_backend("cpu"))  # on a GPU the first hangs
    try:
        out = kj.to_device(np.zeros(256, np.int32))
        with pytest.raises(kj.KernelError, match=words.replace("(", r"\(").replace(")", r"\)")
                           ) as info:
            kernel[1, 256](out)
        line = "kj.named_barrier.sync(4" if kernel is a_phase_left_over else \
            "kj.named_barrier.sync("
        assert _line_of(kernel, line) in str(info.value)
    finally:
        set_backend(previous)


def barrier_id(out):
    kj.named_barrier.sync(16, 128)


def barrier_count(out):
    kj.named_barrier.arrive(1, 100)


def barrier_float(out):
    kj.named_barrier.sync(1, 128.0)


@pytest.mark.parametrize("fn, snippet, words", [
    (barrier_id, "16,", "barriers 0 to 15, got id 16"),
    (barrier_count, "100)", "a multiple of 32 from 32 to 1024, got 100"),
    (barrier_float, "128.0)", "n must be an integer, got float64"),
], ids=lambda v: getattr(v, "__name__", None))
def test_named_barrier_misuse_is_located(fn, snippet, words):
    err = compile_error(kj.jit(fn), "void(int32[::1])", arch="sm_90")
    assert words in str(err)
    assert_located(err, fn, snippet)


def test_named_barrier_ptx():
    ptx = kj.compile_ptx(producer_consumer.py_func, "void(float32[:, ::1], float32[:, ::1], int32)",
                         arch="sm_90")
    assert "bar.arrive" in ptx and "bar.sync" in ptx


# --- stmatrix --------------------------------------------------------------------------------------

def _stmatrix_kernel(count: int, trans: bool):
    @kj.jit
    def store(out, regs):
        buf = kj.shared.array(256, kj.uint16)
        t = kj.threadIdx.x
        lane = t % 32
        for i in range(lane, 256, 32):
            buf[i] = 0xFFFF           # poisoned: what no matrix covers stays so
        kj.syncwarp()
        if count == 1:
            kj.stmatrix(buf, lane * 8, regs[t, 0], trans=trans)
        elif count == 2:
            kj.stmatrix(buf, lane * 8, regs[t, 0], regs[t, 1], trans=trans)
        else:
            kj.stmatrix(buf, lane * 8, regs[t, 0], regs[t, 1], regs[t, 2], regs[t, 3],
                        trans=trans)
        kj.syncwarp()
        for i in range(lane, 256, 32):
            out[i] = buf[i]
    return store


STMATRIX = {(c, tr): _stmatrix_kernel(c, tr) for c in (1, 2, 4) for tr in (False, True)}


def _stmatrix_case(count: int, trans: bool):
    regs = RNG.integers(0, 2 ** 32, (32, 4), dtype=np.uint64).astype(np.uint32)
    out = kj.to_device(np.zeros(256, np.uint16))
    STMATRIX[count, trans][1, 32](out, kj.to_device(regs))
    want = np.full((4, 8, 8), 0xFFFF, np.uint16)
    lanes = np.arange(32)
    for i in range(count):
        for h in range(2):  # lane l holds row l // 4, columns 2 (l % 4) + h of matrix i
            want[i, lanes // 4, 2 * (lanes % 4) + h] = (regs[:, i] >> (16 * h)) & 0xFFFF
        if trans:
            want[i] = want[i].T.copy()
    np.testing.assert_array_equal(out.copy_to_host().reshape(4, 8, 8), want)


@pytest.mark.parametrize("trans", [False, True], ids=["rows", "trans"])
@pytest.mark.parametrize("count", [1, 2, 4], ids=lambda c: f"x{c}")
def test_stmatrix(kj_backend, count, trans):
    _stmatrix_case(count, trans)


def stmatrix_f32(out):
    buf = kj.shared.array(64, kj.float32)
    kj.stmatrix(buf, 0, out[0])


def stmatrix_three(out):
    buf = kj.shared.array(64, kj.uint16)
    kj.stmatrix(buf, 0, out[0], out[1], out[2])


@pytest.mark.parametrize("fn, snippet, words", [
    (stmatrix_f32, "buf, 0", "16-bit elements into a shared array of a 16-bit type"),
    (stmatrix_three, "kj.stmatrix(", "give 1, 2 or 4 registers, got 3"),
], ids=lambda v: getattr(v, "__name__", None))
def test_stmatrix_misuse_is_located(fn, snippet, words):
    err = compile_error(kj.jit(fn), "void(uint32[::1])", arch="sm_90")
    assert words in str(err)
    assert_located(err, fn, snippet)


# --- packed conversions ----------------------------------------------------------------------------

PACKS = {
    "bfloat16": (kj.bfloat16, ml_dtypes.bfloat16, np.uint32, None),
    "float16": (kj.float16, np.float16, np.uint32, None),
    "float8_e4m3fn": (kj.float8_e4m3fn, ml_dtypes.float8_e4m3fn, np.uint16, 448.0),
    "float8_e5m2": (kj.float8_e5m2, ml_dtypes.float8_e5m2, np.uint16, 57344.0),
}


def _pack_kernel(dtype):
    @kj.jit
    def pack(out, lo, hi):
        i = kj.grid(1)
        if i < lo.size:
            out[i] = kj.cvt_pack(dtype, lo[i], hi[i])
    return pack


PACK_KERNELS = {name: _pack_kernel(v[0]) for name, v in PACKS.items()}


def _pack_case(name: str):
    _, np_type, packed, limit = PACKS[name]
    n = 4096
    scale = 10.0 ** RNG.integers(-9, 6, (2, n))  # subnormals to overflow, both signs
    lo, hi = (RNG.standard_normal((2, n)) * scale).astype(np.float32)
    lo[:4] = [np.inf, -np.inf, 0.0, -0.0]
    out = kj.to_device(np.zeros(n, packed))
    PACK_KERNELS[name][(n + 127) // 128, 128](out, kj.to_device(lo), kj.to_device(hi))
    bits = np.dtype(np_type).itemsize * 8

    def want(x):
        x = x.astype(np.float64)  # then one rounding, without NumPy's overflow warning
        if limit is not None:  # satfinite: beyond the largest finite value (or infinite), it
            x = np.clip(x, -limit, limit)
        with np.errstate(over="ignore"):  # float16: beyond 65504 is infinity, as on the GPU
            return x.astype(np_type).view(f"u{bits // 8}").astype(packed)
    np.testing.assert_array_equal(out.copy_to_host(), want(lo) | (want(hi) << bits))


@pytest.mark.parametrize("name", list(PACKS))
def test_cvt_pack_bit_exact(kj_backend, name):
    _pack_case(name)


def test_cvt_pack_ptx():
    for name, instruction in (("bfloat16", "cvt.rn.bf16x2.f32"),
                              ("float8_e4m3fn", "cvt.rn.satfinite.e4m3x2.f32"),
                              ("float8_e5m2", "cvt.rn.satfinite.e5m2x2.f32")):
        packed = "uint32" if name == "bfloat16" else "uint16"
        ptx = kj.compile_ptx(PACK_KERNELS[name].py_func,
                             f"void({packed}[::1], float32[::1], float32[::1])", arch="sm_90")
        assert instruction in ptx


def pack_int_type(out):
    out[0] = kj.cvt_pack(kj.int16, 1.0, 2.0)


def test_cvt_pack_misuse_is_located():
    err = compile_error(kj.jit(pack_int_type), "void(uint32[::1])", arch="sm_90")
    assert "packs bfloat16, float16, float8_e4m3fn, float8_e5m2, got int16" in str(err)
    assert_located(err, pack_int_type, "kj.int16")


# --- fp8 wgmma ----------------------------------------------------------------------------------------

@kj.jit
def fp8_tile(out, a, b):
    """One m64n64k32 wgmma of e4m3 inputs, A and B staged K-major without swizzle (8 x 16-byte
    core matrices: LBO 128 between K halves, SBO 256 between 8-row groups)."""
    sa = kj.shared.array(64 * 32, kj.uint8)
    sb = kj.shared.array(64 * 32, kj.uint8)
    acc = kj.local.array(32, kj.float32)
    t = kj.threadIdx.x
    for e in range(t, 64 * 32, 128):
        r, k = e // 32, e % 32
        at = (r % 8) * 16 + (r // 8) * 256 + (k % 16) + (k // 16) * 128
        sa[at] = a[r, k]
        sb[at] = b[r, k]
    kj.wgmma.fence_proxy_async()
    kj.syncthreads()
    kj.wgmma.fence()
    da = kj.wgmma.descriptor(sa, swizzle=None, leading_byte_offset=128, stride_byte_offset=256)
    db = kj.wgmma.descriptor(sb, swizzle=None, leading_byte_offset=128, stride_byte_offset=256)
    kj.wgmma.mma_async(acc, da, db, shape=(64, 64, 32), dtype=kj.float8_e4m3fn, scale_d=0)
    kj.wgmma.commit_group()
    kj.wgmma.wait_group(0, acc)
    warp, lane = t // 32, t % 32
    for i in kj.static_range(32):
        out[16 * warp + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2] \
            = acc[i]


def _fp8_case():
    a = RNG.integers(-8, 9, (64, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = RNG.integers(-8, 9, (64, 32)).astype(ml_dtypes.float8_e4m3fn)
    out = kj.to_device(np.full((64, 64), np.nan, np.float32))
    fp8_tile[1, 128](out, kj.to_device(a.view(np.uint8)), kj.to_device(b.view(np.uint8)))
    # small integers: every product and partial sum is exact, on the GPU and here
    want = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_fp8_wgmma(kj_backend):
    _fp8_case()


def test_fp8_wgmma_ptx():
    ptx = kj.compile_ptx(fp8_tile.py_func, "void(float32[:, ::1], uint8[:, ::1], uint8[:, ::1])",
                         arch="sm_90")
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" in ptx


def fp8_wrong_k(out):
    acc = kj.local.array(32, kj.float32)
    kj.wgmma.mma_async(acc, 0, 0, shape=(64, 64, 16), dtype=kj.float8_e5m2)


def test_fp8_wgmma_shape_is_located():
    err = compile_error(kj.jit(fp8_wrong_k), "void(float32[::1])", arch="sm_90")
    assert "shape=(64, N, 32) with N a multiple of 8 from 8 to 256 for float8_e5m2" in str(err)
    assert_located(err, fp8_wrong_k, "(64, 64, 16)")


# --- the pipeline helper ---------------------------------------------------------------------------

@kj.jit
def ring_of_two(out, data, steps):
    """A producer thread fills a 2-stage ring step by step (plain stores, then an arrive on
    the stage's full barrier); 64 consumer threads (two groups, one arrival each) read each
    step and release it: many more steps than stages, so every phase bit wraps."""
    full = kj.shared.array(2, kj.uint64)
    empty = kj.shared.array(2, kj.uint64)
    ring = kj.shared.array((2, 64), kj.float32)
    t = kj.threadIdx.x
    if t == 0:
        pipeline.init(full, empty, 1, 2)
    kj.syncthreads()
    for it in range(steps):
        s = pipeline.stage(full, it)
        if t == 64:
            pipeline.wait_empty(empty, it)
            for i in range(64):
                ring[s, i] = data[it, i]
            kj.mbarrier.arrive(full[s:])
        elif t < 64:
            pipeline.wait_full(full, it)
            out[it, t] = ring[s, t] * 2.0
            kj.syncwarp()
            if t % 32 == 0:
                pipeline.release(empty, it)


def _ring_case():
    steps = 7
    data = RNG.standard_normal((steps, 64)).astype(np.float32)
    out = kj.to_device(np.full((steps, 64), np.nan, np.float32))
    ring_of_two[1, 96](out, kj.to_device(data), steps)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * data)


def test_pipeline_ring(kj_backend):
    _ring_case()


# --- persistent grids -----------------------------------------------------------------------------

def test_sm_count(kj_backend):
    n = kj.sm_count()
    assert isinstance(n, int) and n >= 1
    if kj_backend == "cpu":
        assert n == kj.get_backend().device_limits(0).multiprocessor_count


# --- the same on a GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
def test_primitives_gpu(kj_backend):
    _producer_consumer_case()
    for count in (1, 2, 4):
        for trans in (False, True):
            _stmatrix_case(count, trans)
    for name in PACKS:
        _pack_case(name)
    _fp8_case()
    _ring_case()
