"""The bulk tensor copy engine (TMA) and its mbarriers, in kernels.

* ``kj.mbarrier.init(bar, count)``, ``arrive(bar) -> uint64`` (a token: the phase's parity),
  ``arrive_expect_tx(bar, nbytes) -> uint64``, ``expect_tx(bar, nbytes)``,
  ``try_wait_parity(bar, parity) -> bool``, ``wait(bar, parity)``. A barrier is element 0 of a
  ``uint64`` array in shared memory (``kj.shared.array(1, kj.uint64)``; a ring of them: one
  array and slices, ``bars[s:]``).
* ``kj.tma.load(dst, tmap, c..., bar)``: the box of ``tmap`` at the coordinates (the array's
  order, as ``box`` and ``shape``) into the shared array ``dst``; its bytes complete on ``bar``.
  ``kj.tma.store(tmap, c..., src)``: the box in shared ``src`` to the tensor, in the current
  bulk group; ``kj.tma.reduce_add(tmap, c..., src)``: the box added to the tensor, element by
  element, each add atomic (float32, float16, bfloat16, int32, uint32, uint64), in the
  current bulk group; ``kj.tma.commit_group()``, ``kj.tma.wait_group(n)`` (writes done) and
  ``kj.tma.wait_group_read(n)`` (sources read), ``n`` a constant; ``kj.tma.prefetch(tmap)``.
* ``kj.fence_proxy_async()``: orders this thread's shared memory accesses with the copies.
* Clusters (``docs/clusters.md``): ``kj.mbarrier.arrive_cluster(bar, rank)`` arrives on the
  barrier at ``bar``'s place in the block of that rank of the cluster (releasing at cluster
  scope); ``kj.mbarrier.wait_cluster(bar, parity)`` is ``wait`` acquiring at cluster scope (what
  other blocks stored before they arrived is then visible; ``wait`` acquires for the block);
  ``kj.tma.load_multicast(dst, tmap, c..., bar, mask)`` is ``kj.tma.load`` into every block of
  the cluster whose rank has its bit set in ``mask`` (``dst`` and ``bar`` at the same places in
  each), each block's barrier completing the bytes it received.
* ``kj.elect_one() -> bool``: True in one active thread of each warp (its lowest active lane).

On the GPU: the PTX of ``kaiojit.lower.tma_ptx`` (sm_90). On the host the copies run
synchronously in native code (``kaiojit.tma_host``) and complete their bytes on the barrier at
once; waits are split points of the block-synchronous lowering: every thread runs up to the
wait first, so a wait that still cannot complete never will, and is reported
(``ERR_MBARRIER_STUCK``) instead of hanging; in a cluster of several blocks, which run at once
on threads of their own, another block may still complete it, so the wait yields its core
until it does (or the launch records a fault). ``elect_one`` is a warp operation there.
"""

from __future__ import annotations

from llvmlite import ir

from .. import tma_host as H
from .. import types as T
from ..target import CTX_LAUNCH, ERR_CLUSTER_RANK, ERR_MBARRIER_STUCK, ERR_TMA, LAUNCH_ERROR
from .api import (I1, I32, I64, PTR, SHARED, Expr, Intrinsic, Kind, Operands, call_args, const_int,
                  counted_loop, ctx_word, inline_asm, record_error, register, scalar_arg,
                  type_words)
from .api import cluster_host as CH
from .api import cluster_ptx as CP
from .api import tma_ptx as P

ARCH = "sm_90"
VOID = ir.VoidType()
BARRIER = Kind("a uint64 array (the mbarrier: element 0, in shared memory)",
               lambda t: isinstance(t, T.ArrayType) and t.dtype == T.uint64)
TENSORMAP = Kind("a tensor map", lambda t: isinstance(t, T.TensorMapType))


# --- typing ------------------------------------------------------------------------------------

def _barrier(typer, e: Expr, node, what: str) -> Expr:
    if not BARRIER.test(e.type):
        typer.error(f"{what}() needs an mbarrier, a uint64 shared array such as "
                    f"kj.shared.array(1, kj.uint64), got {type_words(e.type)}", node)
    return e


