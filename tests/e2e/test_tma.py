"""End to end: the bulk tensor copy engine (TMA) from Python kernels, on the cpu backend and,
under the ``gpu`` marker, on cuda. Tiled copies and a transpose through TMA loads and stores
(partial tiles at the edges), a tensor map between ordinary arguments, out-of-bounds fill,
``kj.elect_one``; every kernel's PTX assembled by ptxas for sm_90; bad input located."""

from __future__ import annotations

import importlib.util
import inspect
import os

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import set_backend
from kaiojit.testing import _backend
from tests.located import assert_located, compile_error
from tests.ptxas import assemble

rng = np.random.default_rng()
TILE = 32
WIN_R, WIN_C = 16, 16
SMALL_R, SMALL_C = 8, 16
MAP2 = "tensormap(float32, 2)"
NAN_FILL_F32 = 0x7FF77FF7  # the NaN an H200 writes for an out-of-bounds float32 (0x7FF7 twice)


@pytest.fixture
def backend(cpu_and_cuda):
    """The cpu backend, and cuda under the gpu marker (``tests/e2e/conftest.py``)."""
    return cpu_and_cuda


@kj.jit
def tile_copy(src_map, dst_map):
    tile = kj.shared.array((TILE, TILE), kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    r0 = kj.blockIdx.y * TILE
    c0 = kj.blockIdx.x * TILE
    leader = kj.threadIdx.x == 0
    if leader:
        kj.mbarrier.init(bar, 1)
        kj.fence_proxy_async()
    kj.syncthreads()
    if leader:
        kj.mbarrier.arrive_expect_tx(bar, TILE * TILE * 4)
        kj.tma.load(tile, src_map, r0, c0, bar)
    kj.mbarrier.wait(bar, 0)
    if leader:
        kj.tma.store(dst_map, r0, c0, tile)
        kj.tma.commit_group()
        kj.tma.wait_group(0)


def _load_example():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tma_copy.py")
    spec = importlib.util.spec_from_file_location("example_tma_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _load_example()  # its transpose kernel is tested here, its main in tests/lib


def _grid(shape, box=(TILE, TILE)):
    return (-(-shape[1] // box[1]), -(-shape[0] // box[0]))


@pytest.mark.parametrize("shape", [(96, 64), (100, 72)])  # whole tiles; partial at both edges
def test_tiled_copy_is_exact(backend, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    src, dst = kj.to_device(a), kj.to_device(np.full(shape, np.nan, np.float32))
    tile_copy[_grid(shape), 64](kj.TensorMap.tiled(src, (TILE, TILE)),
                                kj.TensorMap.tiled(dst, (TILE, TILE)))
    np.testing.assert_array_equal(dst.copy_to_host(), a)


def test_transpose_is_exact(backend):
    shape = (int(rng.integers(2, 5)) * TILE + 12, int(rng.integers(2, 5)) * TILE + 8)
    a = rng.standard_normal(shape).astype(np.float32)
    src = kj.to_device(a)
    dst = kj.to_device(np.full(shape[::-1], np.nan, np.float32))
    EXAMPLE.tma_transpose[_grid(shape), 128](kj.TensorMap.tiled(src, (TILE, TILE)),
                                             kj.TensorMap.tiled(dst, (TILE, TILE)))
    np.testing.assert_array_equal(dst.copy_to_host(), a.T)


@kj.jit("void(float32[::1], tensormap(float32, 2), float32[::1], float32, int32)")
def affine_tile(before, tmap, after, a, n):
    tile = kj.shared.array((SMALL_R, SMALL_C), kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    t = kj.threadIdx.x
    if t == 0:
        kj.mbarrier.init(bar, 1)
        kj.fence_proxy_async()
    kj.syncthreads()
    if t == 0:
        kj.mbarrier.arrive_expect_tx(bar, SMALL_R * SMALL_C * 4)
        kj.tma.load(tile, tmap, SMALL_R * kj.blockIdx.x, 0, bar)
    kj.mbarrier.wait(bar, 0)
    i = kj.blockIdx.x * kj.blockDim.x + t
    if i < n:
        after[i] = a * tile[t // SMALL_C, t % SMALL_C] + before[i]


def test_tensor_map_between_ordinary_arguments(backend):
    blocks, per_block = 3, SMALL_R * SMALL_C
    x = rng.standard_normal((blocks * SMALL_R, SMALL_C)).astype(np.float32)
    before = rng.standard_normal(blocks * per_block).astype(np.float32)
    a = np.float32(2.0 ** rng.integers(-3, 4))  # a power of two: a * x is exact, fused or not
    n = blocks * per_block - int(rng.integers(1, 40))
    after = kj.to_device(np.full(blocks * per_block, np.nan, np.float32))
    tmap = kj.TensorMap.tiled(kj.to_device(x), (SMALL_R, SMALL_C))
    affine_tile[blocks, per_block](kj.to_device(before), tmap, after, a, np.int32(n))
    got = after.copy_to_host()
    np.testing.assert_array_equal(got[:n], a * x.ravel()[:n] + before[:n])
    assert np.isnan(got[n:]).all()  # n arrived intact: nothing past it was written


@kj.jit
def window(out, tmap, r, c):
    tile = kj.shared.array((WIN_R, WIN_C), kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    t = kj.threadIdx.x
    if t == 0:
        kj.mbarrier.init(bar, 1)
        kj.fence_proxy_async()
    kj.syncthreads()
    if t == 0:
        kj.mbarrier.arrive_expect_tx(bar, WIN_R * WIN_C * 4)
        kj.tma.load(tile, tmap, r, c, bar)
    while not kj.mbarrier.try_wait_parity(bar, 0):
        pass
    out[t // WIN_C, t % WIN_C] = tile[t // WIN_C, t % WIN_C]


@pytest.mark.parametrize("fill", [None, "nan"])
def test_partial_boxes_at_edges_are_filled(backend, fill):
    shape = (40, 24)
    a = rng.standard_normal(shape).astype(np.float32)
    tmap = kj.TensorMap.tiled(kj.to_device(a), (WIN_R, WIN_C), oob_fill=fill)
    for r, c in [(-5, -8), (shape[0] - 6, shape[1] - 4), (3, 12)]:
        out = kj.to_device(np.full((WIN_R, WIN_C), 1234.5, np.float32))
        window[1, WIN_R * WIN_C](out, tmap, np.int32(r), np.int32(c))
        rows, cols = np.arange(r, r + WIN_R)[:, None], np.arange(c, c + WIN_C)[None, :]
        inside = (rows >= 0) & (rows < shape[0]) & (cols >= 0) & (cols < shape[1])
        got = out.copy_to_host()
        np.testing.assert_array_equal(got[inside], a[np.clip(rows, 0, shape[0] - 1),
                                                     np.clip(cols, 0, shape[1] - 1)][inside])
        bits = got.view(np.uint32)[~inside]
        assert (bits == (NAN_FILL_F32 if fill else 0)).all(), hex(int(bits[0]))


@kj.jit
def elected_lanes(count, lane):
    t = kj.threadIdx.x
    if kj.elect_one():
        kj.atomic.add(count, t // 32, 1)
        lane[t // 32] = t % 32


def test_elect_one_picks_the_lowest_lane_of_each_warp(backend):
    warps = int(rng.integers(2, 5))
    count = kj.to_device(np.zeros(warps, np.int32))
    lane = kj.to_device(np.full(warps, -1, np.int32))
    elected_lanes[1, 32 * warps](count, lane)
    np.testing.assert_array_equal(count.copy_to_host(), np.ones(warps, np.int32))
    np.testing.assert_array_equal(lane.copy_to_host(), np.zeros(warps, np.int32))


SIGNATURES = [
    (tile_copy, f"void({MAP2}, {MAP2})"),
    (EXAMPLE.tma_transpose, f"void({MAP2}, {MAP2})"),
    (EXAMPLE.tma_tile_copy, f"void({MAP2}, {MAP2})"),
    (affine_tile, "void(float32[::1], tensormap(float32, 2), float32[::1], float32, int32)"),
    (window, f"void(float32[:, ::1], {MAP2}, int32, int32)"),
    (elected_lanes, "void(int32[::1], int32[::1])"),
]



@pytest.mark.parametrize("kernel, sig", SIGNATURES,
                         ids=lambda k: getattr(k, "__name__", ""))
def test_ptx_assembles_for_sm90(kernel, sig):
    ptx = kj.compile_ptx(kernel, sig, arch="sm_90")
    assert "cp.async.bulk.tensor" in ptx or "elect.sync" in ptx
    assemble(ptx, "sm_90")


def test_ptx_of_a_copy_uses_the_tensor_map_parameter_in_place():
    ptx = kj.compile_ptx(tile_copy, f"void({MAP2}, {MAP2})", arch="sm_90")
    assert ptx.count(".param .align 64 .b8") == 2
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert ".shared .align 128" in ptx
    assert "st.local" not in ptx  # the map is never copied out of parameter space


# --- bad input ---------------------------------------------------------------------------------

@kj.jit
def load_only(tmap):
    tile = kj.shared.array((8, 8), kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    kj.tma.load(tile, tmap, 0, 0, bar)


def test_tma_below_sm90_is_a_located_error():
    err = compile_error(load_only, f"void({MAP2})", kj.UnsupportedError, arch="sm_80")
    assert_located(err, load_only.py_func, "kj.tma.load(")
    assert "needs sm_90 or newer" in str(err) and "sm_80" in str(err)


@kj.jit
def wrong_box_dtype(tmap):
    tile = kj.shared.array((8, 8), kj.float64, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    kj.tma.load(tile, tmap, 0, 0, bar)


@kj.jit
def wrong_rank(tmap):
    tile = kj.shared.array((8, 8), kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    kj.tma.load(tile, tmap, 0, 0, 0, bar)


@kj.jit
def wrong_barrier(tmap):
    tile = kj.shared.array((8, 8), kj.float32, alignment=128)
    bar = kj.shared.array(2, kj.int32)
    kj.tma.load(tile, tmap, 0, 0, bar)


@kj.jit
def bad_alignment(tmap):
    tile = kj.shared.array((8, 8), kj.float32, alignment=96)
    tile[0, 0] = 1.0


@kj.jit
def wait_group_not_constant(tmap, n):
    kj.tma.wait_group(n)


@pytest.mark.parametrize("kernel, snippet, words", [
    (wrong_box_dtype, "tile, tmap", "holds float64"),
    (wrong_rank, "kj.tma.load(", "takes 2 coordinates, got 3"),
    (wrong_barrier, "bar)", "needs an mbarrier"),
    (bad_alignment, "96", "power of two"),
    (wait_group_not_constant, "n)", "constant integer"),
])
def test_misuse_in_a_kernel_is_a_located_error(kernel, snippet, words):
    sig = f"void({MAP2}, int32)" if kernel is wait_group_not_constant else f"void({MAP2})"
    err = compile_error(kernel, sig)
    assert_located(err, kernel.py_func, snippet)
    assert words in str(err)


def test_map_of_another_type_is_a_type_error_at_launch(backend):
    x = kj.to_device(rng.standard_normal(SMALL_R * SMALL_C * 2))  # float64
    out = kj.to_device(np.zeros(8, np.float32))
    other_dtype = kj.TensorMap.tiled(x.reshape(2 * SMALL_R, SMALL_C), (SMALL_R, SMALL_C))
    other_rank = kj.TensorMap.tiled(kj.to_device(np.zeros(64, np.float32)), (16,))
    for wrong, got in ((other_dtype, r"float64, 2"), (other_rank, r"float32, 1")):
        with pytest.raises(TypeError, match=rf"parameter 'tmap' is tensormap\(float32, 2\), "
                                            rf"got tensormap\({got}\)"):
            affine_tile[1, 32](out, wrong, out, np.float32(1), np.int32(8))


def test_a_box_the_hardware_rejects_is_a_value_error(backend):
    x = kj.to_device(np.zeros((64, 64), np.float32))
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        kj.TensorMap.tiled(x, (8, 5))
    with pytest.raises(ValueError, match="box sizes must be 1 to 256"):
        kj.TensorMap.tiled(x, (8, 512))


def _line_of(pyfunc, snippet: str) -> str:
    lines, first = inspect.getsourcelines(pyfunc.py_func)
    k = next(i for i, text in enumerate(lines) if snippet in text)
    return f"{inspect.getsourcefile(pyfunc.py_func)}:{first + k}"


def test_misaligned_box_is_refused_on_the_cpu_backend():
    set_previous = set_backend(_backend("cpu"))
    try:
        tmap = kj.TensorMap.tiled(kj.to_device(np.ones((40, 24), np.float32)), (WIN_R, WIN_C))
        out = kj.to_device(np.zeros((WIN_R, WIN_C), np.float32))
        with pytest.raises(kj.KernelError, match="16-byte aligned") as info:
            window[1, WIN_R * WIN_C](out, tmap, np.int32(0), np.int32(2))
        assert _line_of(window, "kj.tma.load(") in str(info.value)
    finally:
        set_backend(set_previous)


@kj.jit
def too_few_arrivals(out):
    bar = kj.shared.array(1, kj.uint64)
    if kj.threadIdx.x == 0:
        kj.mbarrier.init(bar, 2)
    kj.syncthreads()
    if kj.threadIdx.x == 0:
        kj.mbarrier.arrive(bar)
    kj.mbarrier.wait(bar, 0)
    out[kj.threadIdx.x] = 1


def test_a_wait_that_cannot_complete_is_reported_on_the_cpu_backend():
    previous = set_backend(_backend("cpu"))  # on a GPU this kernel hangs
    try:
        out = kj.to_device(np.zeros(32, np.int32))
        with pytest.raises(kj.KernelError, match="can never complete") as info:
            too_few_arrivals[1, 32](out)
        assert _line_of(too_few_arrivals, "kj.mbarrier.wait(") in str(info.value)
    finally:
        set_backend(previous)


def aligned_arrays(out):
    small = kj.shared.array(3, kj.uint64)
    box = kj.shared.array((4, 8), kj.float32, alignment=1024)
    rest = kj.shared.array(0, kj.float32, alignment=256)
    small[0] = 1
    box[0, 0] = 2.0
    rest[0] = 3.0
    out[0] = box[0, 0] + rest[0] + small[0]


def test_shared_alignment_places_arrays_on_both_targets():
    from kaiojit.kir.analysis import shared_layout
    from tests.kir.lowering import typed

    kfunc = typed(aligned_arrays, "void(float32[::1])")
    assert "shared.array((4, 8), float32, alignment=1024)" in str(kfunc)
    layout = shared_layout(kfunc)
    assert sorted(layout.offsets.values()) == [0, 1024]  # 24 bytes, then the aligned box
    assert layout.size == 1024 + 128 + 128  # the dynamic buffer starts 256-byte aligned
    ptx = kj.compile_ptx(kj.jit(opt=0)(aligned_arrays), "void(float32[::1])", arch="sm_90")
    assert ".shared .align 1024 .b8" in ptx and ".extern .shared .align 256" in ptx
