"""The mbarrier's operations on the host: native code the cpu backend's kernels call for
``kj.mbarrier`` (and the tile loads of kaiojit/tma_host.py, to complete their bytes).

The mbarrier is 8 bytes of shared memory, on the host laid out as: pending arrivals (bits
0-19), expected arrivals (20-39), the transaction count (40-62, two's complement) and the
phase parity (bit 63). A phase completes when no arrival and no transaction is pending; the
parity flips and the pending arrivals are reset. A block's threads do not run concurrently on
the host, but the blocks of a cluster do and reach each other's barriers (a remote arrive, a
multicast copy), so every operation is atomic: a compare-and-swap of the word.
"""

from __future__ import annotations

from llvmlite import ir

I32, I64 = ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()

SYMBOL_MBARRIER_INIT = "kaiojit_mbarrier_init"
SYMBOL_MBARRIER_ARRIVE = "kaiojit_mbarrier_arrive"
SYMBOL_MBARRIER_ARRIVE_EXPECT_TX = "kaiojit_mbarrier_arrive_expect_tx"
SYMBOL_MBARRIER_EXPECT_TX = "kaiojit_mbarrier_expect_tx"
SYMBOL_MBARRIER_COMPLETE_TX = "kaiojit_mbarrier_complete_tx"
SYMBOL_MBARRIER_TRY_WAIT_PARITY = "kaiojit_mbarrier_try_wait_parity"

# the word's fields (see the module docstring)
_PENDING_BITS, _EXPECTED_SHIFT, _TX_SHIFT, _TX_BITS, _PHASE_SHIFT = 20, 20, 40, 23, 63
_COUNT_MASK = (1 << _PENDING_BITS) - 1
_TX_MASK = (1 << _TX_BITS) - 1


def const(value: int, ty: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(ty, value)


def define_mbarrier(mod: ir.Module) -> dict[str, ir.Function]:
    """The mbarrier operations; returns them by symbol name."""
    count_mask = const(_COUNT_MASK)
    tx_field = const(_TX_MASK << _TX_SHIFT)

    def settle(b: ir.IRBuilder, word: ir.Value) -> ir.Value:
        """``word``, or the next phase's word when nothing is pending any more."""
        idle = b.icmp_unsigned("==", b.and_(word, b.or_(count_mask, tx_field)), const(0))
        expected = b.and_(b.lshr(word, const(_EXPECTED_SHIFT)), count_mask)
        flipped = b.xor(word, const(1 << _PHASE_SHIFT))
        return b.select(idle, b.or_(flipped, expected), word)

    def add_tx(b: ir.IRBuilder, word: ir.Value, delta: ir.Value) -> ir.Value:
        tx = b.add(b.lshr(word, const(_TX_SHIFT)), delta)
        tx = b.shl(b.and_(tx, const(_TX_MASK)), const(_TX_SHIFT))
        return b.or_(b.and_(word, b.not_(tx_field)), tx)

    def define(name: str, ret: ir.Type, params: list[ir.Type]):
        fn = ir.Function(mod, ir.FunctionType(ret, params), name)
        fn.attributes.add("nounwind")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    fns = {}
    fn, b = define(SYMBOL_MBARRIER_INIT, ir.VoidType(), [PTR, I32])
    count = b.and_(b.zext(fn.args[1], I64), count_mask)
    b.atomic_rmw("xchg", fn.args[0], b.or_(count, b.shl(count, const(_EXPECTED_SHIFT))),
                 "seq_cst")
    b.ret_void()
    fns[fn.name] = fn

    for name, expect in ((SYMBOL_MBARRIER_ARRIVE, False),
                         (SYMBOL_MBARRIER_ARRIVE_EXPECT_TX, True)):
        fn, b = define(name, I64, [PTR, I32] if expect else [PTR])

        def arrive(word, b=b, fn=fn, expect=expect):
            if expect:
                word = add_tx(b, word, b.zext(fn.args[1], I64))
            return settle(b, b.sub(word, const(1)))
        word = atomic_update(b, fn.args[0], arrive)
        b.ret(b.lshr(word, const(_PHASE_SHIFT)))  # the parity of the phase arrived on
        fns[fn.name] = fn

    for name, sign in ((SYMBOL_MBARRIER_EXPECT_TX, 1), (SYMBOL_MBARRIER_COMPLETE_TX, -1)):
        fn, b = define(name, ir.VoidType(), [PTR, I32])
        delta = b.zext(fn.args[1], I64)
        delta = delta if sign > 0 else b.neg(delta)
        atomic_update(b, fn.args[0],
                      lambda word, b=b, delta=delta: settle(b, add_tx(b, word, delta)))
        b.ret_void()
        fns[fn.name] = fn

    fn, b = define(SYMBOL_MBARRIER_TRY_WAIT_PARITY, I32, [PTR, I32])
    phase = b.lshr(b.load_atomic(fn.args[0], "seq_cst", 8, typ=I64), const(_PHASE_SHIFT))
    parity = b.zext(b.and_(fn.args[1], const(1, I32)), I64)
    # the phase of that parity has completed once the current phase has the other parity
    b.ret(b.zext(b.icmp_unsigned("!=", phase, parity), I32))
    fns[fn.name] = fn
    return fns


def atomic_update(b: ir.IRBuilder, ptr: ir.Value, change, ty: ir.IntType = I64) -> ir.Value:
    """Replace the word at ``ptr`` by ``change(word)`` atomically (a compare-and-swap loop:
    the blocks of a cluster run on threads of their own and arrive on each other's barriers);
    returns the word before."""
    before = b.block
    loop = b.append_basic_block("update")
    done = b.append_basic_block("updated")
    first = b.load_atomic(ptr, "seq_cst", ty.width // 8, typ=ty)
    b.branch(loop)
    b.position_at_end(loop)
    word = b.phi(ty)
    word.add_incoming(first, before)
    pair = b.cmpxchg(ptr, word, change(word), "seq_cst", "seq_cst")
    word.add_incoming(b.extract_value(pair, 0), loop)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    return word


__all__ = ["I32", "I64", "PTR", "SYMBOL_MBARRIER_ARRIVE", "SYMBOL_MBARRIER_ARRIVE_EXPECT_TX",
           "SYMBOL_MBARRIER_COMPLETE_TX", "SYMBOL_MBARRIER_EXPECT_TX", "SYMBOL_MBARRIER_INIT",
           "SYMBOL_MBARRIER_TRY_WAIT_PARITY", "atomic_update", "const", "define_mbarrier"]
