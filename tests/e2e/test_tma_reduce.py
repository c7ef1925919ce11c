"""End to end: ``kj.tma.reduce_add``, the TMA reduce-add of a shared-memory box into a tensor,
from Python kernels on the cpu backend and, under the ``gpu`` marker, on cuda. Several blocks
add random tiles into the same boxes (the adds must not lose each other's), boxes hanging over
the tensor's edges add only their elements inside, the PTX is assembled by ptxas, and misuse is
located."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import set_backend
from kaiojit.testing import _backend
from tests.located import assert_located, compile_error
from tests.ptxas import assemble

rng = np.random.default_rng()
R, C = 8, 16  # the box: 8 rows of 16 elements (64 bytes of float32)


@pytest.fixture
def backend(cpu_and_cuda):
    """The cpu backend, and cuda under the gpu marker (``tests/e2e/conftest.py``)."""
    return cpu_and_cuda


def make_adder(dtype):
    @kj.jit
    def add_tiles(tmap, tiles, rows, cols):
        """Block b fills a shared box with tiles[b] and adds it at (rows[b], cols[b])."""
        box = kj.shared.array((R, C), dtype, alignment=128)
        b = kj.blockIdx.x
        t = kj.threadIdx.x
        box[t // C, t % C] = tiles[b, t // C, t % C]
        kj.fence_proxy_async()  # the threads' stores, before the async proxy reads them
        kj.syncthreads()
        if t == 0:
            kj.tma.reduce_add(tmap, rows[b], cols[b], box)
            kj.tma.commit_group()
            kj.tma.wait_group(0)
    return add_tiles


ADDERS = {np.float32: make_adder(kj.float32), np.int32: make_adder(kj.int32)}


def random_values(shape, dtype) -> np.ndarray:
    """Quarter integers for float32 (every sum exact, in any order of the adds)."""
    if dtype == np.float32:
        return (rng.integers(-400, 400, shape) / 4).astype(np.float32)
    return rng.integers(-2**20, 2**20, shape).astype(dtype)


def expected(a, tiles, rows, cols) -> np.ndarray:
    want = a.copy()
    for tile, r, c in zip(tiles, rows, cols):
        rr, cc = min(R, a.shape[0] - r), min(C, a.shape[1] - c)
        want[r:r + rr, c:c + cc] += tile[:rr, :cc]
    return want


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=["float32", "int32"])
def test_blocks_add_their_tiles_into_shared_and_partial_boxes(backend, dtype):
    shape = (int(rng.integers(2, 5)) * R + int(rng.integers(1, R)),
              int(rng.integers(2, 4)) * C + 4)  # partial boxes at the bottom and right edges
    a = random_values(shape, dtype)
    last_r, last_c = shape[0] - int(rng.integers(1, R)), (shape[1] - 1) // 4 * 4
    # twice the same inner box, twice the bottom-right corner (hanging over both edges), and
    # one box over the bottom edge only
    rows = np.array([R, R, last_r, last_r, shape[0] - 3], np.int32)
    cols = np.array([C, C, last_c, last_c, 0], np.int32)
    tiles = random_values((len(rows), R, C), dtype)
    dst = kj.to_device(a)
    ADDERS[dtype][len(rows), R * C](kj.TensorMap.tiled(dst, (R, C)), kj.to_device(tiles),
                                    kj.to_device(rows), kj.to_device(cols))
    np.testing.assert_array_equal(dst.copy_to_host(), expected(a, tiles, rows, cols))


def test_many_blocks_adding_into_one_box_lose_no_add(backend):
    """Blocks run on several host threads on the cpu backend: every add is atomic."""
    blocks = 64
    a = random_values((R, C), np.float32)
    tiles = random_values((blocks, R, C), np.float32)
    zeros = kj.to_device(np.zeros(blocks, np.int32))
    dst = kj.to_device(a)
    ADDERS[np.float32][blocks, R * C](kj.TensorMap.tiled(dst, (R, C)), kj.to_device(tiles),
                                      zeros, zeros)
    np.testing.assert_array_equal(dst.copy_to_host(), a + tiles.sum(axis=0))


SIG = "void(tensormap({t}, 2), {t}[:, :, ::1], int32[::1], int32[::1])"


def test_ptx_assembles_for_sm90():
    ptx = kj.compile_ptx(ADDERS[np.float32], SIG.format(t="float32"), arch="sm_90")
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    assemble(ptx, "sm_90")


@kj.jit
def add_float64(tmap):
    box = kj.shared.array((R, C), kj.float64, alignment=128)
    kj.tma.reduce_add(tmap, 0, 0, box)


@kj.jit
def add_wrong_rank(tmap):
    box = kj.shared.array((R, C), kj.float32, alignment=128)
    kj.tma.reduce_add(tmap, 0, 0, 0, box)


def test_misuse_is_a_located_error():
    err = compile_error(add_float64, "void(tensormap)")
    assert_located(err, add_float64.py_func, "box)")
    assert "adds float32, float16, bfloat16, int32, uint32, uint64 elements" in str(err)
    assert "float64" in str(err)
    err = compile_error(add_wrong_rank, "void(tensormap(float32, 2))")
    assert_located(err, add_wrong_rank.py_func, "kj.tma.reduce_add(")
    assert "takes 2 coordinates, got 3" in str(err)
    err = compile_error(add_wrong_rank, "void(tensormap)", kj.UnsupportedError, arch="sm_80")
    assert_located(err, add_wrong_rank.py_func, "kj.tma.reduce_add(")
    assert "needs sm_90 or newer" in str(err)


def test_a_negative_coordinate_is_refused_on_the_cpu_backend():
    """A reduce-add is a store-class copy: a box starting below 0 is refused, as a store's
    (an illegal instruction on the GPU), and nothing is added."""
    previous = set_backend(_backend("cpu"))
    try:
        a = random_values((3 * R, 2 * C), np.float32)
        dst = kj.to_device(a)
        with pytest.raises(kj.KernelError, match="negative coordinate") as info:
            ADDERS[np.float32][1, R * C](
                kj.TensorMap.tiled(dst, (R, C)), kj.to_device(random_values((1, R, C),
                                                                            np.float32)),
                kj.to_device(np.array([-1], np.int32)), kj.to_device(np.zeros(1, np.int32)))
        lines, first = inspect.getsourcelines(ADDERS[np.float32].py_func)
        k = next(i for i, text in enumerate(lines) if "kj.tma.reduce_add(" in text)
        assert f"{inspect.getsourcefile(ADDERS[np.float32].py_func)}:{first + k}" in \
            str(info.value)
        np.testing.assert_array_equal(dst.copy_to_host(), a)
    finally:
        set_backend(previous)
