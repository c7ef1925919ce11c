"""The autotuned transpose of benchmarks/autotune.py, in a module of its own so that the
benchmark and its child processes define it from the same file (a stored choice is keyed on
the kernel's code and file)."""

from __future__ import annotations

import kaiojit as kj

TILE = 32  # a warp's width: the columns one pass of a block covers
BIG = 64  # the tile: BIG x BIG elements a block
BIG_PAD = BIG + 1


@kj.jit
def transpose64_rows(out, a, ROWS):
    # benchmarks/bandwidth.py's 64 x 64 transpose with its block height as a parameter
    # (a block of 32 x ROWS threads); ROWS is the autotuned constant
    tile = kj.shared.array((BIG, BIG_PAD), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    bx, by = kj.blockIdx.x * BIG, kj.blockIdx.y * BIG
    n0, n1 = a.shape
    full = by + BIG <= n0 and bx + BIG <= n1
    if full:
        for k in range(0, BIG, ROWS):
            for c in range(0, BIG, TILE):
                tile[ty + k, tx + c] = a[by + ty + k, bx + tx + c]
    else:
        for k in range(0, BIG, ROWS):
            for c in range(0, BIG, TILE):
                if by + ty + k < n0 and bx + tx + c < n1:
                    tile[ty + k, tx + c] = a[by + ty + k, bx + tx + c]
    kj.syncthreads()
    if full:
        for k in range(0, BIG, ROWS):
            for c in range(0, BIG, TILE):
                out[bx + ty + k, by + tx + c] = tile[tx + c, ty + k]
    else:
        for k in range(0, BIG, ROWS):
            for c in range(0, BIG, TILE):
                if bx + ty + k < n1 and by + tx + c < n0:
                    out[bx + ty + k, by + tx + c] = tile[tx + c, ty + k]


def tiles(args: dict) -> tuple[int, int]:
    n0, n1 = args["a"].shape
    return (n1 + BIG - 1) // BIG, (n0 + BIG - 1) // BIG


ROW_CHOICES = (2, 4, 8, 16)
transpose_tuned = kj.autotune(
    configs=[kj.Config(block=(TILE, rows), constants={"ROWS": rows}) for rows in ROW_CHOICES],
    key=["a"], grid=tiles, outputs=("out",),
)(transpose64_rows)
