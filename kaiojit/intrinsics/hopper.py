"""Hopper's warp-specialization primitives (sm_90 / sm_90a), on the GPU and on the cpu backend:

* ``kj.warpgroup.index()``: the thread's warpgroup (linear thread index // 128, an int32);
  ``kj.warpgroup.reg_alloc(n)`` / ``kj.warpgroup.reg_dealloc(n)``: ``setmaxnreg.inc`` /
  ``.dec.sync.aligned.u32 n`` (sm_90a), ``n`` a constant multiple of 8 from 24 to 256 (the
  totals the hardware accepts; anything else is a located error). A no-op on the cpu backend.
* ``kj.named_barrier.sync(id, n)`` / ``kj.named_barrier.arrive(id, n)``: ``bar.sync`` /
  ``bar.arrive`` on barrier ``id`` (0 to 15) for ``n`` threads (a multiple of 32): the
  barrier completes once ``n`` threads arrived, counted a warp (32) at a time as the GPU
  counts them, every ``n`` arrivals a phase; ``arrive`` does not wait. On the cpu backend both
  are split points and each block keeps the 16 barriers' counts (``CTX_NAMED_BARRIERS``): an
  ``arrive`` adds to them, a ``sync`` whose phase completes goes on, one whose phase cannot
  complete any more (every thread has run up to it) is a ``kj.KernelError`` naming the line
  instead of a hang.
* ``kj.stmatrix(dst, index, r0[, r1[, r2, r3]], trans=False)``: ``stmatrix.sync.aligned.m8n8``
  ``.x1/.x2/.x4[.trans].shared.b16``: the warp stores 1, 2 or 4 8x8 matrices of 16-bit
  elements; each thread holds, in ``r<i>`` (a uint32: two elements, the first in the low
  half), row ``lane // 4``, columns ``2 * (lane % 4)`` and ``+ 1`` of matrix ``i``, and lane
  ``8 i + j`` gives the element ``index`` of ``dst`` (a shared array) where row ``j`` of
  matrix ``i`` begins (16 bytes; with ``trans``, where column ``j`` begins). On the cpu
  backend a warp collective with the same layout.
* ``kj.cvt_pack(dtype, lo, hi) -> uint32 / uint16``: two float32 rounded to ``dtype``
  (bfloat16, float16: ``cvt.rn.bf16x2.f32``; float8_e4m3fn, float8_e5m2:
  ``cvt.rn.satfinite.e4m3x2.f32``...) and packed, ``lo`` in the low half: the operands of
  ``stmatrix`` and of 16-bit / 8-bit stores. The cpu backend rounds the same, bit for bit.
"""

from __future__ import annotations

import ast

from llvmlite import ir

from .. import types as T
from ..target import CTX_NAMED_BARRIERS, ERR_NAMED_BARRIER, NAMED_BARRIERS
from .api import (
    I16,
    I32,
    I64,
    PTR,
    SHARED,
    Expr,
    Intrinsic,
    Operands,
    PyObj,
    call_args,
    const_int,
    counted_loop,
    ctx_word,
    dtype_arg,
    inline_asm,
    narrowfloat,
    record_error,
    register,
    scalar_arg,
    type_words,
)

VOID = ir.VoidType()
F32 = ir.FloatType()
WARPGROUP = 128
REG_RANGE = (24, 256)  # setmaxnreg's totals: multiples of 8 in this range
STMATRIX_COUNTS = {1: "x1", 2: "x2", 4: "x4"}
# cvt_pack's formats: kaiojit type name -> (PTX cvt, packed result type)
PACKED = {"bfloat16": ("cvt.rn.bf16x2.f32", T.uint32), "float16": ("cvt.rn.f16x2.f32", T.uint32),
          "float8_e4m3fn": ("cvt.rn.satfinite.e4m3x2.f32", T.uint16),
          "float8_e5m2": ("cvt.rn.satfinite.e5m2x2.f32", T.uint16)}


# --- warpgroups and register reallocation --------------------------------------------------------

def _index_typing(typer, node):
    call_args(typer, node, 0, 0, "kj.warpgroup.index")
    return typer.intrinsic("warpgroup.index", T.int32, (), node)


