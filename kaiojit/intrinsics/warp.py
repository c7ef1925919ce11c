"""Warp collectives: shuffles (``kj.shfl_sync``, ``shfl_up_sync``, ``shfl_down_sync``,
``shfl_xor_sync``), votes (``kj.all_sync``, ``any_sync``, ``ballot_sync``),
``kj.activemask()`` and numba's ``cuda.match_any_sync`` / ``match_all_sync``.

On the GPU they are the NVVM shuffle and vote intrinsics (64-bit values shuffle as two halves).
On the host each is a split point of the block-synchronous lowering: the lanes publish their
operands, then each reads what the collective gives it (``BlockLowering.shuffle`` and
``BlockLowering.vote``, with the lane arithmetic and the reduction declared here).
"""

from __future__ import annotations

from llvmlite import ir

from .. import language as L
from .. import types as T
from .api import (I1, I32, I64, Expr, Intrinsic, Kind, Operands, Same, call_args, counted_loop,
                  inline_asm, register, scalar_arg)

SHUFFLE_DTYPES = (T.int32, T.uint32, T.int64, T.uint64, T.float32, T.float64)
SHUFFLED = Kind("a 32- or 64-bit integer or float", lambda t: t in SHUFFLE_DTYPES)


def _shuffle_typing(kind: str):
    user_name = "kj.shfl_sync" if kind == "idx" else f"kj.shfl_{kind}_sync"

    def typing(typer, node):
        mask, value, lane = call_args(typer, node, 3, 3, user_name)
        t = scalar_arg(typer, value, node.args[1], f"{user_name}()")
        if value.weak:
            value = typer.coerce(value, t, node)
        if t not in SHUFFLE_DTYPES:
            if t.is_int or t.is_bool:
                value, t = typer.coerce(value, T.int32 if t.kind in "ib" else T.uint32, node), \
                    T.int32 if t.kind in "ib" else T.uint32
            else:
                typer.error(f"{user_name}() cannot shuffle {t}: use 32- or 64-bit "
                            "integers or floats", node.args[1])
        return typer.intrinsic(
            f"warp.shfl_{kind}", t,
            (typer.coerce(mask, T.uint32, node), value, typer.coerce(lane, T.int32, node)), node)
    return typing


def _mask_arg(typer, mask: Expr, node, name: str) -> Expr:
    """A warp mask: an integer (a float or bool mask is numba's TypingError too)."""
    t = scalar_arg(typer, mask, node, f"{name}()")
    if not t.is_int:
        typer.error(f"{name}(): Mask type must be an integer, got {t}", node)
    return typer.coerce(mask, T.uint32, node)


def _vote_typing(kind: str):
    def typing(typer, node):
        name = f"kj.{'eq' if kind == 'uni' else kind}_sync"
        mask, pred = call_args(typer, node, 2, 2, name)
        mask = _mask_arg(typer, mask, node.args[0], name)
        t = scalar_arg(typer, pred, node.args[1], f"{name}()")
        if not (t.is_int or t.is_bool):
            typer.error(f"{name}(): Predicate must be an integer or boolean, got {t}",
                        node.args[1])
        rt = T.uint32 if kind == "ballot" else T.bool_
        operands = (mask, typer.truth(pred, node.args[1]))
        return typer.intrinsic(f"warp.{kind}", rt, operands, node)
    return typing


def _match_typing(kind: str):
    """``match_any_sync(mask, value)``: the lanes of ``mask`` whose value equals this lane's;
    ``match_all_sync(mask, value)``: ``(mask, True)`` if every lane of ``mask`` holds one value,
    else ``(0, False)``. Values are compared bit for bit (32- or 64-bit integers or floats)."""
    name = f"cuda.match_{kind}_sync"

    def typing(typer, node):
        mask, value = call_args(typer, node, 2, 2, name)
        mask = _mask_arg(typer, mask, node.args[0], name)
        t = scalar_arg(typer, value, node.args[1], f"{name}()")
        if t not in SHUFFLE_DTYPES:
            if not (t.is_int or t.is_bool):
                typer.error(f"{name}() compares 32- or 64-bit integers or floats, got {t}",
                            node.args[1])
            t = T.int32 if t.kind in "ib" else T.uint32
        value = typer.coerce(value, t, node)
        if kind == "any":
            return typer.intrinsic("warp.match_any", T.uint32, (mask, value), node)
        found = typer.intrinsic("warp.match_all", T.uint32, (mask, value), node)
        again = typer.intrinsic("warp.match_all", T.uint32, (mask, value), node)
        pred = Expr("cmp", T.bool_, (again, Expr("const", T.uint32, (), attr=0)), attr="!=",
                    loc=typer.loc(node))
        return Expr("tuple", T.TupleType((T.uint32, T.bool_)), (found, pred),
                    loc=typer.loc(node))
    return typing


