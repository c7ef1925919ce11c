"""Thread-block clusters end to end, on the cpu backend and, under the ``gpu`` marker, on cuda
(sm_90 or newer: skipped on an older GPU): launching with a cluster (``kernel.launch(...,
cluster=...)`` and ``kernel[grid, block, stream, shared, cluster]``), the cluster special
registers, the cluster barrier ordering writes into another block's shared memory
(``kj.cluster.map_shared_rank``), remote mbarrier arrivals and TMA multicast; every kernel's PTX
assembled for sm_90a; bad shapes and bad ranks located."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import get_backend, set_backend
from kaiojit.testing import _backend
from tests.located import assert_located, assert_no_internals, compile_error
from tests.ptxas import assemble

rng = np.random.default_rng()
T = 16  # the multicast tile: T x T float32
POISON = -(2**40) - 7


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def backend(request):
    """The cpu backend, and cuda under the gpu marker on a GPU of compute capability 9.0+."""
    previous = set_backend(_backend(request.param))
    try:
        if request.param == "cuda" and get_backend().compute_capability(0) < (9, 0):
            pytest.skip("thread-block clusters need sm_90 or newer")
        yield request.param
    finally:
        set_backend(previous)


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("cluster", [2, (4, 1, 1)])
def test_cluster_launch_runs_every_block(backend, cluster):
    n = 256 * 8 * 5 + int(rng.integers(0, 200))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-2, 2))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    blocks = -(-n // 256)
    blocks += -blocks % 4  # a whole number of clusters
    saxpy.launch(out, kj.to_device(x), kj.to_device(y), a, np.int32(n), grid=blocks,
                 block=256, cluster=cluster)
    np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-6)


# --- the special registers ---------------------------------------------------------------------

@kj.jit
def where_am_i(out):
    b = kj.blockIdx.x + kj.gridDim.x * (kj.blockIdx.y + kj.gridDim.y * kj.blockIdx.z)
    if kj.threadIdx.x == 0:
        out[b, 0] = kj.clusterIdx.x
        out[b, 1] = kj.clusterIdx.y
        out[b, 2] = kj.clusterIdx.z
        out[b, 3] = kj.clusterDim.x * 100 + kj.clusterDim.y * 10 + kj.clusterDim.z
        out[b, 4] = kj.clusterBlockIdx.x
        out[b, 5] = kj.clusterBlockIdx.y
        out[b, 6] = kj.clusterBlockIdx.z
        out[b, 7] = kj.clusterGridDim.x * 10000 + kj.clusterGridDim.y * 100 + kj.clusterGridDim.z
        out[b, 8] = kj.cluster.block_rank()
        out[b, 9] = kj.cluster.num_blocks()


def _expected_registers(grid, cluster):
    gx, gy, gz = grid
    cx, cy, cz = cluster
    z, y, x = np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij")
    x, y, z = x.ravel(), y.ravel(), z.ravel()
    rx, ry, rz = x % cx, y % cy, z % cz
    return np.stack([x // cx, y // cy, z // cz, np.full_like(x, cx * 100 + cy * 10 + cz),
                     rx, ry, rz,
                     np.full_like(x, gx // cx * 10000 + gy // cy * 100 + gz // cz),
                     rx + cx * (ry + cy * rz), np.full_like(x, cx * cy * cz)], axis=1)


@pytest.mark.parametrize("cluster", [None, (2, 1, 1), (2, 2, 1), (1, 2, 2), (8, 1, 1)])
def test_cluster_registers(backend, cluster):
    shape = cluster or (1, 1, 1)
    grid = tuple(c * int(rng.integers(1, 4)) for c in shape)
    nblocks = grid[0] * grid[1] * grid[2]
    out = kj.to_device(np.full((nblocks, 10), POISON, np.int64))
    where_am_i.launch(out, grid=grid, block=int(rng.integers(1, 65)), cluster=cluster)
    np.testing.assert_array_equal(out.copy_to_host(), _expected_registers(grid, shape))


def test_cluster_in_the_launch_configuration(backend):
    out = kj.to_device(np.full((8, 10), POISON, np.int64))
    where_am_i[(4, 2), 32, 0, 0, (2, 2)](out)
    np.testing.assert_array_equal(out.copy_to_host(), _expected_registers((4, 2, 1), (2, 2, 1)))


def test_the_mock_backend_records_the_cluster():
    from kaiojit.runtime.mock import MockBackend

    backend = MockBackend()
    previous = set_backend(backend)
    try:
        out = kj.device_array((16, 10), np.int64)
        launcher = where_am_i[(4, 2), 32, 0, 0, (2, 2)]
        launcher(out)
        launcher(out)  # a cluster launch has no fast form: the launcher stays general
        where_am_i.launch(out, grid=16, block=64, cluster=4)
        where_am_i[16, 32](out)
        got = [(rec.grid, rec.block, rec.cluster) for rec in backend.launches]
        assert got == [((4, 2, 1), (32, 1, 1), (2, 2, 1))] * 2 + [
            ((16, 1, 1), (64, 1, 1), (4, 1, 1)), ((16, 1, 1), (32, 1, 1), None)]
    finally:
        set_backend(previous)


# --- the cluster barrier and distributed shared memory -----------------------------------------

@kj.jit
def rotate_through_neighbours(out, x, n):
    """Each block writes its slice of x into the shared memory of the next block of its
    cluster, then reads what the previous block wrote into its own."""
    mine = kj.shared.array(256, kj.float32)
    t = kj.threadIdx.x
    rank = kj.cluster.block_rank()
    nxt = kj.cluster.map_shared_rank(mine, (rank + 1) % kj.cluster.num_blocks())
    kj.cluster.sync()  # every block has started before any writes into another one
    b = kj.blockIdx.x
    nxt[t] = x[b * n + t] * 2.0
    kj.cluster.sync()  # the remote writes are done and visible
    out[b * n + t] = mine[t]
    kj.cluster.sync()  # no block leaves while another may still read its shared memory


@pytest.mark.parametrize("size", [2, 4])
def test_cluster_barrier_orders_a_remote_write(backend, size):
    n = 128
    blocks = size * int(rng.integers(1, 4))
    x = rng.standard_normal(blocks * n).astype(np.float32)
    out = kj.to_device(np.full(blocks * n, np.nan, np.float32))
    rotate_through_neighbours.launch(out, kj.to_device(x), np.int32(n), grid=blocks, block=n,
                                     cluster=size)
    src = x.reshape(blocks, n) * 2
    prev = np.array([b - b % size + (b % size - 1) % size for b in range(blocks)])
    np.testing.assert_array_equal(out.copy_to_host().reshape(blocks, n), src[prev])


@kj.jit
def split_barrier(out, x):
    """arrive, independent work, wait: the neighbour's value is read after the wait."""
    cell = kj.shared.array(1, kj.float64)
    t = kj.threadIdx.x
    rank = kj.cluster.block_rank()
    if t == 0:
        cell[0] = x[kj.blockIdx.x]
    kj.cluster.arrive()
    local = x[kj.blockIdx.x] + 1.0  # work that needs no other block
    kj.cluster.wait()
    other = kj.cluster.map_shared_rank(cell, rank ^ 1)
    if t == 0:
        out[kj.blockIdx.x] = other[0] * 10.0 + local
    kj.cluster.arrive_relaxed()
    kj.cluster.wait()