def _u32(typer, e: Expr, node, what: str) -> Expr:
    t = scalar_arg(typer, e, node, f"{what}()")
    if not (t.is_int or t.is_bool):
        typer.error(f"{what}() needs an integer, got {type_words(t)}", node)
    return typer.coerce(e, T.uint32, node)


def _mbarrier_typing(op: str, with_value: bool, result: T.Type):
    what = f"kj.mbarrier.{op}"

    def typing(typer, node):
        args = call_args(typer, node, 1 + with_value, 1 + with_value, what)
        operands = [_barrier(typer, args[0], node.args[0], what)]
        if with_value:
            operands.append(_u32(typer, args[1], node.args[1], what))
        return typer.intrinsic(f"mbarrier.{op}", result, operands, node)
    return typing


def _tensormap(typer, e: Expr, node, what: str) -> T.TensorMapType:
    if not TENSORMAP.test(e.type):
        typer.error(f"{what}() needs a tensor map (a kj.TensorMap argument), got "
                    f"{type_words(e.type)}", node)
    return e.type


def _box(typer, e: Expr, node, tmap: T.TensorMapType, what: str, role: str) -> Expr:
    t = e.type
    # any array: a view such as ring[k * n:] is fine, the box lies densely from its start
    if not isinstance(t, T.ArrayType):
        typer.error(f"{what}() needs a shared array as its {role}, got {type_words(t)}", node)
    if tmap.dtype is not None and t.dtype != tmap.dtype:
        typer.error(f"{what}(): the {role} holds {t.dtype}, the tensor map {tmap} copies "
                    f"{tmap.dtype}", node)
    return e


def _coordinates(typer, args: list, nodes: list, tmap: T.TensorMapType, call, what: str):
    if not 1 <= len(args) <= P.MAX_RANK:
        typer.error(f"{what}() takes 1 to {P.MAX_RANK} coordinates, got {len(args)}", call)
    if tmap.ndim is not None and len(args) != tmap.ndim:
        typer.error(f"{what}(): the tensor map {tmap} takes {tmap.ndim} coordinates, got "
                    f"{len(args)}", call)
    out = []
    for a, n in zip(args, nodes):
        t = scalar_arg(typer, a, n, f"{what}()")
        if not t.is_int:
            typer.error(f"{what}() takes integer coordinates, got {type_words(t)}", n)
        out.append(typer.coerce(a, T.int32, n))
    return out


def _load_typing(typer, node):
    operands, _ = _load_operands(typer, node, "kj.tma.load", 0)
    return typer.intrinsic("tma.load", T.void, operands, node)


def _load_multicast_typing(typer, node):
    what = "kj.tma.load_multicast"
    operands, args = _load_operands(typer, node, what, 1)
    mask = args[-1]
    t = scalar_arg(typer, mask, node.args[-1], f"{what}()")
    if not t.is_int:
        typer.error(f"{what}() needs an integer mask of the cluster's block ranks, got "
                    f"{type_words(t)}", node.args[-1])
    mask = typer.coerce(mask, T.uint16, node.args[-1])
    return typer.intrinsic("tma.load_multicast", T.void, (*operands, mask), node)


def _load_operands(typer, node, what: str, after: int) -> tuple[tuple, list]:
    """A load's checked operands ``(dst, tmap, coordinates..., bar)`` and all its typed
    arguments, of which ``after`` (the multicast mask) follow the barrier."""
    typed = call_args(typer, node, 4 + after, 3 + after + P.MAX_RANK, what)
    args, nodes = typed[:len(typed) - after], node.args[:len(typed) - after]
    tmap = _tensormap(typer, args[1], nodes[1], what)
    dst = _box(typer, args[0], nodes[0], tmap, what, "destination")
    coords = _coordinates(typer, args[2:-1], nodes[2:-1], tmap, node, what)
    return (dst, args[1], *coords, _barrier(typer, args[-1], nodes[-1], what)), typed


