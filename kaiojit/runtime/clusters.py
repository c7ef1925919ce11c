"""Thread-block clusters on the cpu backend: the blocks of a cluster run at once.

A kernel whose host image uses what needs the other blocks of its cluster (the cluster barrier,
distributed shared memory, remote mbarrier arrivals, multicast copies: sites of kind
``cluster``, see ``kaiojit/lower/cluster_host.py``), launched with a cluster of more than one
block, runs one cluster after another; the blocks of each run together, each on a thread of its
own (:class:`kaiojit.runtime.cooperative.CpuCrew`, the runner of cooperative launches), so they
can wait for each other and read and write each other's shared memory. Each block keeps its
shared memory (a worker's buffer) while its cluster runs; the cluster's state (the barrier's
counter and the blocks' shared memory by rank) is one array the blocks' contexts point to.

Any other launch runs as before, every block a cluster of one (its context says so; the state
of each worker then holds its own shared memory alone). The cost of a cluster launch: a thread
started and joined per block, as a cooperative launch's; clusters run one at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kaiojit import target as H

CLUSTER_SITE = "cluster"  # kaiojit.lower.cluster_host.CLUSTER_SITE (not imported: the runtime
# does not load the compiler's modules)


def runs_together(host: Any) -> bool:
    """Whether a host image needs the blocks of each cluster at once."""
    return any(site.get("kind") == CLUSTER_SITE for site in host.sites)


def cluster_size(cluster: tuple[int, int, int] | None) -> int:
    return 1 if cluster is None else cluster[0] * cluster[1] * cluster[2]


def set_alone(ctx: np.ndarray, state: np.ndarray, cluster: tuple[int, int, int] | None) -> None:
    """A worker that runs its blocks on its own: the launch's cluster shape, and a state that
    holds the worker's shared memory as rank 0 (the only rank, where the shape is 1, 1, 1)."""
    ctx[H.CTX_CLUSTER_DIM:H.CTX_CLUSTER_DIM + 3] = cluster or (1, 1, 1)
    ctx[H.CTX_CLUSTER_STATE] = state.ctypes.data
    state[H.CLUSTER_SHARED] = ctx[H.CTX_SHARED]
    state[H.CLUSTER_LIVE] = 1


def cluster_blocks(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> np.ndarray:
    """The linear block index of every (cluster, rank): clusters in linear order (x fastest),
    ranks x fastest within each, as ``%cluster_ctarank`` counts them."""
    cx, cy, cz = cluster
    gx, gy, gz = grid
    qx, qy, qz = gx // cx, gy // cy, gz // cz
    c = np.arange(qx * qy * qz)
    r = np.arange(cx * cy * cz)
    x = (c % qx)[:, None] * cx + (r % cx)[None, :]
    y = (c // qx % qy)[:, None] * cy + (r // cx % cy)[None, :]
    z = (c // (qx * qy))[:, None] * cz + (r // (cx * cy))[None, :]
    return x + gx * (y + gy * z)


def run_clusters(crew: Any, run: Any, slots: int, ctxs: list[np.ndarray], config: Any,
                 state: np.ndarray, launch: np.ndarray) -> None:
    """Run every cluster of the launch, one after another, its blocks at once: the block of
    rank ``r`` on the context ``ctxs[r]`` (its shared memory set), each pointing at
    ``state``."""
    blocks = cluster_blocks(config.grid, config.cluster)
    threads = config.block[0] * config.block[1] * config.block[2]
    for r, ctx in enumerate(ctxs):
        ctx[H.CTX_CLUSTER_DIM:H.CTX_CLUSTER_DIM + 3] = config.cluster
        ctx[H.CTX_CLUSTER_STATE] = state.ctypes.data
        state[H.CLUSTER_SHARED + r] = ctx[H.CTX_SHARED]
    addresses = [ctx.ctypes.data for ctx in ctxs]
    for row in blocks.tolist():
        state[:H.CLUSTER_SHARED] = 0
        state[H.CLUSTER_LIVE] = len(row)
        calls = [(slots, ctx, b, b + 1) for ctx, b in zip(addresses, row, strict=True)]
        crew.run(run, calls, threads, launch, state.ctypes.data)
        if launch[H.LAUNCH_ERROR]:
            return


def rank_message(kernel: str, op: str, rank: int, size: int, where: str) -> str:
    """The KernelError text of a block rank outside the cluster."""
    return (f"kernel {kernel!r}: {op}(): block rank {rank} is not in the cluster, which has "
            f"{size} block{'s' if size != 1 else ''} (ranks 0 to {size - 1}), at {where}")


def stuck_message(kernel: str, op: str, size: int, where: str) -> str:
    """The KernelError text of a deadlock of a cluster's blocks (the cpu backend)."""
    return (f"kernel {kernel!r}: {op}() can never complete: every block of the cluster of "
            f"{size} blocks that has not returned is waiting, and none has made progress since "
            "(too few arrivals, fewer bytes loaded than expected, or a block that returned "
            f"before it arrived), at {where}")


__all__ = ["cluster_blocks", "cluster_size", "rank_message", "run_clusters", "runs_together",
           "set_alone", "stuck_message"]
