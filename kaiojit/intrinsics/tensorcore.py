"""Tensor cores from kernels: ``kj.mma``, ``kj.ldmatrix`` and ``kj.cp_async`` (with
``kj.cp_async_commit`` and ``kj.cp_async_wait``).

Fragments are tuples of scalars, each lane of the warp holding its part. With ``g = lane // 4``
and ``t = lane % 4`` (the PTX ISA's groupID and threadID_in_group), for
``mma.sync.aligned.m16n8k16.row.col`` (float16 or bfloat16 inputs, float32 accumulators):

* A (16 x 16, 8 elements): ``a[2r + h]`` is ``A[g + 8 * (r % 2), 2 * t + h + 8 * (r // 2)]``
  for register ``r`` in 0..3 and half ``h`` in 0..1;
* B (16 x 8, 4 elements): ``b[2r + h]`` is ``B[2 * t + h + 8 * r, g]``;
* C and D (16 x 8, 4 float32): ``c[2r + h]`` is ``C[g + 8 * r, 2 * t + h]``.

For ``m16n8k8`` with tf32 inputs (float32 values whose low 13 mantissa bits the tensor core
ignores): ``a[r]`` is ``A[g + 8 * (r % 2), t + 4 * (r // 2)]``, ``b[r]`` is ``B[t + 4 * r, g]``,
C and D as above.

``kj.ldmatrix(ary, index, num=4, trans=False)`` loads ``num`` 8 x 8 matrices of 16-bit elements
from shared memory: lane ``8 * m + i`` gives (as ``&ary[index]``) the address of row ``i`` of
matrix ``m`` (8 contiguous elements, 16 bytes, 16-byte aligned); each lane gets ``2 * num``
elements, ``r[2m + h] = M_m[g, 2t + h]`` (``M_m[2t + h, g]`` with ``trans``). These are exactly
the A fragment (x4 over a 16 x 16 tile: lane ``l`` gives row ``l % 16``, column ``8 * (l // 16)``)
and the B fragment (x2 of a K x N tile with ``trans``) of the m16n8k16 ``mma``.

On the host, ``mma`` and ``ldmatrix`` are warp collectives of the block-synchronous lowering:
every lane publishes its registers (or its row address), then each lane computes its part
from the warp's, in the same layouts, the products summed in float32 in the order of k.
``cp_async`` copies at once on the host (commit and wait do nothing there).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from llvmlite import ir

from .. import types as T
from .api import (
    BFLOAT,
    I16,
    I32,
    I64,
    PTR,
    SHARED,
    Expr,
    Intrinsic,
    ll_type,
    register,
    type_words,
    warp_exchange,
    warp_word,
)


@dataclass(frozen=True)
class LdmatrixShape:
    """``kj.ldmatrix``'s static parameter: how many 8x8 matrices, transposed or not."""

    num: int
    trans: bool

    def __str__(self) -> str:
        return f"{self.num}{'t' if self.trans else ''}"


HALVES = (T.float16, T.bfloat16)
LDMATRIX_DTYPES = (T.float16, T.bfloat16, T.int16, T.uint16)
F32 = ir.FloatType()

# per input kind: (A elements, B elements, PTX shape, PTX type)
MMA_KINDS = {
    "bf16": (8, 4, "m16n8k16", "bf16"),
    "f16": (8, 4, "m16n8k16", "f16"),
    "tf32": (4, 2, "m16n8k8", "tf32"),
}


# --- arguments -----------------------------------------------------------------------------------

def bind_args(typer, node: ast.Call, name: str, params: tuple[str, ...], required: int) -> dict:
    """The argument nodes of a call by parameter name (positional or keyword)."""
    if len(node.args) > len(params):
        typer.error(f"{name}() takes at most {len(params)} arguments, got {len(node.args)}", node)
    bound = dict(zip(params, node.args))
    for kw in node.keywords:
        if kw.arg not in params:
            typer.error(f"{name}() has no argument {kw.arg!r}", kw.value)
        if kw.arg in bound:
            typer.error(f"{name}() got {kw.arg!r} twice", kw.value)
        bound[kw.arg] = kw.value
    missing = [p for p in params[:required] if p not in bound]
    if missing:
        typer.error(f"{name}() needs the argument {missing[0]!r}", node)
    return bound