def test_split_cluster_barrier(backend):
    blocks = 2 * int(rng.integers(1, 6))
    x = rng.standard_normal(blocks)
    out = kj.to_device(np.full(blocks, np.nan))
    split_barrier.launch(out, kj.to_device(x), grid=blocks, block=64, cluster=2)
    partner = np.arange(blocks) ^ 1
    np.testing.assert_allclose(out.copy_to_host(), x[partner] * 10.0 + x + 1.0, rtol=1e-12,
                               atol=1e-12)


@kj.jit
def gather_by_remote_arrivals(out, x):
    """Each block's leader writes a value into every block of the cluster, then arrives on that
    block's mbarrier; each block waits on its own barrier (one arrival per block) and reads."""
    inbox = kj.shared.array(8, kj.float32)
    bar = kj.shared.array(1, kj.uint64)
    t = kj.threadIdx.x
    n = kj.cluster.num_blocks()
    rank = kj.cluster.block_rank()
    if t == 0:
        kj.mbarrier.init(bar, n)
        kj.fence_mbarrier_init()
    kj.cluster.sync()
    if t < n:  # thread t delivers this block's value to the block of rank t
        there = kj.cluster.map_shared_rank(inbox, t)
        there[rank] = x[kj.blockIdx.x]
        kj.mbarrier.arrive_cluster(bar, t)
    kj.mbarrier.wait_cluster(bar, 0)  # acquires what the other blocks stored before arriving
    if t < n:
        out[kj.blockIdx.x, t] = inbox[t]
    kj.cluster.sync()