def _arrive_cluster_typing(typer, node):
    what = "kj.mbarrier.arrive_cluster"
    bar, rank = call_args(typer, node, 2, 2, what)
    t = scalar_arg(typer, rank, node.args[1], f"{what}()")
    if not t.is_int:
        typer.error(f"{what}() needs an integer block rank, got {type_words(t)}", node.args[1])
    return typer.intrinsic("mbarrier.arrive_cluster", T.void,
                           (_barrier(typer, bar, node.args[0], what),
                            typer.coerce(rank, T.uint32, node.args[1])), node)


def _store_typing(op: str):
    """``kj.tma.store`` and ``kj.tma.reduce_add``: (tmap, coordinates..., src)."""
    what = f"kj.tma.{op}"

    def typing(typer, node):
        args = call_args(typer, node, 3, 2 + P.MAX_RANK, what)
        tmap = _tensormap(typer, args[0], node.args[0], what)
        coords = _coordinates(typer, args[1:-1], node.args[1:-1], tmap, node, what)
        src = _box(typer, args[-1], node.args[-1], tmap, what, "source")
        if op == "reduce_add" and src.type.dtype.name not in H.REDUCE_ADD_TYPES:
            typer.error(f"{what}() adds {', '.join(H.REDUCE_ADD_TYPES)} elements (PTX's "
                        f"tensor .add), got a source of {src.type.dtype}", node.args[-1])
        return typer.intrinsic(f"tma.{op}", T.void, (args[0], *coords, src), node)
    return typing


def _prefetch_typing(typer, node):
    (tmap,) = call_args(typer, node, 1, 1, "kj.tma.prefetch")
    _tensormap(typer, tmap, node.args[0], "kj.tma.prefetch")
    return typer.intrinsic("tma.prefetch", T.void, (tmap,), node)


def _no_operands(name: str, user: str, result: T.Type = T.void):
    def typing(typer, node):
        call_args(typer, node, 0, 0, user)
        return typer.intrinsic(name, result, (), node)
    return typing


def _wait_group_typing(name: str):
    user = f"kj.tma.{name}"

    def typing(typer, node):
        if node.keywords or len(node.args) != 1:
            typer.error(f"{user}(n) takes one argument, the number of groups that may stay "
                        "pending", node)
        n = const_int(typer, node.args[0], f"{user}(n): n")
        if not 0 <= n <= P.MAX_WAIT_GROUP:
            typer.error(f"{user}(n): n must be 0 to {P.MAX_WAIT_GROUP}, got {n}", node.args[0])
        return typer.intrinsic(f"tma.{name}", T.void, (), node, param=n)
    return typing


def _copy_operands(load: bool):
    """tma.load: (dst array, tensormap, int32 x rank, barrier); tma.store: (tensormap,
    int32 x rank, src array)."""
    def check(e: Expr) -> str | None:
        types = [a.type for a in e.args]
        rank = len(types) - 3
        if not 1 <= rank <= P.MAX_RANK:
            return f"takes 3 + 1 to {P.MAX_RANK} operands, got {len(types)}"
        box, tmap = (types[0], types[1]) if load else (types[-1], types[0])
        coords = types[2:-1] if load else types[1:-1]
        if not isinstance(box, T.ArrayType) or not TENSORMAP.test(tmap):
            return f"needs an array and a tensor map, got {box} and {tmap}"
        if any(c != T.int32 for c in coords):
            return f"coordinates must be int32, got {coords}"
        if load and not BARRIER.test(types[-1]):
            return f"the last operand is {types[-1]}, expected {BARRIER.words}"
        return None if e.type == T.void else f"result is {e.type}, expected void"
    return check


def _multicast_operands(e: Expr) -> str | None:
    """tma.load_multicast: tma.load's operands, then the uint16 mask of ranks."""
    if not e.args or e.args[-1].type != T.uint16:
        return "the last operand must be the uint16 mask of ranks"
    return _copy_operands(True)(Expr("intrinsic", e.type, e.args[:-1], attr="tma.load"))