def const_arg(typer, node, what: str, kinds=(int,)):
    e = typer.expr(node)
    if e.op != "const" or not isinstance(e.attr, kinds):
        typer.error(f"{what} must be a constant", node)
    return e.attr


def _fragment(typer, node, n: int, dtype: T.ScalarType, what: str) -> Expr:
    """Argument ``node`` as a tuple of ``n`` values of ``dtype`` (a tuple of weak literals is
    converted; typed elements must already be ``dtype``)."""
    e = typer.expr(node)
    tt = e.type
    if not isinstance(tt, T.TupleType) or len(tt.elements) != n:
        typer.error(f"{what} must be a tuple of {n} {dtype} values, got {type_words(tt)}", node)
    for i, et in enumerate(tt.elements):
        item = typer.tuple_item(e, i)
        if et != dtype and not (item.weak and isinstance(et, T.ScalarType)):
            typer.error(f"{what} must be a tuple of {n} {dtype} values; element {i} is {et}",
                        node)
    return typer.coerce(e, T.TupleType((dtype,) * n), node)


def _first_element_type(typer, node) -> T.Type | None:
    t = typer.expr(node).type
    return t.elements[0] if isinstance(t, T.TupleType) and t.elements else None


def _mma_typing(typer, node):
    args = bind_args(typer, node, "kj.mma", ("a", "b", "c"), 3)
    et = _first_element_type(typer, args["a"])
    kind = {T.bfloat16: "bf16", T.float16: "f16", T.float32: "tf32"}.get(et)
    if kind is None:
        typer.error("kj.mma() takes an A fragment of 8 bfloat16 or float16 values (m16n8k16) or "
                    f"of 4 float32 values (tf32, m16n8k8), got {type_words(typer.expr(args['a']).type)}",
                    args["a"])
    na, nb, _, _ = MMA_KINDS[kind]
    a = _fragment(typer, args["a"], na, et, "kj.mma()'s A fragment")
    b = _fragment(typer, args["b"], nb, et, "kj.mma()'s B fragment")
    c = _fragment(typer, args["c"], 4, T.float32, "kj.mma()'s C fragment")
    return typer.intrinsic(f"tc.mma.{kind}", T.TupleType((T.float32,) * 4), (a, b, c), node)


def _ldmatrix_typing(typer, node):
    args = bind_args(typer, node, "kj.ldmatrix", ("ary", "index", "num", "trans"), 2)
    arr = typer.expr(args["ary"])
    if not isinstance(arr.type, T.ArrayType) or arr.type.dtype not in LDMATRIX_DTYPES:
        typer.error("kj.ldmatrix() needs a shared array of 16-bit elements (float16, bfloat16, "
                    f"int16, uint16), got {type_words(arr.type)}", args["ary"])
    num = const_arg(typer, args["num"], "kj.ldmatrix()'s num") if "num" in args else 4
    if num not in (1, 2, 4):
        typer.error(f"kj.ldmatrix() loads 1, 2 or 4 matrices, got num={num}", args["num"])
    trans = const_arg(typer, args["trans"], "kj.ldmatrix()'s trans", (bool,)) \
        if "trans" in args else False
    indices = _indices(typer, arr, args["index"], node, "kj.ldmatrix")
    rt = T.TupleType((arr.type.dtype,) * (2 * num))
    return typer.intrinsic("tc.ldmatrix", rt, (arr, *indices), node,
                           param=LdmatrixShape(num, trans))


def _indices(typer, arr: Expr, idx_node, node, name: str) -> tuple[Expr, ...]:
    indices = typer.index_exprs(arr, idx_node, node)
    if len(indices) != arr.type.ndim:
        typer.error(f"{name}() needs {arr.type.ndim} indices for a {arr.type.ndim}-d array",
                    idx_node)
    return indices


