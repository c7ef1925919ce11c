"""Tensor maps on a real device, before kernels can use them from Python: LLVM IR with the inline
PTX of ``kaiojit.lower.tma_ptx`` (tests/runtime/tma_kernels.py), loaded with ``kj.Module.from_ptx``
and given real ``kj.TensorMap.tiled`` arguments between ordinary ones.

Each block loads one box through TMA into poisoned shared memory, copies every byte of that
shared memory out (swizzle, padding and out-of-bounds fill as the hardware left them) and
stores the box back through a second map (boxes at non-negative coordinates only: on an H200 a
TMA store at a negative coordinate is an illegal instruction). The checks: the scalars and
pointers around the maps arrive intact; the stores write exactly the elements their boxes cover
inside the tensor and nothing else; and the shared memory bytes equal what the cpu backend's
host tile load (``kaiojit.tma_host``) produces for the same map and coordinates, swizzle,
padding and the NaN fill's bits included. Skipped without CUDA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit import tma_host
from kaiojit.runtime.tensormap import TensorMap, tiled_fields

from .tma_kernels import BOX_OFFSET, ptx_of, tiles_ir

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng()
THREADS = 128
SMEM_POISON = 0xA5      # what the kernel writes into the box's shared memory before the load
BOXES_POISON = 0x5A
DST_POISON = 0xC3
SPAN = {None: 0, "32B": 32, "64B": 64, "128B": 128}


@dataclass(frozen=True)
class Case:
    dtype: str
    shape: tuple[int, int]
    box: tuple[int, int]
    swizzle: str | None = None
    oob_fill: str | None = None
    element_strides: tuple[int, int] = (1, 1)
    origin: tuple[int, int] = (0, 0)

    def __str__(self) -> str:
        return (f"{self.dtype}{list(self.shape)} box{list(self.box)} sw={self.swizzle} "
                f"fill={self.oob_fill} es={list(self.element_strides)} at {list(self.origin)}")


CASES = [
    Case("float32", (300, 200), (32, 32)),                       # partial tiles at both edges
    Case("float32", (512, 256), (64, 64)),                       # whole tiles only
    Case("float32", (300, 200), (32, 32), origin=(-5, -8)),      # negative coordinates
    Case("float32", (300, 200), (64, 64), oob_fill="nan", origin=(-17, -3 * 4)),
    Case("float32", (257, 130), (16, 32), "128B", "nan", origin=(-3, -16)),
    Case("float32", (64, 40), (8, 8), "128B"),                   # 32-byte rows in 128B spans
    Case("float16", (100, 72), (8, 32), "64B", origin=(-4, -8)),
    Case("uint8", (70, 90), (16, 32), "32B", origin=(0, -16)),
    Case("float64", (50, 30), (12, 4), "64B", "nan", (2, 1), origin=(-3, 0)),
    Case("int32", (300, 200), (24, 16), element_strides=(3, 1), origin=(-1, 0)),
]


@lru_cache(maxsize=1)
def tiles_ptx() -> str:
    return ptx_of(tiles_ir())


def host_parent(shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
    """Random values, with 3 rows and at least 16 bytes of columns past the tensor (so writes
    outside it would show) and rows a multiple of 16 bytes apart."""
    cols = -(-(shape[1] * dtype.itemsize + 16) // 64) * 64 // dtype.itemsize
    full = (shape[0] + 3, cols)
    if dtype.kind == "f":
        return RNG.standard_normal(full).astype(dtype)
    return RNG.integers(0, np.iinfo(dtype).max, full, endpoint=True).astype(dtype)


def host_box_bytes(src: np.ndarray, case: Case, coords: tuple[int, int], shared: int,
                   size: int) -> np.ndarray:
    """What the cpu backend's tile load puts in shared memory for this box, in a buffer at the
    same address modulo 1024 as the GPU's (``shared``), poisoned as the kernel poisons it."""
    fields = tiled_fields(src.ctypes.data, src.shape, src.strides, src.dtype.name, case.box,
                          swizzle=case.swizzle, oob_fill=case.oob_fill,
                          element_strides=case.element_strides)
    tmap = np.frombuffer(tma_host.encode_tiled(**fields), np.uint8).copy()
    raw = np.full(size + 2048, SMEM_POISON, np.uint8)
    start = (shared - raw.ctypes.data) % 1024
    buf = raw[start:start + size]
    rc = tma_host.tile_load(buf.ctypes.data, tmap.ctypes.data, coords[::-1])
    assert rc == tma_host.OK
    return buf