# --- the GPU -------------------------------------------------------------------------------------

def _asm(fl, p: P.InlinePtx, ret: ir.Type, args: list, convergent: bool = False):
    # llvmlite writes the template as it is into the IR's string: escape what LLVM would read
    text = p.text.replace("\\", "\\5C").replace('"', "\\22").replace("\n", "\\0A")
    return inline_asm(fl, ret, text, p.constraints, args, convergent)


def _shared_address(fl, arr):
    """The 32-bit shared-window address of an array's data (``__cvta_generic_to_shared``)."""
    b = fl.builder
    p = b.addrspacecast(b.extract_value(arr, 0), ir.PointerType(addrspace=SHARED))
    return b.ptrtoint(p, I32)


def _nvptx_mbarrier(template, ret: ir.Type = VOID, convert=None,
                    convergent: bool = False):
    def lower(fl, e: Expr):
        args = [_shared_address(fl, fl.expr(e.args[0]))] + [fl.expr(a) for a in e.args[1:]]
        v = _asm(fl, template(), ret, args, convergent)
        return convert(fl.builder, v) if convert else v
    return lower


def _nvptx_load(fl, e: Expr):
    dst, tmap, *coords, bar = (fl.expr(a) for a in e.args)
    args = [_shared_address(fl, dst), tmap, *reversed(coords), _shared_address(fl, bar)]
    _asm(fl, P.tma_load(len(coords)), VOID, args)


def _nvptx_load_multicast(fl, e: Expr):
    dst, tmap, *coords, bar, mask = (fl.expr(a) for a in e.args)
    args = [_shared_address(fl, dst), tmap, *reversed(coords), _shared_address(fl, bar), mask]
    _asm(fl, CP.tma_load_multicast(len(coords)), VOID, args)


def _nvptx_arrive_cluster(fl, e: Expr):
    bar, rank = (fl.expr(a) for a in e.args)
    _asm(fl, CP.mbarrier_arrive_cluster(), VOID, [_shared_address(fl, bar), rank])


def _nvptx_store(template):
    """tma.store / tma.reduce_add: ``template(rank)`` of (tmap, coordinates..., src)."""
    def lower(fl, e: Expr):
        tmap, *coords, src = (fl.expr(a) for a in e.args)
        _asm(fl, template(len(coords)), VOID, [tmap, *reversed(coords),
                                               _shared_address(fl, src)])
    return lower


def _nvptx_plain(template):
    def lower(fl, e: Expr):
        _asm(fl, template(), VOID, [fl.expr(a) for a in e.args])
    return lower


def _nvptx_wait_group(template):
    def lower(fl, e: Expr):
        _asm(fl, template(e.param), VOID, [])
    return lower


def _nvptx_elect_one(fl, e: Expr):
    mask = inline_asm(fl, I32, "activemask.b32 $0;", "=r", [], convergent=True)
    elected = _asm(fl, P.elect_sync(), I32, [mask], convergent=True)
    return fl.builder.icmp_unsigned("!=", elected, ir.Constant(I32, 0))


def _nonzero(b: ir.IRBuilder, v):
    return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))


# --- the host ------------------------------------------------------------------------------------

def _host_call(fl, symbol: str, ret: ir.Type, params: list[ir.Type], args: list):
    return fl.builder.call(fl.mod.declare(symbol, ret, params), args)


def _data(fl, e: Expr):
    return fl.builder.extract_value(fl.expr(e), 0)


def _host_mbarrier(symbol: str, ret: ir.Type = VOID):
    def lower(fl, e: Expr):
        args = [_data(fl, e.args[0])] + [fl.expr(a) for a in e.args[1:]]
        return _host_call(fl, symbol, ret, [PTR] + [I32] * (len(args) - 1), args)
    return lower


def _host_coords(fl, coords: list[Expr]) -> list:
    """The coordinates innermost first, padded to the host copies' five."""
    values = [fl.expr(c) for c in reversed(coords)]
    return values + [ir.Constant(I32, 0)] * (H.MAX_RANK - len(values))