def _cp_async_typing(typer, node):
    args = bind_args(typer, node, "kj.cp_async",
                     ("dst", "dst_index", "src", "src_index", "size", "src_size"), 4)
    dst, src = typer.expr(args["dst"]), typer.expr(args["src"])
    for e, key in ((dst, "dst"), (src, "src")):
        if not isinstance(e.type, T.ArrayType):
            typer.error(f"kj.cp_async()'s {key} must be an array, got {type_words(e.type)}",
                        args[key])
    size = const_arg(typer, args["size"], "kj.cp_async()'s size") if "size" in args else 16
    if size not in (4, 8, 16):
        typer.error(f"kj.cp_async() copies 4, 8 or 16 bytes, got size={size}", args["size"])
    if "src_size" in args:
        n = typer.expr(args["src_size"])
        if not (isinstance(n.type, T.ScalarType) and n.type.is_int):
            typer.error(f"kj.cp_async()'s src_size must be an integer, got {type_words(n.type)}",
                        args["src_size"])
        if n.op == "const" and not 0 <= n.attr <= size:
            typer.error(f"kj.cp_async()'s src_size must be 0 to {size}, got {n.attr}",
                        args["src_size"])
        n = typer.coerce(n, T.uint32, node)
    else:
        n = Expr("const", T.uint32, attr=size, loc=typer.loc(node))
    d_idx = _indices(typer, dst, args["dst_index"], node, "kj.cp_async")
    s_idx = _indices(typer, src, args["src_index"], node, "kj.cp_async")
    return typer.intrinsic("tc.cp_async", T.void, (dst, *d_idx, src, *s_idx, n), node,
                           param=size)


def _commit_typing(typer, node):
    bind_args(typer, node, "kj.cp_async_commit", (), 0)
    return typer.intrinsic("tc.cp_async_commit", T.void, (), node)


def _wait_typing(typer, node):
    args = bind_args(typer, node, "kj.cp_async_wait", ("n",), 0)
    n = const_arg(typer, args["n"], "kj.cp_async_wait()'s n") if "n" in args else 0
    if not 0 <= n <= 7:
        typer.error(f"kj.cp_async_wait() waits until 0 to 7 groups are pending, got {n}",
                    args["n"])
    return typer.intrinsic("tc.cp_async_wait", T.void, (), node, param=n)


# --- operand checks --------------------------------------------------------------------------------

def _mma_operands(kind: str):
    na, nb, _, _ = MMA_KINDS[kind]
    et = {"bf16": T.bfloat16, "f16": T.float16, "tf32": T.float32}[kind]
    want = (T.TupleType((et,) * na), T.TupleType((et,) * nb), T.TupleType((T.float32,) * 4))

    def check(e: Expr) -> str | None:
        got = tuple(a.type for a in e.args)
        if got != want:
            return f"operands are {', '.join(map(str, got))}, expected {', '.join(map(str, want))}"
        return None if e.type == want[2] else f"result is {e.type}, expected {want[2]}"
    return check


def _ldmatrix_operands(e: Expr) -> str | None:
    at = e.args[0].type if e.args else None
    if not isinstance(at, T.ArrayType) or at.dtype not in LDMATRIX_DTYPES:
        return "operand 0 must be an array of 16-bit elements"
    if len(e.args) != 1 + at.ndim or not all(a.type.is_int for a in e.args[1:]):
        return f"takes an array and {at.ndim} integer indices"
    want = T.TupleType((at.dtype,) * (2 * e.param.num))
    return None if e.type == want else f"result is {e.type}, expected {want}"


def _cp_async_split(e: Expr):
    """(dst, dst indices, src, src indices, src_size) of a cp_async node."""
    dst = e.args[0]
    k = 1 + dst.type.ndim
    src = e.args[k]
    return dst, e.args[1:k], src, e.args[k + 1:k + 1 + src.type.ndim], e.args[-1]


def _cp_async_operands(e: Expr) -> str | None:
    if not e.args or not isinstance(e.args[0].type, T.ArrayType):
        return "operand 0 must be an array"
    k = 1 + e.args[0].type.ndim
    if len(e.args) <= k or not isinstance(e.args[k].type, T.ArrayType):
        return f"operand {k} must be an array"
    if len(e.args) != k + e.args[k].type.ndim + 2 or e.args[-1].type != T.uint32:
        return "takes dst, its indices, src, its indices and a uint32 byte count"
    return None if e.type == T.void else "result must be void"


def _no_operands(e: Expr) -> str | None:
    return None if not e.args and e.type == T.void else "takes no operands and gives void"


# --- the GPU ---------------------------------------------------------------------------------------

def _element_bits(b: ir.IRBuilder, v):
    """A 16-bit element as i32 (zero-extended)."""
    return b.zext(b.bitcast(v, I16) if not isinstance(v.type, ir.IntType) else v, I32)