def _activemask_typing(typer, node):
    call_args(typer, node, 0, 0, "kj.activemask")
    return typer.intrinsic("warp.activemask", T.uint32, (), node)


# --- the GPU -------------------------------------------------------------------------------------

def _nvptx_shuffle(mode: str):
    # the c operand packs the clamp (lanes 0..31 for idx/down/bfly, 0 for up) and segment mask
    clamp = 0 if mode == "up" else 0x1F

    def lower(fl, e: Expr):
        b = fl.builder
        mask, value, lane = (fl.expr(a) for a in e.args)
        c = ir.Constant(I32, clamp)
        vty = value.type
        if isinstance(vty, ir.FloatType):
            fn = fl.mod.declare(f"llvm.nvvm.shfl.sync.{mode}.f32", vty, [I32, vty, I32, I32])
            return b.call(fn, [mask, value, lane, c])
        fn = fl.mod.declare(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
        if vty == I32:
            return b.call(fn, [mask, value, lane, c])
        # 64-bit values: shuffle both halves
        bits = b.bitcast(value, I64) if isinstance(vty, ir.DoubleType) else value
        lo = b.trunc(bits, I32)
        hi = b.trunc(b.lshr(bits, ir.Constant(I64, 32)), I32)
        lo = b.call(fn, [mask, lo, lane, c])
        hi = b.call(fn, [mask, hi, lane, c])
        out = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        return b.bitcast(out, vty) if isinstance(vty, ir.DoubleType) else out
    return lower


def _nvptx_vote(kind: str):
    def lower(fl, e: Expr):
        mask, pred = (fl.expr(a) for a in e.args)
        if kind == "ballot":
            fn = fl.mod.declare("llvm.nvvm.vote.ballot.sync", I32, [I32, I1])
        else:
            fn = fl.mod.declare(f"llvm.nvvm.vote.{kind}.sync", I1, [I32, I1])
        return fl.builder.call(fn, [mask, pred])
    return lower


def _nvptx_match(kind: str):
    def lower(fl, e: Expr):
        b = fl.builder
        mask, value = (fl.expr(a) for a in e.args)
        if isinstance(value.type, ir.FloatType):
            value = b.bitcast(value, I32)
        elif isinstance(value.type, ir.DoubleType):
            value = b.bitcast(value, I64)
        width = value.type.width
        if kind == "any":
            fn = fl.mod.declare(f"llvm.nvvm.match.any.sync.i{width}", I32, [I32, value.type])
            return b.call(fn, [mask, value])
        fn = fl.mod.declare(f"llvm.nvvm.match.all.sync.i{width}p",
                            ir.LiteralStructType([I32, I1]), [I32, value.type])
        return b.extract_value(b.call(fn, [mask, value]), 0)
    return lower


def _host_match(kind: str):
    """Every lane publishes its value's bits and its mask; each then gathers the lanes of its
    mask (active, inside the block) whose bits equal its own."""
    def lower(bl, target, e: Expr):
        b = bl.builder
        mask_e, value_e = e.args

        def publish(t):
            v = bl.expr(value_e)
            if isinstance(v.type, (ir.FloatType, ir.DoubleType)):
                v = b.bitcast(v, ir.IntType(32 if isinstance(v.type, ir.FloatType) else 64))
            b.store(b.zext(v, I64) if v.type != I64 else v, bl.at(bl.xval, t, I64))
            b.store(bl.expr(mask_e), bl.at(bl.xarg, t, I32))
        bl.thread_loop(publish)
        same, members = bl.alloca(I32, name="match.same"), bl.alloca(I32, name="match.members")
        results = bl.per_thread(I32)

        def gather(t):
            zero = ir.Constant(I32, 0)
            b.store(zero, same)
            b.store(zero, members)
            base = b.sub(t, b.and_(t, ir.Constant(I64, 31)))
            mask, mine = bl.load_at(bl.xarg, t, I32), bl.load_at(bl.xval, t, I64)
            with counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, 32)) as i:
                src = b.add(base, i)
                with b.if_then(b.icmp_unsigned("<", src, bl.n)):
                    bit = b.shl(ir.Constant(I32, 1), b.trunc(i, I32))
                    take = b.and_(bl.active(src), b.icmp_unsigned("!=", b.and_(mask, bit), zero))
                    with b.if_then(take):
                        b.store(b.or_(b.load(members, typ=I32), bit), members)
                        equal = b.icmp_unsigned("==", bl.load_at(bl.xval, src, I64), mine)
                        b.store(b.or_(b.load(same, typ=I32), b.select(equal, bit, zero)), same)
            got, memb = b.load(same, typ=I32), b.load(members, typ=I32)
            if kind == "all":
                got = b.select(b.icmp_unsigned("==", got, memb), memb, zero)
            b.store(got, bl.at(results, t, I32))
        bl.thread_loop(gather)
        bl.assign_each(target, lambda: bl.load_at(results, bl.t, I32))
    return lower