def _refused(fl, e: Expr, status) -> None:
    """A copy the hardware would refuse: the launch's error (the first one wins)."""
    b = fl.builder
    site = fl.mod.add_site("tma", e.loc, op="kj." + e.attr)
    with b.if_then(_nonzero(b, status), likely=False):
        record_error(fl, ERR_TMA, site, b.zext(status, I64), ir.Constant(I64, 0),
                     fl.thread_linear())


def _host_load(fl, e: Expr):
    dst, tmap, *coords, bar = e.args
    args = [_data(fl, dst), fl.expr(tmap), *_host_coords(fl, coords), _data(fl, bar)]
    status = _host_call(fl, H.SYMBOL_LOAD, I32, [PTR, PTR] + [I32] * H.MAX_RANK + [PTR], args)
    _refused(fl, e, status)


def _host_load_multicast(fl, e: Expr):
    """The copy into every block of the mask, one after another (a mask bit past the cluster
    is the launch's error)."""
    b = fl.builder
    dst, tmap, *coords, bar, mask = e.args
    site = CH.mark(fl, e, "kj.tma.load_multicast")
    ranks = b.zext(fl.expr(mask), I64)
    n = CH.size(b, fl.ctx)
    beyond = b.lshr(ranks, n)
    with b.if_then(b.icmp_unsigned("!=", beyond, ir.Constant(I64, 0)), likely=False):
        cttz = fl.mod.declare("llvm.cttz.i64", I64, [I64, I1])
        first = b.add(b.call(cttz, [beyond, ir.Constant(I1, 1)]), n)
        record_error(fl, ERR_CLUSTER_RANK, site, first, n, fl.thread_linear())
    values = [_data(fl, dst), fl.expr(tmap), *_host_coords(fl, coords), _data(fl, bar)]
    with counted_loop(b, ir.Constant(I64, 0), n) as r:
        bit = b.and_(b.lshr(ranks, r), ir.Constant(I64, 1))
        with b.if_then(_nonzero(b, bit)):
            there = [CH.map_pointer(fl, values[0], r), *values[1:-1],
                     CH.map_pointer(fl, values[-1], r)]
            status = _host_call(fl, H.SYMBOL_LOAD, I32,
                                [PTR, PTR] + [I32] * H.MAX_RANK + [PTR], there)
            _refused(fl, e, status)


def _host_arrive_cluster(fl, e: Expr):
    bar, rank = e.args
    site = CH.mark(fl, e, "kj.mbarrier.arrive_cluster")
    r = CH.checked_rank(fl, fl.expr(rank), site, fl.thread_linear())
    _host_call(fl, H.SYMBOL_MBARRIER_ARRIVE, I64, [PTR],
               [CH.map_pointer(fl, _data(fl, bar), r)])


def _host_store(symbol: str):
    """tma.store / tma.reduce_add: the native copy ``symbol`` (the host's are synchronous)."""
    def lower(fl, e: Expr):
        tmap, *coords, src = e.args
        args = [fl.expr(tmap), *_host_coords(fl, coords), _data(fl, src)]
        status = _host_call(fl, symbol, I32, [PTR] + [I32] * H.MAX_RANK + [PTR], args)
        _refused(fl, e, status)
    return lower


def _host_nothing(fl, e: Expr):
    """The host's copies are synchronous: groups, fences and prefetches have nothing to do."""


def _stop_after_a_fault(bl) -> None:
    """Leave the block once the launch has recorded a fault (a refused copy never completes
    its barrier: a loop of try_waits would spin forever)."""
    b = bl.builder
    launch = b.inttoptr(ctx_word(b, bl.ctx, CTX_LAUNCH), PTR)
    with b.if_then(_nonzero(b, ctx_word(b, launch, LAUNCH_ERROR)), likely=False):
        b.branch(bl.exit_bb)


