"""The autotuned transpose of benchmarks/autotune.py, in a module of its own so that the
benchmark and its child processes define it from the same file (a stored choice is keyed on
the kernel's code and file)."""

from __future__ import annotations

import kaiojit as kj

TILE = 32  # a warp's width: the columns one pass of a block covers
BIG = 64  # the largest tile: BIG x BIG elements a block


@kj.jit
def transpose_tiled(out, a, SIDE: kj.constexpr, ROWS: kj.constexpr):
    # benchmarks/bandwidth.py's tiled transpose with its tile side and block height as
    # constexpr parameters (a block of 32 x ROWS threads moves a SIDE x SIDE tile): each
    # (SIDE, ROWS) is compiled on its own, the shared tile sized and the loops unrolled
    tile = kj.shared.array((SIDE, SIDE + 1), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    bx, by = kj.blockIdx.x * SIDE, kj.blockIdx.y * SIDE
    n0, n1 = a.shape
    full = by + SIDE <= n0 and bx + SIDE <= n1
    if full:
        for k in range(0, SIDE, ROWS):
            for c in range(0, SIDE, TILE):
                tile[ty + k, tx + c] = a[by + ty + k, bx + tx + c]
    else:
        for k in range(0, SIDE, ROWS):
            for c in range(0, SIDE, TILE):
                if by + ty + k < n0 and bx + tx + c < n1:
                    tile[ty + k, tx + c] = a[by + ty + k, bx + tx + c]
    kj.syncthreads()
    if full:
        for k in range(0, SIDE, ROWS):
            for c in range(0, SIDE, TILE):
                out[bx + ty + k, by + tx + c] = tile[tx + c, ty + k]
    else:
        for k in range(0, SIDE, ROWS):
            for c in range(0, SIDE, TILE):
                if bx + ty + k < n1 and by + tx + c < n0:
                    out[bx + ty + k, by + tx + c] = tile[tx + c, ty + k]


def tiles(args: dict) -> tuple[int, int]:
    """The grid of a config: one block per SIDE x SIDE tile (SIDE is the config's)."""
    n0, n1 = args["a"].shape
    side = args["SIDE"]
    return (n1 + side - 1) // side, (n0 + side - 1) // side


ROW_CHOICES = (2, 4, 8, 16)
CONFIGS = [(side, rows) for side in (TILE, BIG) for rows in ROW_CHOICES if rows <= side]
transpose_tuned = kj.autotune(
    configs=[kj.Config(block=(TILE, rows), constants={"SIDE": side, "ROWS": rows})
             for side, rows in CONFIGS],
    key=["a"], grid=tiles, outputs=("out",),
)(transpose_tiled)
