"""A ring of shared-memory stages between a producer and its consumers, in the kernel dialect:
the full/empty mbarrier pairs and phase bits of CuTe DSL's ``PipelineTmaAsync`` and of
Gluon's tutorials, as plain ``@kj.jit(device=True)`` functions a user could have written.

A ring of ``S`` stages is two ``kj.shared.array(S, kj.uint64)`` arrays of mbarriers: ``full``
(the producer's data landed: its arrival plus, for TMA, the transaction bytes) and ``empty``
(the consumers are done with the stage). Both sides count the same position ``it`` (the
``it``-th fill of the ring): stage ``it % S`` in its round ``it // S``, whose parity is the
phase to wait for. A fresh barrier counts as having completed the phase before its first,
so the producer's first round of ``wait_empty`` passes at once::

    full = kj.shared.array(STAGES, kj.uint64)
    empty = kj.shared.array(STAGES, kj.uint64)
    if t == 0:
        pipeline.init(full, empty, 1, CONSUMERS)
    kj.syncthreads()
    ...
    # producer                                 # consumers
    pipeline.wait_empty(empty, it)             pipeline.wait_full(full, it)
    kj.mbarrier.arrive_expect_tx(full[s:], nb) ... read stage s ...
    kj.tma.load(..., full[s:])                 pipeline.release(empty, it)
"""

from __future__ import annotations

import kaiojit as kj


@kj.jit(device=True)
def init(full, empty, producers, consumers):
    """One thread: every stage's barriers, ``full`` for ``producers`` arrivals, ``empty`` for
    ``consumers``; then the fence that shows them to the copy engine (TMA)."""
    for s in range(full.shape[0]):
        kj.mbarrier.init(full[s:], producers)
        kj.mbarrier.init(empty[s:], consumers)
    kj.fence_proxy_async()


@kj.jit(device=True)
def stage(full, it):
    """The stage of the ``it``-th fill."""
    return it % full.shape[0]


@kj.jit(device=True)
def wait_full(full, it):
    """Consumers: wait until the ``it``-th fill has landed."""
    n = full.shape[0]
    kj.mbarrier.wait(full[it % n:], (it // n) % 2)


@kj.jit(device=True)
def wait_empty(empty, it):
    """Producer: wait until the stage of the ``it``-th fill is free (the consumers released
    the fill ``S`` before it; the first round passes at once)."""
    n = empty.shape[0]
    kj.mbarrier.wait(empty[it % n:], (it // n) % 2 ^ 1)


@kj.jit(device=True)
def release(empty, it):
    """A consumer (one arrival each, as ``init`` counted them): done with the ``it``-th fill."""
    n = empty.shape[0]
    kj.mbarrier.arrive(empty[it % n:])


__all__ = ["init", "release", "stage", "wait_empty", "wait_full"]