def _host_try_wait(bl, target, e: Expr):
    """Every thread has run up to here: each reads whether the phase has completed."""
    _stop_after_a_fault(bl)
    if target is None:
        return
    bar, parity = e.args
    bl.assign_each(target, lambda: _nonzero(bl.builder, _host_call(
        bl, H.SYMBOL_MBARRIER_TRY_WAIT_PARITY, I32, [PTR, I32],
        [_data(bl, bar), bl.expr(parity)])))


def _host_wait(bl, target, e: Expr):
    """Every thread has run up to here and every copy is done: a phase that has not completed
    never will (a hang on the GPU too, or arrivals from threads the host runs later), unless
    another block of the cluster, running on another thread, still completes it."""
    b = bl.builder
    bar, parity = e.args
    site = bl.mod.add_site("mbarrier", e.loc, op="kj." + e.attr)
    _stop_after_a_fault(bl)

    def each(t):
        def complete():
            done = _host_call(bl, H.SYMBOL_MBARRIER_TRY_WAIT_PARITY, I32, [PTR, I32],
                              [_data(bl, bar), bl.expr(parity)])
            return _nonzero(b, done)
        # every thread of the block has run up to here: a cluster of one is stuck at the
        # first incomplete check, a larger one once all its blocks wait without progress
        CH.blocked_wait(bl, complete, ERR_MBARRIER_STUCK, site, b.zext(bl.expr(parity), I64), t)
    bl.thread_loop(each)


def _host_elect_one(bl, target, e: Expr):
    """True in the thread whose warp has no active thread below it."""
    if target is None:
        return
    b = bl.builder
    first = bl.alloca(I1, name="elect.first")

    def each(t):
        b.store(ir.Constant(I1, 1), first)
        lane_base = b.sub(t, b.and_(t, ir.Constant(I64, 31)))
        with counted_loop(b, lane_base, t) as other, b.if_then(bl.active(other)):
            b.store(ir.Constant(I1, 0), first)
        b.store(b.load(first, typ=I1), bl.vars[target])
    bl.thread_loop(each)


# --- declarations --------------------------------------------------------------------------------

_MBARRIER_OPS = (
    # op, takes a value, result, PTX template, host symbol
    ("init", True, T.void, P.mbarrier_init, H.SYMBOL_MBARRIER_INIT),
    ("arrive", False, T.uint64, P.mbarrier_arrive, H.SYMBOL_MBARRIER_ARRIVE),
    ("arrive_expect_tx", True, T.uint64, P.mbarrier_arrive_expect_tx,
     H.SYMBOL_MBARRIER_ARRIVE_EXPECT_TX),
    ("expect_tx", True, T.void, P.mbarrier_expect_tx, H.SYMBOL_MBARRIER_EXPECT_TX),
)
for _op, _value, _result, _template, _symbol in _MBARRIER_OPS:
    _ll = I64 if _result == T.uint64 else VOID
    register(Intrinsic(
        name=f"mbarrier.{_op}",
        operands=Operands(BARRIER, *([T.uint32] if _value else []), result=_result),
        lowering={"nvptx": _nvptx_mbarrier(_template, _ll), "host": _host_mbarrier(_symbol, _ll)},
        calls={f"kj.mbarrier.{_op}": _mbarrier_typing(_op, _value, _result)}, min_arch=ARCH,
        host_symbols=(_symbol,)))
register(Intrinsic(
    name="mbarrier.try_wait_parity", operands=Operands(BARRIER, T.uint32, result=T.bool_),
    lowering={"nvptx": _nvptx_mbarrier(P.mbarrier_try_wait_parity, I32, _nonzero, True),
              "host": _host_try_wait},
    calls={"kj.mbarrier.try_wait_parity": _mbarrier_typing("try_wait_parity", True, T.bool_)},
    barrier=True, convergent=True, min_arch=ARCH,
    host_symbols=(H.SYMBOL_MBARRIER_TRY_WAIT_PARITY,)))