@pytest.mark.parametrize("size", [2, 8])
def test_remote_mbarrier_arrive(backend, size):
    blocks = size * int(rng.integers(1, 3))
    x = rng.standard_normal(blocks).astype(np.float32)
    out = kj.to_device(np.full((blocks, size), np.nan, np.float32))
    gather_by_remote_arrivals.launch(out, kj.to_device(x), grid=blocks, block=32, cluster=size)
    first = np.arange(blocks) // size * size
    expected = x[first[:, None] + np.arange(size)[None, :]]
    np.testing.assert_array_equal(out.copy_to_host(), expected)


@kj.jit
def some_blocks_return_early(out, x):
    """The cluster barrier waits for the blocks that have not exited (as PTX defines it)."""
    if kj.cluster.block_rank() % 2 == 1:
        return
    kj.cluster.sync()
    out[kj.blockIdx.x * kj.blockDim.x + kj.threadIdx.x] = x[kj.blockIdx.x] + 1.0


def test_a_block_that_returned_does_not_hold_the_cluster_barrier(backend):
    blocks, threads = 4 * int(rng.integers(1, 4)), 32
    x = rng.standard_normal(blocks)
    out = kj.to_device(np.full(blocks * threads, np.nan))
    some_blocks_return_early.launch(out, kj.to_device(x), grid=blocks, block=threads, cluster=4)
    got = out.copy_to_host().reshape(blocks, threads)
    even = np.arange(blocks) % 2 == 0
    np.testing.assert_array_equal(got[even], np.repeat((x[even] + 1.0)[:, None], threads, 1))
    assert np.isnan(got[~even]).all()


@kj.jit
def waits_for_each_other(out):
    """Each block waits on its own barrier for an arrival nobody makes."""
    bar = kj.shared.array(1, kj.uint64)
    if kj.threadIdx.x == 0:
        kj.mbarrier.init(bar, 1)
    kj.cluster.sync()
    kj.mbarrier.wait(bar, 0)
    out[kj.blockIdx.x] = 1


@kj.jit
def sync_against_a_wait(out):
    """Rank 0 waits at a second cluster barrier, rank 1 for an arrival rank 0 makes after it."""
    bar = kj.shared.array(1, kj.uint64)
    if kj.threadIdx.x == 0:
        kj.mbarrier.init(bar, 1)
    kj.cluster.sync()
    if kj.cluster.block_rank() == 0:
        kj.cluster.sync()
        if kj.threadIdx.x == 0:
            kj.mbarrier.arrive_cluster(bar, 1)
    else:
        kj.mbarrier.wait(bar, 0)
        kj.cluster.sync()
    out[kj.blockIdx.x] = 1


@pytest.mark.parametrize("kernel, ops", [
    (waits_for_each_other, r"kj\.mbarrier\.wait"),
    (sync_against_a_wait, r"(kj\.mbarrier\.wait|kj\.cluster\.sync)"),
])
def test_a_deadlock_of_the_clusters_blocks_is_reported_on_the_cpu_backend(kernel, ops):
    previous = set_backend(_backend("cpu"))
    try:
        out = kj.to_device(np.zeros(4, np.int32))
        with pytest.raises(kj.KernelError, match=rf"{ops}\(\) can never complete: every block "
                                                 r"of the cluster of 2 blocks") as info:
            kernel.launch(out, grid=4, block=32, cluster=2)
        assert "test_clusters.py:" in str(info.value)
        assert_no_internals(info.value)
    finally:
        set_backend(previous)


# --- TMA multicast -------------------------------------------------------------------------------

