"""End to end: warp shuffles, votes, activemask and laneid, warp-synchronous results."""

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()
FULL = 0xFFFFFFFF


@kj.jit
def warp_sum(out, x):
    i = kj.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += kj.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if kj.laneid == 0:
        out[i // 32] = v


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32,
                                   np.float64], ids=lambda d: np.dtype(d).name)
def test_warp_shuffle_reduction(kj_backend, dtype):
    n = 32 * 12
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(n).astype(dtype)
    else:
        x = rng.integers(0, 1 << 20, n).astype(dtype)
    out = kj.to_device(np.full(n // 32, 77, dtype))  # poisoned: every warp must write
    warp_sum[3, 128](out, kj.to_device(x))
    # the same tree in the same order: lane l adds lane l + offset (lanes past 31 read their own
    # value, as shfl.down does); lane 0's sum is exact for floats too, not merely close
    v = x.reshape(-1, 32).copy()
    offset = 16
    while offset > 0:
        lanes = np.arange(32)
        src = np.where(lanes + offset < 32, lanes + offset, lanes)
        v = v + v[:, src]
        offset //= 2
    np.testing.assert_array_equal(out.copy_to_host(), v[:, 0])


@kj.jit
def shuffles(out, x, k):
    i = kj.grid(1)
    v = x[i]
    out[i, 0] = kj.shfl_sync(FULL, v, k)
    out[i, 1] = kj.shfl_up_sync(FULL, v, k)
    out[i, 2] = kj.shfl_down_sync(FULL, v, k)
    out[i, 3] = kj.shfl_xor_sync(FULL, v, k)


def test_shuffle_modes(kj_backend):
    n = 96
    x = rng.standard_normal(n)
    k = int(rng.integers(1, 31))
    out = kj.to_device(np.full((n, 4), np.nan))
    shuffles[1, n](out, kj.to_device(x), k)
    lane = np.arange(n) % 32
    base = np.arange(n) - lane
    up = np.where(lane - k >= 0, base + lane - k, np.arange(n))
    down = np.where(lane + k < 32, base + lane + k, np.arange(n))
    expect = np.stack([x[base + k], x[up], x[down], x[base + (lane ^ k)]], 1)
    np.testing.assert_array_equal(out.copy_to_host(), expect)


@kj.jit
def warp_votes(out, x):
    i = kj.grid(1)
    p = x[i] > 0
    out[i, 0] = kj.ballot_sync(FULL, p)
    out[i, 1] = kj.any_sync(FULL, p)
    out[i, 2] = kj.all_sync(FULL, p)
    out[i, 3] = kj.laneid
    out[i, 4] = kj.warpsize


def test_ballot_any_all(kj_backend):
    n = 128
    x = rng.standard_normal(n)
    x[32:64] = np.abs(x[32:64]) + 0.1        # a warp where all are true
    x[64:96] = -np.abs(x[64:96]) - 0.1       # a warp where none is
    out = kj.to_device(np.full((n, 5), 12345, np.int64))
    warp_votes[1, n](out, kj.to_device(x))
    bits = (x > 0).reshape(-1, 32)
    ballot = (bits * (1 << np.arange(32, dtype=np.int64))).sum(1)
    expect = np.stack([ballot, bits.any(1), bits.all(1)], 1).astype(np.int64)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:, :3], np.repeat(expect, 32, axis=0))
    np.testing.assert_array_equal(got[:, 3], np.arange(n) % 32)
    assert (got[:, 4] == 32).all()


@kj.jit
def divergent_warp(out, x):
    i = kj.grid(1)
    if x[i] > 0:
        out[i, 0] = kj.activemask()
        out[i, 1] = kj.ballot_sync(kj.activemask(), True)
    else:
        out[i, 0] = kj.activemask()
        out[i, 1] = 0


def test_activemask_in_divergent_code(kj_backend):
    n = 64
    x = rng.standard_normal(n)
    out = kj.to_device(np.full((n, 2), -1, np.int64))
    divergent_warp[1, n](out, kj.to_device(x))
    pos = (x > 0).reshape(-1, 32)
    weights = 1 << np.arange(32, dtype=np.int64)
    mask_pos = (pos * weights).sum(1)
    mask_neg = (~pos * weights).sum(1)
    got = out.copy_to_host()
    expect0 = np.where(x > 0, np.repeat(mask_pos, 32), np.repeat(mask_neg, 32))
    np.testing.assert_array_equal(got[:, 0], expect0)
    np.testing.assert_array_equal(got[:, 1], np.where(x > 0, np.repeat(mask_pos, 32), 0))


@kj.jit
def partial_warp_sum(out, x):
    i = kj.grid(1)
    v = x[i]
    s = 16
    while s >= 1:
        v += kj.shfl_xor_sync(FULL, v, s)
        s //= 2
    out[i] = v


def test_block_of_whole_warps_xor_butterfly(kj_backend):
    n = 160
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = kj.to_device(np.zeros(n, np.int32))
    partial_warp_sum[1, n](out, kj.to_device(x))
    np.testing.assert_array_equal(out.copy_to_host(), np.repeat(x.reshape(-1, 32).sum(1), 32))


@kj.jit
def warp_then_block(out, x):
    sm = kj.shared.array(8, kj.float32)
    t = kj.threadIdx.x
    v = x[kj.grid(1)]
    off = 16
    while off > 0:
        v += kj.shfl_down_sync(FULL, v, off)
        off //= 2
    if kj.laneid == 0:
        sm[t // 32] = v
    kj.syncthreads()
    if t < 32:
        w = sm[t] if t < kj.blockDim.x // 32 else kj.float32(0)
        for k in range(3):
            w += kj.shfl_down_sync(FULL, w, 4 >> k)
        if t == 0:
            kj.atomic.add(out, 0, w)


def test_warp_and_block_reduction_with_atomics(kj_backend):
    n = 256 * 9
    x = rng.standard_normal(n).astype(np.float32)
    out = kj.to_device(np.zeros(1, np.float32))
    warp_then_block[9, 256](out, kj.to_device(x))
    np.testing.assert_allclose(out.copy_to_host()[0], x.sum(dtype=np.float64), rtol=1e-4)