for _op, _template in (("wait", P.mbarrier_wait_parity),
                      ("wait_cluster", CP.mbarrier_wait_parity_cluster)):
    register(Intrinsic(
        name=f"mbarrier.{_op}", operands=Operands(BARRIER, T.uint32, result=T.void),
        lowering={"nvptx": _nvptx_mbarrier(_template, convergent=True), "host": _host_wait},
        calls={f"kj.mbarrier.{_op}": _mbarrier_typing(_op, True, T.void)},
        barrier=True, convergent=True, min_arch=ARCH,
        host_symbols=(H.SYMBOL_MBARRIER_TRY_WAIT_PARITY, *CH.HOST_SYMBOLS)))
register(Intrinsic(
    name="tma.load", operands=_copy_operands(True),
    lowering={"nvptx": _nvptx_load, "host": _host_load},
    calls={"kj.tma.load": _load_typing}, writes=(0,), min_arch=ARCH,
    host_symbols=(H.SYMBOL_LOAD,)))
register(Intrinsic(
    name="tma.load_multicast", operands=_multicast_operands,
    lowering={"nvptx": _nvptx_load_multicast, "host": _host_load_multicast},
    calls={"kj.tma.load_multicast": _load_multicast_typing}, writes=(0,), min_arch=ARCH,
    host_symbols=(H.SYMBOL_LOAD,)))
register(Intrinsic(
    name="mbarrier.arrive_cluster", operands=Operands(BARRIER, T.uint32, result=T.void),
    lowering={"nvptx": _nvptx_arrive_cluster, "host": _host_arrive_cluster},
    calls={"kj.mbarrier.arrive_cluster": _arrive_cluster_typing}, min_arch=ARCH,
    host_symbols=(H.SYMBOL_MBARRIER_ARRIVE,)))
for _op, _template, _symbol in (("store", P.tma_store, H.SYMBOL_STORE),
                                ("reduce_add", P.tma_reduce_add, H.SYMBOL_REDUCE_ADD)):
    register(Intrinsic(
        name=f"tma.{_op}", operands=_copy_operands(False),
        lowering={"nvptx": _nvptx_store(_template), "host": _host_store(_symbol)},
        calls={f"kj.tma.{_op}": _store_typing(_op)}, min_arch=ARCH, host_symbols=(_symbol,)))
register(Intrinsic(
    name="tma.commit_group", operands=Operands(result=T.void),
    lowering={"nvptx": _nvptx_plain(P.bulk_commit_group), "host": _host_nothing},
    calls={"kj.tma.commit_group": _no_operands("tma.commit_group", "kj.tma.commit_group")},
    min_arch=ARCH))
for _name, _template in (("wait_group", P.bulk_wait_group),
                         ("wait_group_read", P.bulk_wait_group_read)):
    register(Intrinsic(
        name=f"tma.{_name}", operands=Operands(result=T.void),
        lowering={"nvptx": _nvptx_wait_group(_template), "host": _host_nothing},
        calls={f"kj.tma.{_name}": _wait_group_typing(_name)}, min_arch=ARCH, param=int))
register(Intrinsic(
    name="tma.prefetch", operands=Operands(TENSORMAP, result=T.void),
    lowering={"nvptx": _nvptx_plain(P.prefetch_tensormap), "host": _host_nothing},
    calls={"kj.tma.prefetch": _prefetch_typing}, min_arch=ARCH))
register(Intrinsic(
    name="fence.proxy_async", operands=Operands(result=T.void),
    lowering={"nvptx": _nvptx_plain(P.fence_proxy_async), "host": _host_nothing},
    calls={"kj.fence_proxy_async": _no_operands("fence.proxy_async", "kj.fence_proxy_async")},
    min_arch=ARCH))
register(Intrinsic(
    name="warp.elect_one", operands=Operands(result=T.bool_),
    lowering={"nvptx": _nvptx_elect_one, "host": _host_elect_one},
    calls={"kj.elect_one": _no_operands("warp.elect_one", "kj.elect_one", T.bool_)},
    warp=True, convergent=True, min_arch=ARCH))
