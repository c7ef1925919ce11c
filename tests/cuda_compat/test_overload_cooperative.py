"""numba's compiled-kernel objects (``kernel.overloads[argtypes]``) tell whether the kernel
launches cooperatively (``.cooperative``: it synchronizes its grid) and how many blocks such a
launch may have (``.max_cooperative_grid_blocks(blockdim)``), as numba's do (issue 28: both
were missing)."""

import numpy as np

from kaiojit import cuda
from kaiojit.cuda import int32

rng = np.random.default_rng()


def rows_in_turn(m):
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    for row in range(1, m.shape[0]):
        m[row, col] = m[row - 1, m.shape[1] - col - 1] + 1
        g.sync()


def no_grid_sync(a):
    a[cuda.grid(1)] = cuda.grid(1)


def test_overload_knows_it_is_cooperative(kj_backend):
    sig = (int32[:, ::1],)
    synced = cuda.jit(sig)(rows_in_turn)
    plain = cuda.jit((int32[::1],))(no_grid_sync)
    assert synced.overloads[sig].cooperative is True
    assert plain.overloads[(int32[::1],)].cooperative is False
    # the wrapped kernel's own attributes still read through
    assert synced.overloads[sig].signature.args == sig


def test_max_cooperative_grid_blocks_of_an_overload(kj_backend):
    sig = (int32[:, ::1],)
    kernel = cuda.jit(sig)(rows_in_turn)
    overload = kernel.overloads[sig]
    blocks = overload.max_cooperative_grid_blocks(256)
    assert blocks > 0
    assert blocks == overload.max_cooperative_grid_blocks((16, 16))
    assert blocks == overload.max_cooperative_grid_blocks((16, 4, 4))
    assert blocks == kernel.max_cooperative_grid_blocks(256)
    # a launch of that many rows' worth of blocks synchronizes as numba's test expects
    block = 32
    grid = int(rng.integers(2, 5))
    rows = int(rng.integers(3, 9))
    assert grid <= overload.max_cooperative_grid_blocks(block)
    m = np.full((rows, grid * block), -7, np.int32)
    m[0] = rng.integers(0, 50, grid * block)
    d = cuda.to_device(m)
    kernel[grid, block](d)
    m = d.copy_to_host()
    want = m[0].copy()
    for r in range(1, rows):
        want = want[::-1] + 1
        np.testing.assert_array_equal(m[r], want)
