"""End to end: shared memory and barriers (reductions, tiled matmul, syncthreads_count/and/or),
barriers inside loops and device functions, dynamic shared memory, divergent barriers."""

import re

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()
TPB = 128


@kj.jit
def block_sum(out, x):
    sm = kj.shared.array(TPB, kj.float32)
    t = kj.threadIdx.x
    i = kj.grid(1)
    sm[t] = x[i] if i < x.size else 0.0
    kj.syncthreads()
    s = kj.blockDim.x // 2
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        kj.syncthreads()
        s //= 2
    if t == 0:
        out[kj.blockIdx.x] = sm[0]


def test_block_sum(kj_backend):
    n = TPB * int(rng.integers(5, 40)) - int(rng.integers(0, TPB))
    x = rng.standard_normal(n).astype(np.float32)
    nblocks = (n + TPB - 1) // TPB
    out = kj.to_device(np.full(nblocks, np.nan, np.float32))
    block_sum[nblocks, TPB](out, kj.to_device(x))
    padded = np.zeros(nblocks * TPB, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(out.copy_to_host(), padded.reshape(-1, TPB).sum(1),
                               rtol=1e-4, atol=1e-4)


@kj.jit
def dynamic_block_sum(out, x):
    sm = kj.shared.array(0, kj.float64)     # sized at launch
    t = kj.threadIdx.x
    i = kj.grid(1)
    sm[t] = x[i] if i < x.size else 0.0
    kj.syncthreads()
    for step in range(1, 11):
        s = 1 << (10 - step)
        if t < s and t + s < sm.size:
            sm[t] += sm[t + s]
        kj.syncthreads()
    if t == 0:
        out[kj.blockIdx.x] = sm[0]


@pytest.mark.parametrize("block", [64, 256])
def test_dynamic_shared_memory(kj_backend, block):
    n = 5000
    x = rng.standard_normal(n)
    nblocks = (n + block - 1) // block
    out = kj.to_device(np.full(nblocks, np.nan))
    dynamic_block_sum[nblocks, block, 0, block * 8](out, kj.to_device(x))
    padded = np.zeros(nblocks * block)
    padded[:n] = x
    np.testing.assert_allclose(out.copy_to_host(), padded.reshape(-1, block).sum(1))


TILE = 16


@kj.jit
def matmul_tiled(c, a, b):
    sa = kj.shared.array((TILE, TILE), kj.float32)
    sb = kj.shared.array((TILE, TILE), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    row = kj.blockIdx.y * TILE + ty
    col = kj.blockIdx.x * TILE + tx
    acc = kj.float32(0)
    for k0 in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < a.shape[1] else 0
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < b.shape[0] and col < b.shape[1] else 0
        kj.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        kj.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


def test_tiled_matmul(kj_backend):
    m, k, n = (int(v) for v in rng.integers(20, 70, 3))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = kj.to_device(np.full((m, n), np.nan, np.float32))
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    matmul_tiled[grid, (TILE, TILE)](c, kj.to_device(a), kj.to_device(b))
    np.testing.assert_allclose(c.copy_to_host(), a @ b, rtol=1e-4, atol=1e-4)


@kj.jit
def votes(out, x, threshold):
    i = kj.grid(1)
    p = x[i] > threshold
    out[i, 0] = kj.syncthreads_count(p)
    out[i, 1] = kj.syncthreads_and(p)
    out[i, 2] = kj.syncthreads_or(p)


def test_syncthreads_count_and_or(kj_backend):
    block, nblocks = 96, 5
    x = rng.standard_normal(block * nblocks)
    x[:block] = np.abs(x[:block]) + 1        # block 0: all above
    x[block:2 * block] = -np.abs(x[block:2 * block]) - 1   # block 1: none above
    out = kj.to_device(np.full((block * nblocks, 3), -7, np.int32))
    votes[nblocks, block](out, kj.to_device(x), 0.0)
    above = (x > 0).reshape(nblocks, block)
    expect = np.stack([above.sum(1), above.all(1), above.any(1)], 1).astype(np.int32)
    np.testing.assert_array_equal(out.copy_to_host(), np.repeat(expect, block, axis=0))


@kj.jit(device=True)
def block_max(sm, v):
    t = kj.threadIdx.x
    sm[t] = v
    kj.syncthreads()
    s = kj.blockDim.x // 2
    while s > 0:
        if t < s:
            sm[t] = max(sm[t], sm[t + s])
        kj.syncthreads()
        s //= 2
    r = sm[0]
    kj.syncthreads()
    return r


@kj.jit
def normalize_by_block_max(out, x):
    sm = kj.shared.array(64, kj.float64)
    i = kj.grid(1)
    m = block_max(sm, abs(x[i]))
    out[i] = x[i] / m


def test_barrier_in_device_function(kj_backend):
    x = rng.standard_normal(64 * 7)
    out = kj.to_device(np.full(x.size, np.nan))
    normalize_by_block_max[7, 64](out, kj.to_device(x))
    m = np.abs(x).reshape(7, 64).max(1)
    np.testing.assert_allclose(out.copy_to_host(), (x.reshape(7, 64) / m[:, None]).ravel())


@kj.jit
def loop_control(out, x, limit):
    """Divergent continue after the barriers of an iteration, and return (exited threads are
    not expected at later barriers): each thread adds its neighbour's non-negative values."""
    sm = kj.shared.array(32, kj.float64)
    t = kj.threadIdx.x
    acc = 0.0
    for j in range(x.shape[1]):
        sm[t] = x[t, j]
        kj.syncthreads()
        v = sm[(t + 1) % 32]
        kj.syncthreads()
        if v < 0:
            continue
        acc += v
        if acc > limit:
            out[t] = -acc
            return
    out[t] = acc


def _loop_control_reference(x, limit):
    n, m = x.shape
    sm = np.zeros(n)
    acc = np.zeros(n)
    out = np.full(n, np.nan)
    alive = np.ones(n, bool)
    for j in range(m):
        sm[alive] = x[alive, j]
        v = sm[(np.arange(n) + 1) % n]
        for t in np.flatnonzero(alive):
            if v[t] >= 0:
                acc[t] += v[t]
                if acc[t] > limit:
                    out[t] = -acc[t]
                    alive[t] = False
    out[alive] = acc[alive]
    return out


def test_continue_and_return_around_barriers(kj_backend):
    x = rng.standard_normal((32, 12))
    limit = 2.5
    out = kj.to_device(np.full(32, np.nan))
    loop_control[1, 32](out, kj.to_device(x), limit)
    np.testing.assert_allclose(out.copy_to_host(), _loop_control_reference(x, limit))


@kj.jit
def divergent_break(out, x):
    t = kj.threadIdx.x
    for j in range(x.shape[1]):
        kj.syncthreads()
        if x[t, j] > 0:
            break
    out[t] = t


def test_divergent_break_before_barrier_raises(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("a divergent barrier is undefined behaviour on a GPU")
    x = -np.abs(rng.standard_normal((32, 4)))
    x[3, 1] = 1.0   # thread 3 leaves the loop early; the others meet the barrier without it
    with pytest.raises(kj.KernelError, match=r"divergent syncthreads\(\) in block \(0, 0, 0\)"):
        divergent_break[1, 32](kj.to_device(np.zeros(32)), kj.to_device(x))


@kj.jit
def uniform_loop_control(out, x):
    sm = kj.shared.array(64, kj.float64)
    t = kj.threadIdx.x
    total = 0.0
    j = 0
    while True:
        if j >= x.shape[1]:
            break
        sm[t] = x[t, j]
        kj.syncthreads()
        j += 1
        if j % 3 == 0:
            kj.syncthreads()
            continue
        total += sm[63 - t]
        kj.syncthreads()
    out[t] = total


def test_uniform_break_and_continue_with_barriers(kj_backend):
    x = rng.standard_normal((64, 10))
    out = kj.to_device(np.full(64, np.nan))
    uniform_loop_control[1, 64](out, kj.to_device(x))
    cols = [j for j in range(10) if (j + 1) % 3 != 0]
    np.testing.assert_allclose(out.copy_to_host(), x[::-1][:, cols].sum(1))


@kj.jit
def exit_then_sync(out, x, n):
    sm = kj.shared.array(128, kj.float64)
    t = kj.threadIdx.x
    i = kj.grid(1)
    if i >= n:
        return           # exited threads are not expected at later barriers
    sm[t] = x[i]
    kj.syncthreads()
    out[i] = sm[t] + sm[0]


def test_returned_threads_skip_barriers(kj_backend):
    n = 300
    x = rng.standard_normal(n)
    out = kj.to_device(np.full(n, np.nan))
    exit_then_sync[3, 128](out, kj.to_device(x), n)
    first = x[(np.arange(n) // 128) * 128]
    np.testing.assert_allclose(out.copy_to_host(), x + first)


@kj.jit
def divergent(out):
    t = kj.threadIdx.x
    if t < 5:
        kj.syncthreads()
    out[t] = t


def test_divergent_syncthreads_raises(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("a divergent barrier is undefined behaviour on a GPU")
    out = kj.to_device(np.zeros(64))
    with pytest.raises(kj.KernelError) as err:
        divergent[(2, 3), 64](out)
    msg = str(err.value)
    assert "divergent" in msg and "'divergent'" in msg
    assert re.search(r"block \(\d, \d, 0\)", msg) and "syncthreads" in msg
    assert "thread (5, 0, 0)" in msg
    assert "test_sync.py" in msg


@kj.jit
def big_block_locals(out, x):
    """1024 threads, each with a local array and a barrier: per-thread storage in block mode."""
    sm = kj.shared.array(1024, kj.float64)
    t = kj.threadIdx.x + kj.threadIdx.y * kj.blockDim.x
    tmp = kj.local.array(8, kj.float64)
    for k in range(8):
        tmp[k] = x[kj.blockIdx.x, t] * (k + 1)
    sm[t] = tmp[7]
    kj.syncthreads()
    acc = 0.0
    for k in range(8):
        acc += tmp[k]
    out[kj.blockIdx.x, t] = acc + sm[1023 - t]


def test_1024_threads_with_local_arrays(kj_backend):
    x = rng.standard_normal((3, 1024))
    out = kj.to_device(np.full((3, 1024), np.nan))
    big_block_locals[3, (32, 32)](out, kj.to_device(x))
    np.testing.assert_allclose(out.copy_to_host(), x * 36 + x[:, ::-1] * 8)


@kj.jit(debug=True)
def shared_out_of_bounds(out, k):
    sm = kj.shared.array(32, kj.int32)
    t = kj.threadIdx.x
    sm[t] = t
    kj.syncthreads()
    out[t] = sm[t + k]


def test_debug_bounds_in_block_mode(kj_backend):
    out = kj.to_device(np.zeros(32, np.int32))
    shared_out_of_bounds[1, 32](out, 0)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(32))
    with pytest.raises(kj.KernelError, match=r"index 32 .* array 'sm' \(size 32\)"):
        shared_out_of_bounds[1, 32](out, 1)
        kj.synchronize()


@kj.jit(device=True)
def barrier_inside():
    kj.syncthreads()
    return 1


@kj.jit
def divergent_call(out):
    t = kj.threadIdx.x
    if t % 2 == 0:
        out[t] = barrier_inside()


def test_divergent_barrier_in_device_function_raises(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("a divergent barrier is undefined behaviour on a GPU")
    with pytest.raises(kj.KernelError, match="divergent syncthreads"):
        divergent_call[2, 32](kj.to_device(np.zeros(32, np.int64)))