def _nvptx_activemask(fl, e: Expr):
    return inline_asm(fl, I32, "activemask.b32 $0;", "=r", [], convergent=True)


# --- the host: which lane a shuffle reads, what a vote gives -------------------------------------

def _lanes_idx(b, lane, operand):
    return operand, ir.Constant(I1, 1)


def _lanes_up(b, lane, operand):
    j = b.sub(lane, operand)
    return j, b.icmp_signed(">=", j, ir.Constant(I64, 0))


def _lanes_down(b, lane, operand):
    j = b.add(lane, operand)
    return j, b.icmp_signed("<=", j, ir.Constant(I64, 31))


def _lanes_xor(b, lane, operand):
    return b.xor(lane, operand), ir.Constant(I1, 1)


def _host_shuffle(source):
    def lower(bl, target, e: Expr):
        bl.shuffle(target, e, source)
    return lower


def _host_vote(combine):
    def lower(bl, target, e: Expr):
        bl.vote(target, e, combine)
    return lower


_VOTES = {
    "all": lambda b, bits, members: b.zext(b.icmp_unsigned("==", bits, members), I32),
    "any": lambda b, bits, members: b.zext(b.icmp_unsigned("!=", bits, ir.Constant(I32, 0)), I32),
    "ballot": lambda b, bits, members: bits,
    # numba's eq_sync (PTX's vote.uni): the predicate is the same in every member lane
    "uni": lambda b, bits, members: b.zext(b.or_(
        b.icmp_unsigned("==", bits, members), b.icmp_unsigned("==", bits, ir.Constant(I32, 0))),
        I32),
}
_VOTE_STUBS = {"all": L.all_sync, "any": L.any_sync, "ballot": L.ballot_sync, "uni": L.eq_sync}

# --- declarations --------------------------------------------------------------------------------

for _kind, _mode, _lanes, _stub in (("idx", "idx", _lanes_idx, L.shfl_sync),
                                    ("up", "up", _lanes_up, L.shfl_up_sync),
                                    ("down", "down", _lanes_down, L.shfl_down_sync),
                                    ("xor", "bfly", _lanes_xor, L.shfl_xor_sync)):
    register(Intrinsic(
        name=f"warp.shfl_{_kind}", operands=Operands(T.uint32, SHUFFLED, T.int32, result=Same(1)),
        lowering={"nvptx": _nvptx_shuffle(_mode), "host": _host_shuffle(_lanes)},
        calls={_stub: _shuffle_typing(_kind)}, warp=True, convergent=True))
for _kind, _combine in _VOTES.items():
    register(Intrinsic(
        name=f"warp.{_kind}",
        operands=Operands(T.uint32, T.bool_, result=T.uint32 if _kind == "ballot" else T.bool_),
        lowering={"nvptx": _nvptx_vote(_kind), "host": _host_vote(_combine)},
        calls={_VOTE_STUBS[_kind]: _vote_typing(_kind)}, warp=True, convergent=True))
for _kind, _stub in (("any", L.match_any_sync), ("all", L.match_all_sync)):
    register(Intrinsic(
        name=f"warp.match_{_kind}", operands=Operands(T.uint32, SHUFFLED, result=T.uint32),
        lowering={"nvptx": _nvptx_match(_kind), "host": _host_match(_kind)},
        calls={_stub: _match_typing(_kind)}, warp=True, convergent=True, min_arch="sm_70"))
# which lanes are active is a warp-level fact: the cpu backend must keep the warp in step
register(Intrinsic(
    name="warp.activemask", operands=Operands(result=T.uint32),
    lowering={"nvptx": _nvptx_activemask,
              "host": _host_vote(lambda b, bits, members: members)},
    calls={L.activemask: _activemask_typing}, warp=True, convergent=True))