def _pack_pairs(fl, tup, n: int) -> list:
    """A tuple of ``2n`` 16-bit elements as ``n`` i32 registers (element 2i in the low half)."""
    b = fl.builder
    out = []
    for i in range(n):
        lo = _element_bits(b, b.extract_value(tup, 2 * i))
        hi = _element_bits(b, b.extract_value(tup, 2 * i + 1))
        out.append(b.or_(lo, b.shl(hi, ir.Constant(I32, 16))))
    return out


def _unpack_pair(b: ir.IRBuilder, word, ty: ir.Type) -> list:
    halves = [b.trunc(word, I16), b.trunc(b.lshr(word, ir.Constant(I32, 16)), I16)]
    return halves if isinstance(ty, ir.IntType) else [b.bitcast(h, ty) for h in halves]


def _build_tuple(fl, t: T.TupleType, values: list):
    b = fl.builder
    agg = ir.Constant(ll_type(t), ir.Undefined)
    for i, v in enumerate(values):
        agg = b.insert_value(agg, v, i)
    return agg


def _mma_registers(fl, e: Expr, kind: str) -> list:
    """The i32 registers of A and B, then the four float32 of C."""
    b = fl.builder
    na, nb, _, _ = MMA_KINDS[kind]
    a, bb, c = (fl.expr(x) for x in e.args)
    if kind == "tf32":
        regs = [b.bitcast(b.extract_value(a, i), I32) for i in range(na)]
        regs += [b.bitcast(b.extract_value(bb, i), I32) for i in range(nb)]
    else:
        regs = _pack_pairs(fl, a, na // 2) + _pack_pairs(fl, bb, nb // 2)
    return regs + [b.extract_value(c, i) for i in range(4)]


def _nvptx_mma(kind: str):
    _, _, shape, ptype = MMA_KINDS[kind]

    def lower(fl, e: Expr):
        regs = _mma_registers(fl, e, kind)
        nab = len(regs) - 4
        na = 4
        ops = [f"${i}" for i in range(4 + len(regs))]
        text = (f"mma.sync.aligned.{shape}.row.col.f32.{ptype}.{ptype}.f32 "
                f"{{{','.join(ops[0:4])}}}, {{{','.join(ops[4:4 + na])}}}, "
                f"{{{','.join(ops[4 + na:4 + nab])}}}, {{{','.join(ops[4 + nab:])}}};")
        constraints = ",".join(["=f"] * 4 + ["r"] * nab + ["f"] * 4)
        out_ty = ir.LiteralStructType([F32] * 4)
        asm = ir.InlineAsm(ir.FunctionType(out_ty, [r.type for r in regs]), text, constraints,
                           side_effect=False)
        res = fl.builder.call(asm, regs, attrs=("convergent",))
        return _build_tuple(fl, e.type, [fl.builder.extract_value(res, i) for i in range(4)])
    return lower


def _shared_address(fl, ptr):
    """A generic pointer into shared memory as a 32-bit shared-window address."""
    b = fl.builder
    return b.ptrtoint(b.addrspacecast(ptr, ir.PointerType(addrspace=SHARED)), I32)


def _element_pointer(fl, arr_e: Expr, idx_exprs) -> ir.Value:
    arr = fl.expr(arr_e)
    return fl.element_pointer(arr, arr_e.type, [fl.expr(i) for i in idx_exprs], idx_exprs,
                              arr_e.loc)


def _ldmatrix_shape(e: Expr) -> tuple[int, bool]:
    return e.param.num, e.param.trans


def _nvptx_ldmatrix(fl, e: Expr):
    b = fl.builder
    num, trans = _ldmatrix_shape(e)
    addr = _shared_address(fl, _element_pointer(fl, e.args[0], e.args[1:]))
    outs = ",".join(f"${i}" for i in range(num))
    text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
            f"{{{outs}}}, [${num}];")
    out_ty = I32 if num == 1 else ir.LiteralStructType([I32] * num)
    asm = ir.InlineAsm(ir.FunctionType(out_ty, [I32]), text, ",".join(["=r"] * num + ["r"]),
                       side_effect=True)  # it reads memory: keep it between the barriers
    res = b.call(asm, [addr], attrs=("convergent",))
    words = [res] if num == 1 else [b.extract_value(res, i) for i in range(num)]
    ety = ll_type(e.args[0].type.dtype)
    return _build_tuple(fl, e.type, [h for w in words for h in _unpack_pair(b, w, ety)])


