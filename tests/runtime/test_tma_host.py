"""The cpu backend's tensor maps: kaiojit's host encoding, and the native tile copies and mbarrier
operations called directly through ctypes on NumPy buffers, against a NumPy model of tiled mode
(box, element strides, bounds, out-of-bounds fill, swizzle)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kaiojit import tma_host as H
from kaiojit.runtime.tensormap import tiled_fields

RNG = np.random.default_rng()
POISON = 0xA5
DTYPES = [np.uint8, np.int8, np.float16, np.int16, np.float32, np.int32, np.float64, np.int64]
SWIZZLE_SPAN = {None: 0, "32B": 32, "64B": 64, "128B": 128}


def aligned_zeros(nbytes: int, alignment: int, offset: int = 0) -> np.ndarray:
    """A uint8 buffer whose first byte sits ``offset`` bytes past an ``alignment`` boundary."""
    raw = np.zeros(nbytes + alignment + offset, np.uint8)
    start = (-raw.ctypes.data) % alignment + offset
    return raw[start:start + nbytes]


def random_tensor(shape: tuple[int, ...], dtype) -> np.ndarray:
    """Fresh random values in a view whose rows are padded to 16 bytes (tensor map strides must
    be multiples of 16) and whose base is 16-byte aligned."""
    dtype = np.dtype(dtype)
    row = -(-shape[-1] * dtype.itemsize // 16) * 16 // dtype.itemsize
    parent_shape = shape[:-1] + (row,)
    nbytes = math.prod(parent_shape) * dtype.itemsize
    parent = aligned_zeros(nbytes, 16).view(dtype).reshape(parent_shape)
    if dtype.kind == "f":
        parent[...] = RNG.standard_normal(parent_shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        parent[...] = RNG.integers(info.min, info.max, parent_shape, dtype=dtype, endpoint=True)
    return parent[..., :shape[-1]]


def encode(a: np.ndarray, box, *, swizzle=None, oob_fill=None, element_strides=None) -> bytes:
    fields = tiled_fields(a.ctypes.data, a.shape, a.strides, a.dtype.name, tuple(box),
                          swizzle=swizzle, oob_fill=oob_fill, element_strides=element_strides)
    return H.encode_tiled(**fields)


def as_buffer(data: bytes) -> np.ndarray:
    buf = aligned_zeros(128, 64)
    buf[:] = np.frombuffer(data, np.uint8)
    return buf


# --- the NumPy model ----------------------------------------------------------------------------

def box_counts(box, estrides) -> tuple[int, ...]:
    return tuple(-(-b // e) for b, e in zip(box, estrides))


def model_box(a: np.ndarray, box, estrides, coords, fill) -> np.ndarray:
    """The box at ``coords`` (array order), elements outside ``a`` being ``fill``; the mask of
    the elements inside, and the coordinates along each dimension."""
    counts = box_counts(box, estrides)
    index = [c + np.arange(n) * e for c, n, e in zip(coords, counts, estrides)]
    valid = [(g >= 0) & (g < s) for g, s in zip(index, a.shape)]
    clipped = [np.clip(g, 0, s - 1) for g, s in zip(index, a.shape)]
    mask = np.ones(counts, bool)
    for d, v in enumerate(valid):
        mask &= v.reshape([-1 if k == d else 1 for k in range(len(counts))])
    return np.where(mask, a[np.ix_(*clipped)], fill), mask, index


def physical(base: int, nbytes_row: int, rows: int, pitch: int, span: int) -> np.ndarray:
    """Byte offset from ``base`` of every logical (row, byte) of the box in shared memory."""
    logical = (np.arange(rows)[:, None] * pitch + np.arange(nbytes_row)[None, :]) + base
    if span:
        bits = span.bit_length() - 5  # 32B: 1 bit, 64B: 2, 128B: 3
        logical = logical ^ (((logical >> 7) & ((1 << bits) - 1)) << 4)
    return logical - base


def smem_layout(counts, itemsize: int, span: int) -> tuple[int, int, int]:
    row_bytes = counts[-1] * itemsize
    rows = math.prod(counts[:-1])
    pitch = span if span else row_bytes
    return rows, row_bytes, pitch


# --- tile loads ---------------------------------------------------------------------------------

def random_case(dtype, rank: int, swizzle=None):
    itemsize = np.dtype(dtype).itemsize
    shape = tuple(int(n) for n in RNG.integers(1, 12, rank))
    span = SWIZZLE_SPAN[swizzle]
    units = (span or 64) // 16  # 16-byte units of the innermost box row
    inner = int(RNG.integers(1, units + 1)) * 16 // itemsize
    shape = shape[:-1] + (int(RNG.integers(1, 3 * inner)),)
    box = tuple(int(n) for n in RNG.integers(1, 6, rank - 1)) + (inner,)
    estrides = tuple(int(n) for n in RNG.integers(1, 4, rank - 1)) + (1,)
    return random_tensor(shape, dtype), box, estrides


def coordinates(a: np.ndarray, box, estrides) -> list[tuple[int, ...]]:
    """Interior, edge, negative and fully outside corners. The innermost coordinate is a whole
    number of 16-byte units, as the hardware requires."""
    span = [b * e for b, e in zip(box, estrides)]
    unit = 16 // a.itemsize
    pick = [
        tuple(0 for _ in a.shape),
        tuple(max(s - w, 0) for s, w in zip(a.shape, span)),    # the last full box
        tuple(s - 1 for s in a.shape),                          # hanging over every edge
        tuple(-(w // 2) - 1 for w in span),                     # negative
        tuple(int(RNG.integers(-w, s + 1)) for s, w in zip(a.shape, span)),
        tuple(int(RNG.integers(-w, s + 1)) for s, w in zip(a.shape, span)),
        tuple(s + 2 for s in a.shape),                          # entirely outside
    ]
    return [c[:-1] + (c[-1] // unit * unit,) for c in pick]


def run_load(a, box, estrides, coords, *, swizzle=None, oob_fill=None, base_offset=0):
    span = SWIZZLE_SPAN[swizzle]
    counts = box_counts(box, estrides)
    rows, row_bytes, pitch = smem_layout(counts, a.itemsize, span)
    smem = aligned_zeros(rows * pitch, 1024, base_offset)
    smem[:] = POISON
    tmap = as_buffer(encode(a, box, swizzle=swizzle, oob_fill=oob_fill,
                            element_strides=estrides))
    rc = H.tile_load(smem.ctypes.data, tmap.ctypes.data, coords[::-1])
    assert rc == H.OK
    return smem, (rows, row_bytes, pitch, span, counts)


def expected_smem(a, box, estrides, coords, layout, fill, base: int) -> np.ndarray:
    rows, row_bytes, pitch, span, counts = layout
    values, _, _ = model_box(a, box, estrides, coords, fill)
    image = np.full(rows * pitch, POISON, np.uint8)
    where = physical(base, row_bytes, rows, pitch, span)
    image[where.ravel()] = np.ascontiguousarray(values).view(np.uint8).ravel()
    return image


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_tile_load_matches_the_model(dtype, rank):
    for _ in range(3):
        a, box, estrides = random_case(dtype, rank)
        for coords in coordinates(a, box, estrides):
            smem, layout = run_load(a, box, estrides, coords)
            want = expected_smem(a, box, estrides, coords, layout, 0, smem.ctypes.data)
            np.testing.assert_array_equal(smem, want, err_msg=f"box {box} at {coords} of "
                                          f"{a.shape}, element strides {estrides}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
def test_nan_fill_marks_exactly_the_elements_outside(dtype):
    for rank in (1, 2, 3):
        a, box, estrides = random_case(dtype, rank)
        for coords in coordinates(a, box, estrides):
            smem, layout = run_load(a, box, estrides, coords, oob_fill="nan")
            values, inside, _ = model_box(a, box, estrides, coords, np.nan)
            got = smem.view(a.dtype).reshape(values.shape)
            np.testing.assert_array_equal(np.isnan(got), ~inside)
            np.testing.assert_array_equal(got[inside], values[inside])
            # the NaN an H200 writes: 0x7FF7 in every 16 bits, at every width
            bits = got.view(np.uint16).reshape(values.shape + (a.itemsize // 2,))[~inside]
            assert (bits == 0x7FF7).all()


@pytest.mark.parametrize("swizzle", ["32B", "64B", "128B"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_swizzled_loads_follow_the_absolute_address(swizzle, dtype):
    for base_offset in (0, 128, 384, 640):  # the pattern follows address bits 7 and up
        a, box, estrides = random_case(dtype, 3, swizzle)
        for coords in coordinates(a, box, estrides)[:4]:
            smem, layout = run_load(a, box, estrides, coords, swizzle=swizzle,
                                    base_offset=base_offset)
            want = expected_smem(a, box, estrides, coords, layout, 0, smem.ctypes.data)
            np.testing.assert_array_equal(smem, want, err_msg=f"{swizzle} box {box} at "
                                          f"{coords}, base +{base_offset}")


def test_the_128B_swizzle_of_a_full_128_byte_box_row():
    """Rows of eight 16-byte chunks: row r holds chunk c at position c ^ (r % 8)."""
    a = random_tensor((16, 32), np.float32)
    smem, _ = run_load(a, (16, 32), (1, 1), (0, 0), swizzle="128B")
    chunks = smem.view(np.float32).reshape(16, 8, 4)
    for r in range(16):
        for c in range(8):
            np.testing.assert_array_equal(chunks[r, c ^ (r % 8)], a[r, 4 * c:4 * c + 4])


def test_a_swizzled_narrow_row_still_takes_a_whole_span():
    """A 32-byte box row under the 128B swizzle: each row starts a new 128-byte span."""
    a = random_tensor((8, 8), np.float32)
    smem, (rows, row_bytes, pitch, _, _) = run_load(a, (8, 8), (1, 1), (0, 0), swizzle="128B")
    assert (rows, row_bytes, pitch) == (8, 32, 128)
    chunks = smem.view(np.float32).reshape(8, 8, 4)
    for r in range(8):
        for c in range(2):
            np.testing.assert_array_equal(chunks[r, c ^ r], a[r, 4 * c:4 * c + 4])
        unwritten = [k for k in range(8) if k not in (r, 1 ^ r)]
        assert (chunks[r, unwritten].view(np.uint8) == POISON).all()


# --- tile stores --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("swizzle", [None, "32B", "128B"])
def test_tile_store_writes_the_box_inside_the_tensor_only(dtype, swizzle):
    for rank in (1, 2, 3, 5):
        if swizzle and np.dtype(dtype).itemsize * 2 > SWIZZLE_SPAN[swizzle]:
            continue
        a, box, estrides = random_case(dtype, rank, swizzle)
        span = SWIZZLE_SPAN[swizzle]
        counts = box_counts(box, estrides)
        rows, row_bytes, pitch = smem_layout(counts, a.itemsize, span)
        for coords in coordinates(a, box, estrides):
            before = a.copy()
            smem = aligned_zeros(rows * pitch, 1024)
            smem[:] = RNG.integers(0, 256, smem.size, dtype=np.uint8)
            tmap = as_buffer(encode(a, box, swizzle=swizzle, element_strides=estrides))
            status = H.tile_store(tmap.ctypes.data, coords[::-1], smem.ctypes.data)
            if min(coords) < 0:  # an illegal instruction on the GPU: refused, nothing written
                assert status == H.ERR_NEGATIVE_STORE_COORDINATE
                np.testing.assert_array_equal(a.view(f"u{a.itemsize}"),
                                              before.view(f"u{a.itemsize}"))
                continue
            assert status == H.OK
            where = physical(smem.ctypes.data, row_bytes, rows, pitch, span)
            values = smem[where.ravel()].view(a.dtype).reshape(counts)
            _, inside, index = model_box(a, box, estrides, coords, 0)
            want = before.copy()
            at = np.nonzero(inside)
            want[tuple(g[k] for g, k in zip(index, at))] = values[at]
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"),
                                          want.view(f"u{a.itemsize}"),
                                          err_msg=f"box {box} at {coords} of {a.shape}")


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32])
def test_a_store_over_a_rows_edge_writes_on_to_its_16_byte_boundary(dtype):
    """As the H200 does (its TMA unit stores whole 16-byte chunks): a box over the right edge of
    rows whose bytes are no multiple of 16 also writes their padding up to the next 16-byte
    boundary, with the box's values there, and not a byte further."""
    itemsize = np.dtype(dtype).itemsize
    unit = 16 // itemsize
    rows = int(RNG.integers(3, 9))
    cols = int(RNG.integers(1, unit)) + unit * int(RNG.integers(1, 4))  # no multiple of 16 bytes
    a = random_tensor((rows, cols), dtype)
    parent = a.base if a.base is not None else a
    stride = a.strides[0] // itemsize
    box = (rows, 2 * unit)
    col0 = (cols // unit) * unit  # the last 16-byte chunk, partly outside
    before = np.array(parent, copy=True).view(np.uint8)
    smem = aligned_zeros(rows * box[1] * itemsize, 1024)
    smem[:] = RNG.integers(0, 256, smem.size, dtype=np.uint8)
    tmap = as_buffer(encode(a, box))
    assert H.tile_store(tmap.ctypes.data, (col0, 0), smem.ctypes.data) == H.OK
    values = smem.view(dtype).reshape(box)
    got = np.frombuffer(parent.data, np.uint8, count=rows * stride * itemsize).view(dtype)
    want = before[:rows * stride * itemsize].view(dtype).copy()
    edge = -(-cols // unit) * unit  # the 16-byte boundary past the last column
    for r in range(rows):
        want[r * stride + col0:r * stride + edge] = values[r, :edge - col0]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert edge - cols > 0  # bytes past the tensor were written: the case is the one meant


REDUCE_DTYPES = [np.float32, np.float16, "bfloat16", np.int32, np.uint32, np.uint64]


def reduce_case_tensor(shape, dtype) -> np.ndarray:
    """Random values of a type a reduce-add takes (bfloat16: ml_dtypes', from float32)."""
    if dtype == "bfloat16":
        import ml_dtypes
        a = random_tensor(shape, np.uint16).view(ml_dtypes.bfloat16)  # rows padded as any
        a[...] = RNG.standard_normal(a.shape).astype(ml_dtypes.bfloat16)
        return a
    return random_tensor(shape, dtype)


@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=str)
@pytest.mark.parametrize("swizzle", [None, "128B"])
def test_tile_reduce_add_adds_the_box_inside_the_tensor_only(dtype, swizzle):
    """Each element of the box inside the tensor added once, in the tensor's type (NumPy's
    rounding for floats, wrapping for integers); nothing outside, not even the row padding a
    store writes on to; a box starting below 0 refused as a store's."""
    for rank in (1, 2, 3, 5):
        a, box, estrides = random_case(np.float32 if dtype == "bfloat16" else dtype, rank,
                                       swizzle)
        if dtype == "bfloat16":  # the same case in 2-byte elements: twice the innermost box
            a = reduce_case_tensor(a.shape[:-1] + (2 * a.shape[-1],), dtype)
            box = box[:-1] + (2 * box[-1],)
        pad = (-a.shape[-1] * a.itemsize) % 16 // a.itemsize  # each row's padding
        parent = np.lib.stride_tricks.as_strided(a, a.shape[:-1] + (a.shape[-1] + pad,),
                                                 a.strides)
        span = SWIZZLE_SPAN[swizzle]
        counts = box_counts(box, estrides)
        rows, row_bytes, pitch = smem_layout(counts, a.itemsize, span)
        tmap = as_buffer(encode(a, box, swizzle=swizzle, element_strides=estrides))
        for coords in coordinates(a, box, estrides):
            before = np.array(parent, copy=True)
            smem = aligned_zeros(rows * pitch, 1024)
            where = physical(smem.ctypes.data, row_bytes, rows, pitch, span)
            values = reduce_case_tensor(counts, dtype)
            smem[where.ravel()] = np.ascontiguousarray(values).view(np.uint8).ravel()
            status = H.tile_reduce_add(tmap.ctypes.data, coords[::-1], smem.ctypes.data)
            if min(coords) < 0:
                assert status == H.ERR_NEGATIVE_STORE_COORDINATE
                np.testing.assert_array_equal(parent.view(np.uint8), before.view(np.uint8))
                continue
            assert status == H.OK
            _, inside, index = model_box(a, box, estrides, coords, 0)
            want = before.copy()
            at = np.nonzero(inside)
            cells = tuple(g[k] for g, k in zip(index, at))
            with np.errstate(over="ignore"):
                want[cells] = want[cells] + values[at]
            np.testing.assert_array_equal(parent.view(np.uint8), want.view(np.uint8),
                                          err_msg=f"box {box} at {coords} of {a.shape}")


def test_a_reduce_add_into_a_map_of_another_type_is_refused():
    for dtype in (np.float64, np.int64, np.int16, np.uint8):
        a = random_tensor((8, 32), dtype)
        before = a.copy()
        smem = aligned_zeros(8 * 32 * a.itemsize, 1024)
        smem[:] = RNG.integers(0, 256, smem.size, dtype=np.uint8)
        tmap = as_buffer(encode(a, (8, 32)))
        assert H.tile_reduce_add(tmap.ctypes.data, (0, 0), smem.ctypes.data) == \
            H.ERR_REDUCE_TYPE
        np.testing.assert_array_equal(a.view(np.uint8), before.view(np.uint8))
    assert "float32, float16, bfloat16, int32, uint32 or uint64" in H.device_fault(
        "k", "kj.tma.reduce_add", True, H.ERR_REDUCE_TYPE, "f.py:3")


def test_a_store_then_a_load_round_trips():
    a = random_tensor((40, 24), np.float32)
    b = random_tensor((40, 24), np.float32)
    box = (8, 16)
    smem = aligned_zeros(8 * 64, 1024)
    load = as_buffer(encode(a, box, swizzle="64B"))
    store = as_buffer(encode(b, box, swizzle="64B"))
    for row in range(0, 40, 8):
        for col in range(0, 24, 16):
            assert H.tile_load(smem.ctypes.data, load.ctypes.data, (col, row)) == H.OK
            assert H.tile_store(store.ctypes.data, (col, row), smem.ctypes.data) == H.OK
    np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_a_box_must_start_16_byte_aligned(dtype):
    """An H200 faults (illegal instruction) on an innermost coordinate that is not a whole
    number of 16-byte units; the host copies refuse it and touch nothing."""
    a = random_tensor((16, 64), dtype)
    before = a.copy()
    unit = 16 // a.itemsize
    smem = aligned_zeros(8 * 16 * 4, 1024)
    smem[:] = POISON
    bar = aligned_zeros(8, 8)
    H.mbarrier_init(bar.ctypes.data, 1)
    H.mbarrier_arrive_expect_tx(bar.ctypes.data, 16)
    tmap = as_buffer(encode(a, (8, 16 // a.itemsize * 2)))
    for col in {1, unit - 1, unit + 1, -1, -unit - 1}:
        rc = H.tile_load(smem.ctypes.data, tmap.ctypes.data, (col, 0), bar.ctypes.data)
        assert rc == H.ERR_MISALIGNED_COORDINATE, col
        assert H.tile_store(tmap.ctypes.data, (col, 0), smem.ctypes.data) == \
            H.ERR_MISALIGNED_COORDINATE
    assert (smem == POISON).all()
    assert not H.mbarrier_try_wait_parity(bar.ctypes.data, 0)  # no bytes were completed
    np.testing.assert_array_equal(a.view(np.uint8), before.view(np.uint8))
    assert H.tile_load(smem.ctypes.data, tmap.ctypes.data, (-unit, 0)) == H.OK


def test_a_map_that_is_not_a_host_map_is_refused():
    a = random_tensor((8, 8), np.float32)
    smem = aligned_zeros(256, 1024)
    smem[:] = POISON
    junk = as_buffer(RNG.integers(0, 256, 128, dtype=np.uint8).tobytes())
    assert H.tile_load(smem.ctypes.data, junk.ctypes.data, (0, 0)) == H.ERR_NOT_A_HOST_MAP
    assert (smem == POISON).all()
    before = a.copy()
    assert H.tile_store(junk.ctypes.data, (0, 0), smem.ctypes.data) == H.ERR_NOT_A_HOST_MAP
    np.testing.assert_array_equal(a, before)
    with pytest.raises(ValueError, match="not a kaiojit host tensor map"):
        H.decode(junk.tobytes())


def test_the_encoding_holds_every_field_innermost_first():
    a = random_tensor((5, 6, 7, 40), np.float16)
    data = encode(a, (2, 3, 4, 16), swizzle="32B", oob_fill="nan",
                  element_strides=(3, 2, 1, 1))
    m = H.decode(data)
    assert len(data) == 128 and data[8:12] == b"KJTM"
    assert (m.address, m.rank, m.dtype_code, m.elem_size) == (a.ctypes.data, 4, 6, 2)
    assert m.dims == (40, 7, 6, 5)
    assert m.strides == tuple(reversed(a.strides[:-1]))
    assert m.box == (16, 4, 3, 2) and m.element_strides == (1, 1, 2, 3)
    assert (m.swizzle, m.interleave, m.l2_promotion, m.oob_fill) == (1, 0, 0, 1)
    assert data[107:] == bytes(21)


# --- mbarriers ----------------------------------------------------------------------------------

def test_mbarrier_phases_complete_on_arrivals_and_transactions():
    bar = aligned_zeros(8, 8)
    addr = bar.ctypes.data
    count = int(RNG.integers(2, 6))
    H.mbarrier_init(addr, count)
    for phase in range(4):
        parity = phase % 2
        nbytes = int(RNG.integers(16, 1 << 16))
        assert not H.mbarrier_try_wait_parity(addr, parity)
        assert H.mbarrier_try_wait_parity(addr, 1 - parity)  # the phase before has completed
        assert H.mbarrier_arrive_expect_tx(addr, nbytes) == parity
        for _ in range(count - 1):
            assert H.mbarrier_arrive(addr) == parity
        assert not H.mbarrier_try_wait_parity(addr, parity)  # the bytes are still pending
        H.mbarrier_complete_tx(addr, nbytes - 16)
        assert not H.mbarrier_try_wait_parity(addr, parity)
        H.mbarrier_complete_tx(addr, 16)
        assert H.mbarrier_try_wait_parity(addr, parity)


def test_transactions_may_complete_before_they_are_expected():
    bar = aligned_zeros(8, 8)
    addr = bar.ctypes.data
    H.mbarrier_init(addr, 1)
    H.mbarrier_complete_tx(addr, 4096)  # the copy landed first: the count goes negative
    assert not H.mbarrier_try_wait_parity(addr, 0)
    H.mbarrier_arrive_expect_tx(addr, 4096)
    assert H.mbarrier_try_wait_parity(addr, 0)


def test_a_tile_load_completes_its_box_bytes_on_the_barrier():
    a = random_tensor((20, 36), np.float32)
    bar = aligned_zeros(8, 8)
    addr = bar.ctypes.data
    H.mbarrier_init(addr, 1)
    box, estrides = (6, 8), (2, 1)
    nbytes = 3 * 8 * 4  # ceil(6 / 2) rows of 8 floats, the part outside the tensor included
    H.mbarrier_arrive_expect_tx(addr, nbytes)
    assert not H.mbarrier_try_wait_parity(addr, 0)
    smem = aligned_zeros(nbytes, 1024)
    tmap = as_buffer(encode(a, box, element_strides=estrides))
    assert H.tile_load(smem.ctypes.data, tmap.ctypes.data, (32, 18), addr) == H.OK
    assert H.mbarrier_try_wait_parity(addr, 0)
    values, _, _ = model_box(a, box, estrides, (18, 32), 0)
    np.testing.assert_array_equal(smem.view(np.float32).reshape(3, 8), values)


def test_the_native_functions_are_registered_for_mcjit():
    from llvmlite import binding as llvm

    H.register_symbols()
    for name, address in H.symbols().items():
        assert llvm.address_of_symbol(name) == address