def run(fn, case: Case):
    dtype = np.dtype(case.dtype)
    src_host = host_parent(case.shape, dtype)
    rows, cols = case.shape
    src_dev = rt.to_device(src_host)
    dst_dev = rt.to_device(np.full(src_host.nbytes, DST_POISON, np.uint8).view(dtype)
                           .reshape(src_host.shape))
    src = src_dev[:rows, :cols]
    dst = dst_dev[:rows, :cols]
    src_map = TensorMap.tiled(src, box=case.box, swizzle=case.swizzle, oob_fill=case.oob_fill,
                              element_strides=case.element_strides)
    dst_map = TensorMap.tiled(dst, box=case.box, swizzle=case.swizzle,
                              element_strides=case.element_strides)
    counts = [-(-b // e) for b, e in zip(case.box, case.element_strides)]
    row_bytes = counts[1] * dtype.itemsize
    pitch = SPAN[case.swizzle] or row_bytes
    box_smem = counts[0] * pitch
    tx_bytes = counts[0] * row_bytes
    row_step = case.box[0] * case.element_strides[0]
    col_step = case.box[1]
    row0, col0 = case.origin
    nx, ny = math.ceil((cols - col0) / col_step), math.ceil((rows - row0) / row_step)
    ntiles = nx * ny
    boxes = rt.to_device(np.full(ntiles * box_smem, BOXES_POISON, np.uint8))
    flags = rt.to_device(np.full(4 * ntiles, -1, np.int32))
    tag = int(RNG.integers(1, 2**31 - 1))
    (fn.grid(nx, ny).block(THREADS).shared_mem(BOX_OFFSET + box_smem)
       .arg_ptr(boxes).arg_tensormap(src_map).arg_i32(tag).arg_tensormap(dst_map)
       .arg_ptr(flags).arg_i32(row0).arg_i32(col0).arg_i32(row_step).arg_i32(col_step)
       .arg_i32(tx_bytes).arg_i32(box_smem).launch())
    rt.synchronize()
    return dict(src_host=src_host, src=src_host[:rows, :cols], tag=tag, nx=nx, ny=ny,
                ntiles=ntiles, box_smem=box_smem, counts=counts, row_step=row_step,
                col_step=col_step, flags=flags.copy_to_host(),
                boxes=boxes.copy_to_host().reshape(ntiles, box_smem),
                dst_parent=dst_dev.copy_to_host())


def mismatch(got: np.ndarray, want: np.ndarray, case: Case) -> str:
    """Which shared memory bytes differ from the host model, in words."""
    diff = np.flatnonzero(got != want)
    words = (f"{diff.size} of {got.size} shared memory bytes differ from the host model, "
             f"first at byte {diff[0]}: GPU {got[diff[:16]].tolist()}, host "
             f"{want[diff[:16]].tolist()}")
    size = np.dtype(case.dtype).itemsize
    if case.oob_fill == "nan" and got.size % size == 0:
        g, w = got.view(case.dtype), want.view(case.dtype)
        odd = g.view(f"u{size}") != w.view(f"u{size}")
        if np.isnan(g[odd]).all() and np.isnan(w[odd]).all():
            words += (f" -- only the NaN of out-of-bounds elements differs: the GPU fills "
                      f"0x{int(g.view(f'u{size}')[odd][0]):x}, kaiojit/tma_host.py "
                      f"0x{int(w.view(f'u{size}')[odd][0]):x}")
    return words


@pytest.fixture
def tiles_fn(cuda):
    return rt.Module.from_ptx(tiles_ptx()).get_function("tma_tiles")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_tma_load_and_store_through_real_tensor_maps(tiles_fn, case):
    r = run(tiles_fn, case)
    n, flags = r["ntiles"], r["flags"]
    # the int32 after the first map and the pointers around the maps arrived intact
    np.testing.assert_array_equal(flags[:n], r["tag"] ^ np.arange(n, dtype=np.int32),
                                  err_msg="the argument after a tensor map was not intact")
    assert not flags[n:2 * n].any(), (
        f"{int(flags[n:2 * n].sum())} boxes never completed their mbarrier, which expected "
        f"{r['counts'][0]} x {r['counts'][1]} elements of transaction bytes")
    assert not flags[3 * n:].any(), "an mbarrier of blockDim arrivals never completed"
    # shared memory as the GPU left it == the cpu backend's tile load, tile by tile
    for tile in range(n):
        by, bx = divmod(tile, r["nx"])
        coords = (case.origin[0] + by * r["row_step"], case.origin[1] + bx * r["col_step"])
        want = host_box_bytes(r["src"], case, coords, int(flags[2 * n + tile]), r["box_smem"])
        got = r["boxes"][tile]
        if not np.array_equal(got, want):
            pytest.fail(f"{case}: tile at {coords} (shared address "
                        f"0x{int(flags[2 * n + tile]):x}): {mismatch(got, want, case)}")
    # the stores (of the boxes that start at non-negative coordinates) wrote the elements they
    # cover and nothing else, but for one thing: the H200 stores whole 16-byte chunks, so a box
    # over the right edge of a row whose bytes are no multiple of 16 also writes the row's
    # padding up to the next 16-byte boundary, with what the box holds there (the load's fill)
    src, dst = r["src"], r["dst_parent"]
    want = np.full(dst.nbytes, DST_POISON, np.uint8).view(dst.dtype).reshape(dst.shape)
    size = np.dtype(case.dtype).itemsize
    chunked = -(-case.shape[1] * size // 16) * 16 // size
    fill = np.frombuffer(tma_host.OOB_NAN_BITS.to_bytes(2, "little") * 8 if case.oob_fill == "nan"
                         else bytes(16), np.uint8).view(want.dtype)[0]
    for by in range(r["ny"]):
        for bx in range(r["nx"]):
            row0 = case.origin[0] + by * r["row_step"]
            col0 = case.origin[1] + bx * r["col_step"]
            if row0 < 0 or col0 < 0:
                continue
            rows_ = np.arange(r["counts"][0]) * case.element_strides[0] + row0
            rows_ = rows_[rows_ < case.shape[0]]
            cols_ = slice(col0, min(col0 + case.box[1], case.shape[1]))
            want[rows_, cols_] = src[rows_, cols_]
            pad = slice(case.shape[1], min(col0 + case.box[1], chunked))
            want[rows_, pad] = fill
    np.testing.assert_array_equal(dst.view(np.uint8), want.view(np.uint8),
                                  err_msg=f"{case}: the TMA stores")


def test_unswizzled_boxes_are_the_padded_numpy_tiles(tiles_fn):
    """The plain tiled copy, against NumPy alone: each box is the matrix's window with zeros
    where it hangs over an edge."""
    case = Case("float32", (300, 200), (32, 32), origin=(-5, -8))
    r = run(tiles_fn, case)
    src, (rows, cols) = r["src"], case.shape
    padded = np.zeros((rows + 64 + 32, cols + 64 + 32), np.float32)
    padded[5:5 + rows, 8:8 + cols] = src
    for tile in range(r["ntiles"]):
        by, bx = divmod(tile, r["nx"])
        want = padded[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32]
        np.testing.assert_array_equal(r["boxes"][tile].view(np.float32).reshape(32, 32), want)
    # the stored boxes: those starting at non-negative coordinates (rows 27.., columns 24..)
    np.testing.assert_array_equal(r["dst_parent"][27:rows, 24:cols], src[27:, 24:])