def _nvptx_cp_async(fl, e: Expr):
    b = fl.builder
    size = e.param
    dst, d_idx, src, s_idx, n = _cp_async_split(e)
    d = _shared_address(fl, _element_pointer(fl, dst, d_idx))
    s = _element_pointer(fl, src, s_idx)
    # .cg (L2 only) exists for 16 bytes; smaller copies go through L1 (.ca)
    cache = "cg" if size == 16 else "ca"
    text = f"cp.async.{cache}.shared.global [$0], [$1], {size}, $2;"
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [I32, PTR, I32]), text, "r,l,r,~{memory}",
                       side_effect=True)
    b.call(asm, [d, s, fl.expr(n)])


def _nvptx_asm_statement(text_of):
    def lower(fl, e: Expr):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text_of(e), "~{memory}",
                           side_effect=True)
        fl.builder.call(asm, [])
    return lower


# --- the host ----------------------------------------------------------------------------------------

def _c64(v: int):
    return ir.Constant(I64, v)


def _host_ldmatrix(bl, target, e: Expr):
    b = bl.builder
    num, trans = _ldmatrix_shape(e)
    ety = ll_type(e.args[0].type.dtype)

    def publish():
        return [b.ptrtoint(_element_pointer(bl, e.args[0], e.args[1:]), I64)]

    def load16(addr):
        v = b.load(b.inttoptr(addr, PTR), typ=I16)
        return v if isinstance(ety, ir.IntType) else b.bitcast(v, ety)

    def compute(buf, t):
        lane, word = warp_word(b, buf, t, bl.n, 1)
        g, q = b.lshr(lane, _c64(2)), b.and_(lane, _c64(3))
        values = []
        for m in range(num):
            for h in range(2):
                if trans:  # M[2q + h, g]: row 2q + h comes from lane 8m + 2q + h
                    row = b.add(_c64(8 * m + h), b.mul(q, _c64(2)))
                    values.append(load16(b.add(word(row, 0), b.mul(g, _c64(2)))))
                else:  # M[g, 2q + h]
                    col = b.add(b.mul(q, _c64(4)), _c64(2 * h))
                    values.append(load16(b.add(word(b.add(g, _c64(8 * m)), 0), col)))
        return _build_tuple(bl, e.type, values)
    warp_exchange(bl, target, 1, publish, compute)


