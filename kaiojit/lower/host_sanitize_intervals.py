"""The checked variant's quiet shared reads: a read of shared memory that no write of shared
memory can share a barrier interval with needs no racecheck record, only its initcheck.

Two accesses race only between the same two block barriers. Where, on every path through
the function, every shared-memory write lies behind a ``syncthreads`` before a read and
ahead of one after it (a tiled matmul's inner loop reads its tiles between the barrier after
loading them and the barrier before the next load), no write can race with the read and no
later write can find it: the read is recorded nowhere, and its shadow is only asked whether
some thread of the block wrote the element (initcheck).

The analysis runs over the kernel's structured statements twice, forwards ("may a write
have happened since the last barrier?") and backwards ("may a write happen before the next
one?"). A write is a store to a shared array or to an array of unknown space, any intrinsic
that writes memory, or a call of a device function that accesses arrays. Only a block-level
barrier ends an interval (``syncwarp`` does not: it orders one warp). A loop body is walked
twice, so that its back edge is seen; ``break``, ``continue`` and ``return`` make everything
in their loop (or function) count as sharing an interval with a write that the loop has.
"""

from __future__ import annotations

from .. import kir
from ..kir import Expr
from ..kir.intrinsics import lookup

SHARED, UNKNOWN = "shared", "unknown"  # host_sanitize's space names
WRITTEN = (SHARED, UNKNOWN, "cluster shared")  # stores to these count as shared writes


def quiet_shared_reads(kfunc: kir.KFunction, spaces: dict[str, str], space_of) -> set[int]:
    """The ids of the shared-memory loads of ``kfunc`` that share no barrier interval with a
    write of shared memory (``spaces``/``space_of``: host_sanitize's memory spaces)."""
    if not kfunc.is_kernel:
        return set()
    walk = _Walk(spaces, space_of)
    walk.block(kfunc.body, False, forward=True)
    walk.block(kfunc.body, False, forward=False)
    return {i for i, (load, dirty) in walk.reads.items() if not dirty}


class _Walk:
    def __init__(self, spaces, space_of):
        self.spaces, self.space_of = spaces, space_of
        self.reads: dict[int, tuple[Expr, bool]] = {}  # id -> (load, may share with a write)

    # --- statements ------------------------------------------------------------------------

    def block(self, body: list, dirty: bool, forward: bool) -> bool:
        for s in (body if forward else reversed(body)):
            dirty = self.stmt(s, dirty, forward)
        return dirty

    def stmt(self, s, dirty: bool, forward: bool) -> bool:
        if isinstance(s, kir.If):
            if forward:
                self.see(s.cond, dirty)
            a = self.block(s.body, dirty, forward)
            b = self.block(s.orelse, dirty, forward)
            if not forward:  # the condition comes before either branch
                self.see(s.cond, a or b or dirty)
            return a or b or self.writes(s.cond)
        if isinstance(s, (kir.While, kir.ForRange)):
            heads = (s.cond,) if isinstance(s, kir.While) else (s.start, s.stop, s.step)
            inner = dirty or any(self.writes(e) for e in heads)
            if _escapes(s.body):  # break/continue/return: the loop as one interval
                inner = inner or _has_write(self, s.body)
            for _ in range(2):  # twice: the back edge brings the body's end to its start
                for e in heads:
                    self.see(e, inner)
                out = self.block(s.body, inner, forward)
                inner = inner or out
            return inner
        if isinstance(s, (kir.Break, kir.Continue, kir.Return)):
            for e in kir.stmt_exprs(s):
                self.see(e, dirty)
            return dirty
        exprs = kir.stmt_exprs(s)
        writes = any(self.writes(e) for e in exprs) or (
            isinstance(s, kir.Store) and self.space_of(s.array, self.spaces) in WRITTEN)
        for e in exprs:  # reads of a statement that also writes share its interval
            self.see(e, dirty or writes)
        if any(self.barrier(e) for e in exprs):
            return False
        return dirty or writes

    # --- expressions -------------------------------------------------------------------------

    def see(self, top: Expr, dirty: bool) -> None:
        for e in kir.walk_expr(top):
            if e.op == "load" and self.space_of(e.args[0], self.spaces) == SHARED:
                _, before = self.reads.get(id(e), (e, False))
                self.reads[id(e)] = (e, before or dirty)

    def writes(self, top: Expr) -> bool:
        for e in kir.walk_expr(top):
            if e.op == "intrinsic" and lookup(e.attr).writes:
                return True
            if e.op == "call" and _touches_arrays(e.attr):
                return True
        return False

    @staticmethod
    def barrier(top: Expr) -> bool:
        return top.op == "intrinsic" and lookup(top.attr).barrier


def _escapes(body: list) -> bool:
    return any(isinstance(s, (kir.Break, kir.Continue, kir.Return)) for s in kir.walk_stmts(body))


def _has_write(walk: _Walk, body: list) -> bool:
    for s in kir.walk_stmts(body):
        if isinstance(s, kir.Store) and walk.space_of(s.array, walk.spaces) in WRITTEN:
            return True
        if any(walk.writes(e) for e in kir.stmt_exprs(s)):
            return True
    return False


def _touches_arrays(f: kir.KFunction) -> bool:
    for g in kir.walk_functions(f):
        if any(isinstance(s, kir.Store) for s in kir.walk_stmts(g.body)):
            return True
        if any(e.op == "load" or (e.op == "intrinsic" and lookup(e.attr).writes)
               for e in kir.function_exprs(g)):
            return True
    return False


__all__ = ["quiet_shared_reads"]
