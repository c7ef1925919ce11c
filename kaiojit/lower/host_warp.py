"""Warp collectives of the cpu backend's block-synchronous lowering, in two phases: every
active thread publishes some i64 words into a per-thread exchange buffer, then every active
thread computes its result from the words its warp published (``kj.mma``, ``kj.ldmatrix`` and
wgmma's register-A form are written on these)."""

from __future__ import annotations

from llvmlite import ir

from .llvmtypes import I64


def _c64(v: int):
    return ir.Constant(I64, v)


def warp_exchange(bl, target, count: int, publish, compute) -> None:
    """A warp collective on the host: every active thread stores ``publish()`` (``count`` i64
    words) into a per-thread buffer, then every active thread runs ``compute(buffer, thread)``
    and, where ``target`` is a variable, assigns the result to it (see :func:`warp_word`)."""
    b = bl.builder
    buf = bl.per_thread(I64, count)

    def put(t):
        for k, v in enumerate(publish()):
            b.store(v, b.gep(buf, [b.add(b.mul(t, _c64(count)), _c64(k))], source_etype=I64))
    bl.thread_loop(put)
    if target is not None:
        bl.thread_loop(lambda t: b.store(compute(buf, t), bl.vars[target]))
    else:
        bl.thread_loop(lambda t: compute(buf, t))


def warp_word(b: ir.IRBuilder, buf, t, n, count: int):
    """``(lane, word)``: thread ``t``'s lane, and ``word(src_lane, k)``, which loads word ``k``
    that lane ``src_lane`` (i64) of ``t``'s warp published (its own, past the block's end)."""
    lane = b.and_(t, _c64(31))
    base = b.sub(t, lane)

    def word(src_lane, k: int):
        src = b.add(base, src_lane)
        src = b.select(b.icmp_unsigned("<", src, n), src, t)
        return b.load(b.gep(buf, [b.add(b.mul(src, _c64(count)), _c64(k))], source_etype=I64),
                      typ=I64)
    return lane, word


__all__ = ["warp_exchange", "warp_word"]