def _mma_registers_count(kind: str) -> tuple[int, int]:
    na, nb, _, _ = MMA_KINDS[kind]
    return (na, nb) if kind == "tf32" else (na // 2, nb // 2)


def _host_mma_function(mod, kind: str, result_ty: ir.Type) -> ir.Function:
    """``{float x 4} (buffer, thread, threads)``: one lane's D from its warp's published A, B
    and C registers. One function a module (not inlined: a GEMM has dozens of mma)."""
    name = f"kaiojit.host.mma.{kind}"
    fn = mod.module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(mod.module, ir.FunctionType(result_ty, [PTR, I64, I64]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    buf, t, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    na_regs, nb_regs = _mma_registers_count(kind)
    count = na_regs + nb_regs + 4
    k_dim = 8 if kind == "tf32" else 16
    lane, word = warp_word(b, buf, t, n, count)

    def element(word64, k: int):
        w = b.trunc(word64, I32)
        if kind == "tf32":  # the tensor core reads 19 bits: sign, exponent, 10 of mantissa
            return b.bitcast(b.and_(w, ir.Constant(I32, 0xFFFFE000)), F32)
        half = b.trunc(b.lshr(w, ir.Constant(I32, 16 * (k % 2))), I16)
        return b.fpext(b.bitcast(half, BFLOAT if kind == "bf16" else ir.HalfType()), F32)

    def where(k: int) -> tuple[int, int]:
        """(lane offset within the group of 4, register step) of element k along K."""
        if kind == "tf32":
            return k % 4, k // 4
        return (k % 8) // 2, k // 8

    g, q = b.lshr(lane, _c64(2)), b.and_(lane, _c64(3))
    a_rows = []
    for hi in (0, 1):  # rows g and g + 8 of A
        a_rows.append([element(word(b.add(b.mul(g, _c64(4)), _c64(where(k)[0])),
                                    hi + 2 * where(k)[1]), k) for k in range(k_dim)])
    b_cols = []
    for h in (0, 1):  # columns 2q and 2q + 1 of B
        col = b.add(b.mul(q, _c64(2)), _c64(h))
        b_cols.append([element(word(b.add(b.mul(col, _c64(4)), _c64(where(k)[0])),
                                    na_regs + where(k)[1]), k) for k in range(k_dim)])
    out = ir.Constant(result_ty, ir.Undefined)
    for r in range(4):  # d[r] = C[g + 8 (r // 2), 2q + r % 2] + sum over k, in order
        acc = b.bitcast(b.trunc(word(lane, na_regs + nb_regs + r), I32), F32)
        for k in range(k_dim):
            acc = b.fadd(acc, b.fmul(a_rows[r // 2][k], b_cols[r % 2][k]))
        out = b.insert_value(out, acc, r)
    b.ret(out)
    return fn


def _host_mma(kind: str):
    na_regs, nb_regs = _mma_registers_count(kind)

    def lower(bl, target, e: Expr):
        b = bl.builder

        def publish():
            regs = _mma_registers(bl, e, kind)
            return [b.zext(b.bitcast(r, I32) if r.type == F32 else r, I64) for r in regs]

        fn = _host_mma_function(bl.mod, kind, ll_type(e.type))
        warp_exchange(bl, target, na_regs + nb_regs + 4, publish,
                      lambda buf, t: b.call(fn, [buf, t, bl.n]))
    return lower


def _host_cp_async(fl, e: Expr):
    b = fl.builder
    size = e.param
    dst, d_idx, src, s_idx, n = _cp_async_split(e)
    d = _element_pointer(fl, dst, d_idx)
    s = _element_pointer(fl, src, s_idx)
    count = b.zext(fl.expr(n), I64)
    count = b.select(b.icmp_unsigned(">", count, _c64(size)), _c64(size), count)
    copy = fl.mod.declare("llvm.memcpy.p0.p0.i64", ir.VoidType(), [PTR, PTR, I64, ir.IntType(1)])
    fill = fl.mod.declare("llvm.memset.p0.i64", ir.VoidType(),
                          [PTR, ir.IntType(8), I64, ir.IntType(1)])
    false = ir.Constant(ir.IntType(1), 0)
    b.call(copy, [d, s, count, false])
    rest = b.gep(d, [count], source_etype=ir.IntType(8))
    b.call(fill, [rest, ir.Constant(ir.IntType(8), 0), b.sub(_c64(size), count), false])


def _host_nothing(fl, e: Expr):
    return None


# --- declarations ------------------------------------------------------------------------------------

for _kind in MMA_KINDS:
    register(Intrinsic(
        name=f"tc.mma.{_kind}", operands=_mma_operands(_kind),
        lowering={"nvptx": _nvptx_mma(_kind), "host": _host_mma(_kind)},
        calls={"kj.mma": _mma_typing} if _kind == "bf16" else None,
        warp=True, convergent=True, min_arch="sm_80"))
register(Intrinsic(
    name="tc.ldmatrix", operands=_ldmatrix_operands,
    lowering={"nvptx": _nvptx_ldmatrix, "host": _host_ldmatrix},
    calls={"kj.ldmatrix": _ldmatrix_typing}, warp=True, convergent=True, min_arch="sm_75",
    param=LdmatrixShape))
register(Intrinsic(
    name="tc.cp_async", operands=_cp_async_operands,
    lowering={"nvptx": _nvptx_cp_async, "host": _host_cp_async},
    calls={"kj.cp_async": _cp_async_typing}, writes=(0,), min_arch="sm_80", param=int))
register(Intrinsic(
    name="tc.cp_async_commit", operands=_no_operands,
    lowering={"nvptx": _nvptx_asm_statement(lambda e: "cp.async.commit_group;"),
              "host": _host_nothing},
    calls={"kj.cp_async_commit": _commit_typing}, min_arch="sm_80"))
register(Intrinsic(
    name="tc.cp_async_wait", operands=_no_operands,
    lowering={"nvptx": _nvptx_asm_statement(
        lambda e: f"cp.async.wait_group {e.param};"),
        "host": _host_nothing},
    calls={"kj.cp_async_wait": _wait_typing}, min_arch="sm_80", param=int))