def _sreg(fl, name: str):
    fn = fl.mod.declare(f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
    return fl.builder.call(fn, [])


def _nvptx_index(fl, e: Expr):
    b = fl.builder
    linear = b.add(_sreg(fl, "tid.x"), b.mul(_sreg(fl, "ntid.x"), b.add(
        _sreg(fl, "tid.y"), b.mul(_sreg(fl, "ntid.y"), _sreg(fl, "tid.z")))))
    index = b.udiv(linear, ir.Constant(I32, WARPGROUP))
    # lane 0's value, through a shuffle: ptxas then knows it is the same in the whole warp,
    # so branches on it do not diverge (as CUTLASS's canonical_warp_group_idx); without it
    # a wgmma under such a branch is serialized (ptxas C7518)
    shfl = fl.mod.declare("llvm.nvvm.shfl.sync.idx.i32", I32, [I32, I32, I32, I32])
    return b.call(shfl, [ir.Constant(I32, -1), index, ir.Constant(I32, 0), ir.Constant(I32, 31)])


def _host_index(fl, e: Expr):
    b = fl.builder
    return b.trunc(b.udiv(fl.thread_linear(), ir.Constant(I64, WARPGROUP)), I32)


def _reg_typing(op: str):
    user = f"kj.warpgroup.{op}"

    def typing(typer, node):
        call_args(typer, node, 1, 1, user)
        n = const_int(typer, node.args[0], f"{user}(n): n")
        lo, hi = REG_RANGE
        if n % 8 or not lo <= n <= hi:
            typer.error(f"{user}(n): the hardware takes a register total that is a multiple "
                        f"of 8 from {lo} to {hi} (setmaxnreg), got {n}", node.args[0])
        return typer.intrinsic(f"warpgroup.{op}", T.void, (), node, param=n)
    return typing


def _nvptx_setmaxnreg(which: str):
    def lower(fl, e: Expr):
        inline_asm(fl, VOID, f"setmaxnreg.{which}.sync.aligned.u32 {e.param};", "~{memory}", [],
                   convergent=True)
    return lower


def _host_nothing(fl, e: Expr):
    """Register totals are the GPU's business: the cpu backend has nothing to do."""


# --- named barriers ------------------------------------------------------------------------------

def _barrier_typing(op: str):
    user = f"kj.named_barrier.{op}"

    def typing(typer, node):
        args = call_args(typer, node, 2, 2, user)
        operands = []
        for a, n, what in zip(args, node.args, ("id", "n")):
            t = scalar_arg(typer, a, n, f"{user}()")
            if not t.is_int:
                typer.error(f"{user}(id, n): {what} must be an integer, got {type_words(t)}", n)
            operands.append(typer.coerce(a, T.int32, n))
        bar, count = operands
        if bar.op == "const" and not 0 <= bar.attr < NAMED_BARRIERS:
            typer.error(f"{user}(id, n): a block has barriers 0 to {NAMED_BARRIERS - 1}, got "
                        f"id {bar.attr}", node.args[0])
        if count.op == "const" and (count.attr % 32 or not 0 < count.attr <= 1024):
            typer.error(f"{user}(id, n): n counts threads a warp at a time: a multiple of 32 "
                        f"from 32 to 1024, got {count.attr}", node.args[1])
        return typer.intrinsic(f"named_barrier.{op}", T.void, operands, node)
    return typing


def _nvptx_barrier(op: str):
    def lower(fl, e: Expr):
        inline_asm(fl, VOID, f"bar.{op} $0, $1;", "r,r,~{memory}",
                   [fl.expr(a) for a in e.args], convergent=True)
    return lower


def _host_barrier(waits: bool):
    """The block's threads that reach this point (every one has run up to it) arrive on their
    barrier, a warp at a time (32, at the warp's first arriving thread), as the GPU counts;
    every ``n`` arrivals complete a phase. A ``sync`` whose last phase is left incomplete can
    never go on (reported); an ``arrive`` leaves the remainder for a later ``sync``."""
    def lower(bl, target, e: Expr):
        b = bl.builder
        c = lambda v: ir.Constant(I64, v)
        counts = b.inttoptr(ctx_word(b, bl.ctx, CTX_NAMED_BARRIERS), PTR)
        pending, needed, firsts = (bl.alloca(I64, c(NAMED_BARRIERS), name=f"nbar.{x}")
                                   for x in ("pending", "needed", "first"))
        seen = bl.alloca(I64, name="nbar.warp")
        b.store(c(-1), seen)
        for k in range(NAMED_BARRIERS):
            for arr, v in ((pending, 0), (needed, 0), (firsts, -1)):
                b.store(c(v), b.gep(arr, [c(k)], source_etype=I64))

        def slot(arr, i):
            return b.gep(arr, [i], source_etype=I64)

        def visit(t):
            i = b.and_(b.sext(bl.expr(e.args[0]), I64), c(NAMED_BARRIERS - 1))
            warp = b.lshr(t, c(5))
            new_warp = b.icmp_unsigned("!=", warp, b.load(seen, typ=I64))
            b.store(warp, seen)
            p = slot(pending, i)
            b.store(b.add(b.load(p, typ=I64), b.select(new_warp, c(32), c(0))), p)
            b.store(b.sext(bl.expr(e.args[1]), I64), slot(needed, i))
            f = slot(firsts, i)
            with b.if_then(b.icmp_signed("<", b.load(f, typ=I64), c(0))):
                b.store(t, f)
        bl.thread_loop(visit)
        site = bl.mod.add_site("named_barrier", e.loc,
                               op=f"kj.named_barrier.{'sync' if waits else 'arrive'}")
        with counted_loop(b, c(0), c(NAMED_BARRIERS)) as i:
            arrived = b.load(slot(pending, i), typ=I64)
            with b.if_then(b.icmp_signed(">", arrived, c(0))):
                n = b.load(slot(needed, i), typ=I64)
                count = b.gep(counts, [i], source_etype=I64)
                total = b.add(b.load(count, typ=I64), arrived)
                left = b.srem(total, n)  # every n arrivals complete a phase
                if waits:  # the waiting threads of an incomplete last phase never go on
                    with b.if_then(b.icmp_signed("!=", left, c(0)), likely=False):
                        record_error(bl, ERR_NAMED_BARRIER, site, left, n,
                                     b.load(slot(firsts, i), typ=I64))
                        b.branch(bl.exit_bb)
                b.store(left, count)
    return lower


# --- stmatrix ------------------------------------------------------------------------------------

def _stmatrix_typing(typer, node):
    user = "kj.stmatrix"
    trans = 0
    for kw in node.keywords:
        if kw.arg != "trans":
            typer.error(f"{user}() has no argument {kw.arg!r}; it takes dst, index, the "
                        "registers and trans", kw.value)
        seen = kw.value.value if isinstance(kw.value, ast.Constant) else typer.visit(kw.value)
        seen = seen.value if isinstance(seen, PyObj) else seen  # a global or closure's value
        trans = int(seen) if isinstance(seen, bool) else const_int(typer, kw.value,
                                                                   f"{user}()'s trans")
        if trans not in (0, 1):
            typer.error(f"{user}()'s trans must be True or False, got {trans}", kw.value)
    regs = len(node.args) - 2
    if regs not in STMATRIX_COUNTS:
        typer.error(f"{user}(dst, index, r0[, r1[, r2, r3]]) stores 1, 2 or 4 matrices: give "
                    f"1, 2 or 4 registers, got {max(regs, 0)}", node)
    dst = typer.expr(node.args[0])
    if not isinstance(dst.type, T.ArrayType) or dst.type.dtype.itemsize != 2:
        typer.error(f"{user}() stores 16-bit elements into a shared array of a 16-bit type "
                    f"(bfloat16, float16, int16, uint16), got {type_words(dst.type)}",
                    node.args[0])
    operands = [dst]
    for i, n in enumerate(node.args[1:]):
        e = typer.expr(n)
        t = scalar_arg(typer, e, n, f"{user}()")
        if not t.is_int:
            what = "index" if i == 0 else f"register r{i - 1} (a uint32 of two elements)"
            typer.error(f"{user}(): the {what} must be an integer, got {type_words(t)}", n)
        operands.append(typer.coerce(e, T.int64 if i == 0 else T.uint32, n))
    return typer.intrinsic("stmatrix", T.void, operands, node, param=regs * 2 + trans)


def _row_address(fl, e: Expr):
    """The generic address of ``dst[index]`` (this lane's row)."""
    b = fl.builder
    data = b.extract_value(fl.expr(e.args[0]), 0)
    return b.gep(data, [b.mul(fl.expr(e.args[1]), ir.Constant(I64, 2))],
                 source_etype=ir.IntType(8))


def _nvptx_stmatrix(fl, e: Expr):
    b = fl.builder
    regs, trans = e.param // 2, e.param % 2
    shared = b.ptrtoint(b.addrspacecast(_row_address(fl, e), ir.PointerType(addrspace=SHARED)),
                        I32)
    values = [fl.expr(a) for a in e.args[2:]]
    text = (f"stmatrix.sync.aligned.m8n8.{STMATRIX_COUNTS[regs]}{'.trans' if trans else ''}"
            f".shared.b16 [$0], {{{', '.join(f'${i + 1}' for i in range(regs))}}};")
    inline_asm(fl, VOID, text, ",".join(["r"] * (regs + 1) + ["~{memory}"]),
               [shared, *values], convergent=True)


def _host_stmatrix(bl, target, e: Expr):
    """Every lane publishes its row address; then each stores its own elements at the rows
    its partners named (the fragment layout of the module docstring)."""
    b = bl.builder
    regs, trans = e.param // 2, e.param % 2
    rows = bl.per_thread(I64)
    c = lambda v: ir.Constant(I64, v)
    bl.thread_loop(lambda t: b.store(b.ptrtoint(_row_address(bl, e), I64),
                                     b.gep(rows, [t], source_etype=I64)))

    def store(t):
        lane = b.and_(t, c(31))
        base = b.sub(t, lane)
        r, q = b.lshr(lane, c(2)), b.and_(lane, c(3))
        for i in range(regs):
            v = bl.expr(e.args[2 + i])
            if not trans:  # row r of matrix i, bytes 4q..4q+3
                row = b.load(b.gep(rows, [b.add(b.add(base, c(8 * i)), r)], source_etype=I64),
                             typ=I64)
                b.store(v, b.inttoptr(b.add(row, b.mul(q, c(4))), PTR))
                continue
            for h in range(2):  # element (r, 2q + h) -> row 2q + h, column r
                col = b.add(b.mul(q, c(2)), c(h))
                row = b.load(b.gep(rows, [b.add(b.add(base, c(8 * i)), col)], source_etype=I64),
                             typ=I64)
                half = b.trunc(b.lshr(v, ir.Constant(I32, 16 * h)), I16)
                b.store(half, b.inttoptr(b.add(row, b.mul(r, c(2))), PTR))
    bl.thread_loop(store)


# --- packed conversions --------------------------------------------------------------------------

def _pack_typing(typer, node):
    user = "kj.cvt_pack"
    if len(node.args) != 3 or node.keywords:
        typer.error(f"{user}(dtype, lo, hi) takes three arguments", node)
    dtype = dtype_arg(typer, node.args[0])
    args = [None] + [typer.expr(n) for n in node.args[1:]]
    if dtype.name not in PACKED:
        typer.error(f"{user}(dtype, lo, hi) packs {', '.join(PACKED)}, got {dtype}",
                    node.args[0])
    values = []
    for a, n in zip(args[1:], node.args[1:]):
        t = scalar_arg(typer, a, n, f"{user}()")
        if t.is_complex:
            typer.error(f"{user}() converts real numbers, got {type_words(t)}", n)
        values.append(typer.coerce(a, T.float32, n))
    return typer.intrinsic("cvt_pack", PACKED[dtype.name][1], values, node, param=dtype.name)


def _nvptx_pack(fl, e: Expr):
    cvt, result = PACKED[e.param]
    lo, hi = (fl.expr(a) for a in e.args)
    ty, reg = (I32, "r") if result == T.uint32 else (I16, "h")
    asm = ir.InlineAsm(ir.FunctionType(ty, [F32, F32]), f"{cvt} $0, $1, $2;", f"={reg},f,f")
    return fl.builder.call(asm, [hi, lo])


def _host_pack(fl, e: Expr):
    b = fl.builder
    t = getattr(T, e.param)
    bits = t.itemsize * 8
    ty = I32 if bits == 16 else I16
    out = []
    for a in e.args:
        x = fl.expr(a)
        v = b.fptrunc(x, ir.HalfType()) if t == T.float16 else narrowfloat.narrow(fl, x, t)
        if not isinstance(v.type, ir.IntType):
            v = b.bitcast(v, ir.IntType(bits))
        out.append(b.zext(v, ty))
    lo, hi = out
    return b.or_(lo, b.shl(hi, ir.Constant(ty, bits)))


# --- declarations --------------------------------------------------------------------------------

register(Intrinsic(
    name="warpgroup.index", operands=Operands(result=T.int32),
    lowering={"nvptx": _nvptx_index, "host": _host_index},
    calls={"kj.warpgroup.index": _index_typing}, convergent=True, nonnegative=True))
for _op, _which in (("reg_alloc", "inc"), ("reg_dealloc", "dec")):
    register(Intrinsic(
        name=f"warpgroup.{_op}", operands=Operands(result=T.void),
        lowering={"nvptx": _nvptx_setmaxnreg(_which), "host": _host_nothing},
        calls={f"kj.warpgroup.{_op}": _reg_typing(_op)}, convergent=True, min_arch="sm_90a",
        param=int))
for _op, _waits in (("sync", True), ("arrive", False)):
    register(Intrinsic(
        name=f"named_barrier.{_op}", operands=Operands(T.int32, T.int32, result=T.void),
        lowering={"nvptx": _nvptx_barrier(_op), "host": _host_barrier(_waits)},
        calls={f"kj.named_barrier.{_op}": _barrier_typing(_op)}, barrier=True,
        convergent=True))
register(Intrinsic(
    name="stmatrix", operands=lambda e: None,
    lowering={"nvptx": _nvptx_stmatrix, "host": _host_stmatrix},
    calls={"kj.stmatrix": _stmatrix_typing}, warp=True, convergent=True, writes=(0,),
    min_arch="sm_90", param=int))
register(Intrinsic(
    name="cvt_pack", operands=lambda e: None,
    lowering={"nvptx": _nvptx_pack, "host": _host_pack},
    calls={"kj.cvt_pack": _pack_typing}, pure=True, elementwise=True, min_arch="sm_90",
    param=str))

__all__ = ["PACKED", "REG_RANGE", "STMATRIX_COUNTS", "WARPGROUP"]
