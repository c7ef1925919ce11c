"""Thread-block clusters (sm_90): where a block is in its cluster, the cluster barrier and
distributed shared memory.

* ``kj.clusterIdx``, ``kj.clusterDim``, ``kj.clusterBlockIdx``, ``kj.clusterGridDim`` (.x, .y,
  .z): the cluster's index in the grid (``%clusterid``, int64), its shape in blocks
  (``%cluster_nctaid``, int32), the block's index in it (``%cluster_ctaid``, int32) and the
  grid's shape in clusters (``%nclusterid``, int64).
* ``kj.cluster.block_rank()`` and ``kj.cluster.num_blocks()`` (int32): the block's rank in
  its cluster, x fastest (``%cluster_ctarank``), and the blocks in it (``%cluster_nctarank``);
  CUDA's cooperative groups name them so.
* ``kj.cluster.sync()``: a barrier of every thread of the cluster; ``kj.cluster.arrive()``
  (release), ``kj.cluster.arrive_relaxed()`` and ``kj.cluster.wait()`` (acquire): its two
  halves, for work between them.
* ``kj.cluster.map_shared_rank(arr, rank)``: the shared array ``arr`` as it lies in the block
  of that rank (CUDA's ``cluster.map_shared_rank``): loads, stores and atomics through it reach
  that block's shared memory.
* ``kj.fence_mbarrier_init()``: makes this thread's mbarrier inits visible to the cluster
  (before another block arrives on them, or a multicast copy completes them).

A launch without a cluster runs every block as a cluster of one, as the GPU does. On the cpu
backend, see ``kaiojit/lower/cluster_host.py``; the runtime runs a cluster's blocks at once
(``kaiojit/runtime/clusters.py``).
"""

from __future__ import annotations

from llvmlite import ir

from .. import language as L
from .. import types as T
from .api import (
    I64,
    Expr,
    Intrinsic,
    Operands,
    call_args,
    inline_asm,
    ll_type,
    register,
    scalar_arg,
    tma_ptx,
    type_words,
)
from .api import cluster_host as CH
from .api import cluster_ptx as P

ARCH = "sm_90"
_VOID = T.void

# user register -> (PTX special register, result type, host value from (builder, ctx, axis))
_REGISTERS = {
    "clusterIdx": ("clusterid", T.int64, CH.cluster_index),
    "clusterDim": ("cluster.nctaid", T.int32, CH.cluster_dim),
    "clusterBlockIdx": ("cluster.ctaid", T.int32, CH.block_in_cluster),
    "clusterGridDim": ("nclusterid", T.int64, CH.grid_in_clusters),
}


def _nvptx_sreg(ptx: str):
    def lower(fl, e: Expr):
        value = fl.target.sreg(fl, ptx)
        return fl.builder.zext(value, I64) if e.type == T.int64 else value
    return lower


def _host_sreg(value, axis: int | None):
    def lower(fl, e: Expr):
        b = fl.builder
        v = value(b, fl.ctx) if axis is None else value(b, fl.ctx, axis)
        return v if e.type == T.int64 else b.trunc(v, ll_type(e.type))
    return lower


# --- typing --------------------------------------------------------------------------------------

def _no_operands(name: str, user: str, result: T.Type = _VOID):
    def typing(typer, node):
        call_args(typer, node, 0, 0, user)
        return typer.intrinsic(name, result, (), node)
    return typing


def _rank(typer, e: Expr, node, what: str) -> Expr:
    t = scalar_arg(typer, e, node, what)
    if not t.is_int:
        typer.error(f"{what} needs an integer block rank, got {type_words(t)}", node)
    return typer.coerce(e, T.uint32, node)


def _map_typing(typer, node):
    what = "kj.cluster.map_shared_rank"
    arr, rank = call_args(typer, node, 2, 2, what)
    if not isinstance(arr.type, T.ArrayType):
        typer.error(f"{what}() needs a shared array, got {type_words(arr.type)}", node.args[0])
    rank = _rank(typer, rank, node.args[1], f"{what}()")
    return typer.intrinsic("cluster.map_shared_rank", arr.type, (arr, rank), node)


def _map_operands(e: Expr) -> str | None:
    types = [a.type for a in e.args]
    if len(types) != 2 or not isinstance(types[0], T.ArrayType) or types[1] != T.uint32:
        return f"takes an array and a uint32 rank, got {types}"
    return None if e.type == types[0] else f"result is {e.type}, expected {types[0]}"