@kj.jit
def multicast_tile(src, out, rows):
    """Each block of a cluster loads ``rows`` rows of the cluster's T x T tile and multicasts
    them to every block; every block then holds the whole tile."""
    ring = kj.shared.array(T * T, kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    rank = kj.cluster.block_rank()
    t = kj.threadIdx.x
    if t == 0:
        kj.mbarrier.init(bar, 1)
        kj.fence_mbarrier_init()
    kj.cluster.sync()
    if t == 0:
        kj.mbarrier.arrive_expect_tx(bar, T * T * 4)
        everyone = (1 << kj.cluster.num_blocks()) - 1
        kj.tma.load_multicast(ring[rank * rows * T:], src, kj.clusterIdx.x * T + rank * rows, 0,
                              bar, everyone)
    kj.mbarrier.wait(bar, 0)
    for k in range(t, T * T, kj.blockDim.x):
        out[kj.blockIdx.x, k // T, k % T] = ring[k]
    kj.cluster.sync()


@pytest.mark.parametrize("size", [2, 4])
def test_multicast_writes_every_block_of_the_cluster(backend, size):
    clusters = int(rng.integers(1, 4))
    src = rng.standard_normal((T * clusters, T)).astype(np.float32)
    tmap = kj.TensorMap.tiled(kj.to_device(src), (T // size, T))
    out = kj.to_device(np.full((clusters * size, T, T), np.nan, np.float32))
    multicast_tile.launch(tmap, out, np.int32(T // size), grid=clusters * size, block=64,
                          cluster=size)
    expected = np.repeat(src.reshape(clusters, T, T), size, axis=0)
    np.testing.assert_array_equal(out.copy_to_host(), expected)


# --- PTX ----------------------------------------------------------------------------------------

SIGNATURES = [
    (where_am_i, "void(int64[:, ::1])", ["%clusterid.x", "%cluster_ctarank"]),
    (rotate_through_neighbours, "void(float32[::1], float32[::1], int32)",
     ["mapa.u64", "barrier.cluster.arrive;", "barrier.cluster.wait;"]),
    (split_barrier, "void(float64[::1], float64[::1])", ["barrier.cluster.arrive.relaxed;"]),
    (gather_by_remote_arrivals, "void(float32[:, ::1], float32[::1])",
     ["fence.mbarrier_init.release.cluster;", "mapa.shared::cluster.u32",
      "mbarrier.arrive.release.cluster.shared::cluster.b64",
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"]),
    (multicast_tile, "void(tensormap(float32, 2), float32[:, :, ::1], int32)",
     [".multicast::cluster"]),
]


@pytest.mark.parametrize("kernel, sig, words", SIGNATURES, ids=lambda k: getattr(k, "__name__", ""))
def test_ptx_assembles_for_sm90a(kernel, sig, words):
    ptx = kj.compile_ptx(kernel, sig, arch="sm_90a")
    for w in words:
        assert w in ptx, w
    assemble(ptx, "sm_90a")


# --- mistakes ------------------------------------------------------------------------------------

def test_a_cluster_that_does_not_divide_the_grid_is_a_launch_error(backend):
    out = kj.device_array(64, np.float32)
    for grid, cluster, words in ((3, 2, r"grid.x = 3 is not a multiple of cluster.x = 2"),
                                 ((4, 3), (2, 2), r"grid.y = 3 is not a multiple of cluster.y"),
                                 (16, 16, r"cluster \(16, 1, 1\) has 16 blocks; a cluster holds "
                                          r"1 to 8"),
                                 (4, 0, r"every dimension must be at least 1|cluster \(0, 1, 1\)"),
                                 (4, (1, 2, 3, 4), r"cluster must be an int or a tuple of 1 to 3")):
        with pytest.raises(kj.LaunchError, match=words) as info:
            saxpy[grid, 32, 0, 0, cluster](out, out, out, np.float32(1), np.int32(64))
        assert "'saxpy'" in str(info.value)
        assert_no_internals(info.value)
        with pytest.raises(kj.LaunchError, match=words):
            saxpy.launch(out, out, out, np.float32(1), np.int32(64), grid=grid, block=32,
                         cluster=cluster)


@kj.jit
def rank_past_the_cluster(out, r):
    cell = kj.shared.array(4, kj.int32)
    other = kj.cluster.map_shared_rank(cell, r)
    other[0] = 1
    kj.cluster.sync()
    out[0] = cell[0]


@kj.jit
def arrive_past_the_cluster(out, r):
    bar = kj.shared.array(1, kj.uint64)
    if kj.threadIdx.x == 0:
        kj.mbarrier.init(bar, 1)
    kj.cluster.sync()
    kj.mbarrier.arrive_cluster(bar, r)
    out[0] = 1


def _line_of(pyfunc, snippet: str) -> str:
    from tests.located import position_of

    filename, line, _ = position_of(pyfunc.py_func, snippet)
    return f"{filename}:{line}"


@pytest.mark.parametrize("kernel, snippet", [
    (rank_past_the_cluster, "kj.cluster.map_shared_rank("),
    (arrive_past_the_cluster, "kj.mbarrier.arrive_cluster("),
])
def test_a_rank_past_the_cluster_is_a_located_fault_on_the_cpu_backend(kernel, snippet):
    previous = set_backend(_backend("cpu"))
    try:
        out = kj.to_device(np.zeros(1, np.int32))
        bad = int(rng.integers(2, 100))
        with pytest.raises(kj.KernelError, match=rf"block rank {bad} is not in the cluster, "
                                                 r"which has 2 blocks") as info:
            kernel.launch(out, np.int32(bad), grid=4, block=32, cluster=2)
        assert _line_of(kernel, snippet) in str(info.value)
        assert_no_internals(info.value)
    finally:
        set_backend(previous)


def test_a_multicast_mask_past_the_cluster_is_a_located_fault_on_the_cpu_backend():
    previous = set_backend(_backend("cpu"))
    try:
        src = kj.to_device(rng.standard_normal((T, T)).astype(np.float32))
        out = kj.to_device(np.zeros((2, T, T), np.float32))
        with pytest.raises(kj.KernelError, match=r"block rank 2 is not in the cluster, which "
                                                 r"has 2 blocks") as info:
            multicast_bad_mask.launch(kj.TensorMap.tiled(src, (T, T)), out, grid=2, block=32,
                                      cluster=2)
        assert _line_of(multicast_bad_mask, "kj.tma.load_multicast(") in str(info.value)
    finally:
        set_backend(previous)


@kj.jit
def multicast_bad_mask(src, out):
    ring = kj.shared.array(T * T, kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    if kj.threadIdx.x == 0:
        kj.mbarrier.init(bar, 1)
        kj.mbarrier.arrive_expect_tx(bar, T * T * 4)
        if kj.cluster.block_rank() == 0:
            kj.tma.load_multicast(ring, src, 0, 0, bar, 0b111)
    kj.cluster.sync()
    out[kj.blockIdx.x, 0, 0] = ring[0]


@kj.jit
def map_a_number(out):
    x = kj.cluster.map_shared_rank(out[0], 1)
    out[0] = x


@kj.jit
def float_rank(out):
    cell = kj.shared.array(4, kj.float32)
    other = kj.cluster.map_shared_rank(cell, 1.5)
    out[0] = other[0]


@kj.jit
def float_arrive_rank(out):
    bar = kj.shared.array(1, kj.uint64)
    kj.mbarrier.arrive_cluster(bar, 0.5)


@kj.jit
def arrive_on_a_float_array(out):
    kj.mbarrier.arrive_cluster(out, 1)


@kj.jit
def float_mask(src, out):
    ring = kj.shared.array(T * T, kj.float32, alignment=128)
    bar = kj.shared.array(1, kj.uint64)
    kj.tma.load_multicast(ring, src, 0, 0, bar, 1.0)


@kj.jit
def barrier_with_an_argument(out):
    kj.cluster.sync(1)


@pytest.mark.parametrize("kernel, sig, snippet, words", [
    (map_a_number, "void(float32[::1])", "out[0], 1", "needs a shared array, got float32"),
    (float_rank, "void(float32[::1])", "1.5", "needs an integer block rank"),
    (float_arrive_rank, "void(float32[::1])", "0.5", "needs an integer block rank"),
    (arrive_on_a_float_array, "void(float32[::1])", "out, 1", "needs an mbarrier"),
    (float_mask, "void(tensormap(float32, 2), float32[::1])", "1.0)",
     "needs an integer mask of the cluster's block ranks"),
    (barrier_with_an_argument, "void(float32[::1])", "kj.cluster.sync(", "takes 0 arguments"),
])
def test_misuse_in_a_kernel_is_a_located_error(kernel, sig, snippet, words):
    err = compile_error(kernel, sig)
    assert_located(err, kernel.py_func, snippet)
    assert words in str(err)


def test_clusters_below_sm90_are_a_located_error():
    err = compile_error(rotate_through_neighbours, "void(float32[::1], float32[::1], int32)",
                        kj.UnsupportedError, arch="sm_80")
    assert_located(err, rotate_through_neighbours.py_func, "kj.cluster.block_rank()")
    assert "needs sm_90 or newer" in str(err) and "sm_80" in str(err)
