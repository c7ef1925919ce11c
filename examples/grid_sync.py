"""Grid-wide synchronization with ``kj.cg.this_grid().sync()``, numba's cooperative groups.

First numba-cuda's documented ``sequential_rows`` (each row depends on the previous one, so
the whole grid waits at ``g.sync()`` between rows), moved over by changing the imports; then
a one-kernel reduction: every block sums a grid-stride share of the input into its partial,
the grid synchronizes, and block 0 sums the partials. A kernel that synchronizes its grid is
launched cooperatively without being asked; ``max_cooperative_grid_blocks`` says how many
blocks can be resident at once. Runs on a GPU when one is usable, else on the cpu backend.
"""

import numpy as np

import kaiojit as kj

THREADS = 256


@kj.jit("void(int32[:, ::1])")
def sequential_rows(M):
    col = kj.grid(1)
    g = kj.cg.this_grid()

    rows = M.shape[0]
    cols = M.shape[1]

    for row in range(1, rows):
        opposite = cols - col - 1
        # Each row's elements are one greater than the opposite element in the previous row
        M[row, col] = M[row - 1, opposite] + 1
        g.sync()


@kj.jit(device=True)
def block_tree_sum(cache, value):
    """The sum of every thread's value, by a tree in shared memory (valid in thread 0)."""
    tid = kj.threadIdx.x
    cache[tid] = value
    kj.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            cache[tid] += cache[tid + step]
        kj.syncthreads()
        step //= 2
    return cache[0]


@kj.jit
def grid_sum(x, partial, out):
    """out[0] = sum(x), in one launch: block partials, a grid barrier, then block 0."""
    cache = kj.shared.array(THREADS, kj.float32)
    acc = kj.float32(0.0)
    for i in range(kj.grid(1), x.size, kj.gridsize(1)):
        acc += x[i]
    total = block_tree_sum(cache, acc)
    if kj.threadIdx.x == 0:
        partial[kj.blockIdx.x] = total

    kj.cg.this_grid().sync()  # every block's partial is written

    if kj.blockIdx.x == 0:
        kj.syncthreads()  # thread 0 has read the cache
        acc = kj.float32(0.0)
        for b in range(kj.threadIdx.x, kj.gridDim.x, THREADS):
            acc += partial[b]
        total = block_tree_sum(cache, acc)
        if kj.threadIdx.x == 0:
            out[0] = total


def main(n: int = 1 << 20, blocks: int | None = None) -> dict:
    # numba's example as its documentation launches it: 1024 x 1024, one thread a column, in
    # 32 blocks of one warp (all resident at once: the grid syncs after every row)
    M = kj.to_device(np.zeros((1024, 1024), dtype=np.int32))
    blockdim = 32
    griddim = M.shape[1] // blockdim
    sequential_rows[griddim, blockdim](M)
    rows = M.copy_to_host()
    expected = np.repeat(np.arange(1024, dtype=np.int32)[:, None], 1024, axis=1)
    assert (rows == expected).all()
    print(f"sequential_rows on the {kj.backend()} backend: row i holds i, as numba's does")

    x = np.random.default_rng().random(n, dtype=np.float32)
    limit = None
    if blocks is None:
        grid_sum.compile("void(float32[::1], float32[::1], float32[::1])")
        limit = grid_sum.max_cooperative_grid_blocks(THREADS)
        blocks = min(limit, (n + THREADS - 1) // THREADS)
    partial = kj.to_device(np.full(blocks, np.nan, np.float32))
    out = kj.to_device(np.full(1, np.nan, np.float32))
    grid_sum[blocks, THREADS](kj.to_device(x), partial, out)
    total = float(out.copy_to_host()[0])
    expect = float(x.astype(np.float64).sum())
    print(f"sum of {n} float32 in one cooperative launch of {blocks} blocks "
          f"(at most {limit} fit): {total:.3f} (float64 on the host: {expect:.3f})")
    return {"rows": rows, "expected_rows": expected, "sum": total, "expected_sum": expect,
            "blocks": blocks}


if __name__ == "__main__":
    main()