# --- the GPU -------------------------------------------------------------------------------------

def _asm(fl, p, ret, args, convergent: bool = False):
    return inline_asm(fl, ret, p.text.replace("\n", "\\0A"), p.constraints, args, convergent)


def _nvptx_plain(template, convergent: bool = False):
    def lower(fl, e: Expr):
        _asm(fl, template(), ir.VoidType(), [], convergent)
    return lower


def _nvptx_map(fl, e: Expr):
    b = fl.builder
    arr = fl.expr(e.args[0])
    address = b.ptrtoint(b.extract_value(arr, 0), I64)
    mapped = _asm(fl, P.map_shared_rank(), I64, [address, fl.expr(e.args[1])])
    return b.insert_value(arr, b.inttoptr(mapped, b.extract_value(arr, 0).type), 0)


# --- the host ------------------------------------------------------------------------------------

def _host_map(fl, e: Expr):
    b = fl.builder
    arr = fl.expr(e.args[0])
    site = CH.mark(fl, e, "kj.cluster.map_shared_rank")
    rank = CH.checked_rank(fl, fl.expr(e.args[1]), site, fl.thread_linear())
    return b.insert_value(arr, CH.map_pointer(fl, b.extract_value(arr, 0), rank), 0)


def _host_arrive(bl, target, e: Expr):
    """Every thread of the block arrives, then the block does on the cluster's counter."""
    bl.barrier(None, e)
    CH.mark(bl, e, "kj." + e.attr)
    CH.barrier_arrive(bl)


def _host_wait(bl, target, e: Expr):
    CH.barrier_wait(bl, CH.mark(bl, e, "kj." + e.attr))


def _host_sync(bl, target, e: Expr):
    _host_arrive(bl, target, e)
    CH.barrier_wait(bl, CH.mark(bl, e, "kj." + e.attr))


def _host_nothing(fl, e: Expr):
    """The host's mbarrier operations are atomic and sequentially consistent: no fence."""


# --- declarations --------------------------------------------------------------------------------

for _user, (_ptx, _type, _value) in _REGISTERS.items():
    for _axis, _name in enumerate("xyz"):
        register(Intrinsic(
            name=f"sreg.{_ptx}.{_name}", operands=Operands(result=_type),
            lowering={"nvptx": _nvptx_sreg(f"{_ptx}.{_name}"), "host": _host_sreg(_value, _axis)},
            values=(getattr(getattr(L, _user), _name),), pure=True, nonnegative=True,
            min_arch=ARCH))
for _fn, _ptx, _value in (("block_rank", "cluster.ctarank", CH.rank),
                          ("num_blocks", "cluster.nctarank", CH.size)):
    register(Intrinsic(
        name=f"sreg.{_ptx}", operands=Operands(result=T.int32),
        lowering={"nvptx": _nvptx_sreg(_ptx), "host": _host_sreg(_value, None)},
        calls={f"kj.cluster.{_fn}": _no_operands(f"sreg.{_ptx}", f"kj.cluster.{_fn}", T.int32)},
        pure=True, nonnegative=True, min_arch=ARCH))
for _op, _template, _host in (("sync", P.cluster_sync, _host_sync),
                              ("arrive", P.cluster_arrive, _host_arrive),
                              ("arrive_relaxed", P.cluster_arrive_relaxed, _host_arrive),
                              ("wait", P.cluster_wait, _host_wait)):
    register(Intrinsic(
        name=f"cluster.{_op}", operands=Operands(result=_VOID),
        lowering={"nvptx": _nvptx_plain(_template, True), "host": _host},
        calls={f"kj.cluster.{_op}": _no_operands(f"cluster.{_op}", f"kj.cluster.{_op}")},
        barrier=True, convergent=True, min_arch=ARCH, host_symbols=CH.HOST_SYMBOLS))
register(Intrinsic(
    name="cluster.map_shared_rank", operands=_map_operands,
    lowering={"nvptx": _nvptx_map, "host": _host_map},
    calls={"kj.cluster.map_shared_rank": _map_typing}, min_arch=ARCH))
register(Intrinsic(
    name="fence.mbarrier_init", operands=Operands(result=_VOID),
    lowering={"nvptx": _nvptx_plain(tma_ptx.fence_mbarrier_init), "host": _host_nothing},
    calls={"kj.fence_mbarrier_init": _no_operands("fence.mbarrier_init",
                                                  "kj.fence_mbarrier_init")},
    min_arch=ARCH))
