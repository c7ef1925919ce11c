"""Warpgroup matrix multiply-accumulate for sm_90a: ``kj.wgmma.fence()``, ``commit_group()``,
``wait_group(n[, acc])``, ``descriptor(shared_array, ...)``, ``mma_async(acc, desc_a, desc_b,
shape=(64, N, 16), ...)`` and ``fence_proxy_async()``.

A wgmma is issued by the 128 threads of a warpgroup (four consecutive warps) together: A and B
are read from shared memory through 64-bit matrix descriptors, D is a register fragment of
N/2 float32 per thread (a ``kj.local.array(N // 2, kj.float32)``). These instructions exist on
sm_90a only (``min_arch='sm_90a'``): a kernel that uses them is compiled for sm_90a when its
arch is sm_90, and is a located error on any other arch.

On the GPU each is inline PTX; the accumulator travels through the asm as tied ``+f``
registers, so LLVM keeps it in registers when every index of it is constant. On the host
(``kaiojit/lower/wgmma_host.py``) ``mma_async`` computes the thread's fragment at once from
shared memory (reading the operands at issue time is one of the orders the GPU allows), and the
fences, commits and waits have nothing left to order.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from llvmlite import ir

from .. import language as L
from .. import types as T
from .api import (ARRAY, I32, I64, Expr, Intrinsic, Kind, Operands, PyObj, const_int, const_shape,
                  dtype_arg, family_state, inline_asm, register, scalar_arg, type_words, wgmma_host)

ARCH = "sm_90a"
F32 = ir.FloatType()
M, K = 64, 16  # a wgmma of 16-bit inputs is m64nNk16, of 8-bit ones m64nNk32 (32 bytes of K)
# the input types: PTX's name -> kaiojit's type
INPUT_TYPES = {"f16": T.float16, "bf16": T.bfloat16, "e4m3": T.float8_e4m3fn,
               "e5m2": T.float8_e5m2}
K_BYTES = 32  # a wgmma's K slice is 32 bytes of either operand: k16 of 16-bit, k32 of fp8


def k_of(dtype: str) -> int:
    """The K of one wgmma of this input type (PTX's name): 16 or 32."""
    return K_BYTES // INPUT_TYPES[dtype].itemsize
SWIZZLE_MODES = {None: 0, 128: 1, 64: 2, 32: 3}  # bytes -> the descriptor's bits 62-63
MAX_WAIT_GROUP = 7  # wgmma.wait_group takes an immediate; 7 in flight is already more than used
ACC = Kind("a 1-d float32 array", lambda t: isinstance(t, T.ArrayType)
           and t.dtype == T.float32 and t.ndim == 1)


# --- typing --------------------------------------------------------------------------------------

def _bind(typer, node: ast.Call, name: str, params: tuple[str, ...], required: int) -> dict:
    """The call's arguments by parameter name (positional, then keywords): a located error for
    too many, unknown, repeated or missing ones."""
    if len(node.args) > len(params):
        typer.error(f"{name}() takes at most {len(params)} positional arguments, got "
                    f"{len(node.args)}", node)
    bound = dict(zip(params, node.args))
    for kw in node.keywords:
        if kw.arg not in params:
            typer.error(f"{name}() has no argument {kw.arg!r}; it takes "
                        f"{', '.join(params)}", kw.value)
        if kw.arg in bound:
            typer.error(f"{name}() got {kw.arg!r} twice", kw.value)
        bound[kw.arg] = kw.value
    for p in params[:required]:
        if p not in bound:
            typer.error(f"{name}() needs the argument {p!r}", node)
    return bound


def _int_operand(typer, node, what: str, t: T.ScalarType) -> Expr:
    e = typer.expr(node)
    st = scalar_arg(typer, e, node, what)
    if not (st.is_int or st.is_bool):
        typer.error(f"{what} needs an integer, got {st}", node)
    return typer.coerce(e, t, node)


def _plain_typing(op: str):
    user = f"kj.wgmma.{op}"

    def typing(typer, node):
        _bind(typer, node, user, (), 0)
        return typer.intrinsic(f"wgmma.{op}", T.void, (), node)
    return typing


def _wait_typing(typer, node):
    user = "kj.wgmma.wait_group"
    args = _bind(typer, node, user, ("n", "acc"), 1)
    n = const_int(typer, args["n"], f"{user}()'s n")
    if not 0 <= n <= MAX_WAIT_GROUP:
        typer.error(f"{user}() takes n from 0 to {MAX_WAIT_GROUP}, got {n}", args["n"])
    if "acc" not in args:
        return typer.intrinsic("wgmma.wait_group", T.void, (), node, param=WaitGroup(n))
    acc = typer.expr(args["acc"])
    regs = _acc_registers(typer).get(acc.attr) if acc.op == "var" else None
    if regs is None:
        typer.error(f"{user}(n, acc): acc must be the accumulator (a variable) of a "
                    "kj.wgmma.mma_async above", args["acc"])
    return typer.intrinsic("wgmma.wait_group", T.void, (acc,), node, param=WaitGroup(n, regs))


def _acc_registers(typer) -> dict:
    """accumulator variable -> its registers, as the mma_async calls typed so far give them."""
    return family_state(typer, "wgmma", dict)


def _descriptor_typing(typer, node):
    user = "kj.wgmma.descriptor"
    args = _bind(typer, node, user, ("array", "offset", "swizzle", "leading_byte_offset",
                                     "stride_byte_offset"), 1)
    arr = typer.expr(args["array"])
    if not isinstance(arr.type, T.ArrayType):
        typer.error(f"{user}() needs a shared array, got {type_words(arr.type)}", args["array"])
    if arr.type.layout != "C":
        typer.error(f"{user}() needs a C-contiguous shared array (kj.shared.array), got "
                    f"{arr.type}", args["array"])
    swizzle = None
    if "swizzle" in args:
        sw = args["swizzle"]
        literal_none = isinstance(sw, ast.Constant) and sw.value is None
        seen = None if literal_none else typer.visit(sw)
        if not (literal_none or isinstance(seen, PyObj) and seen.value is None):
            swizzle = const_int(typer, sw, f"{user}()'s swizzle")
        if swizzle not in SWIZZLE_MODES:
            typer.error(f"{user}() takes swizzle=128, 64, 32 or None, got {swizzle}", sw)
    operands = [arr]
    for key, default in (("offset", 0), ("leading_byte_offset", 16),
                         ("stride_byte_offset", 1024)):
        if key in args:
            e = _int_operand(typer, args[key], f"{user}()'s {key}", T.int64)
            if key != "offset" and e.op == "const" and (e.attr % 16 or not
                                                        0 <= e.attr < 1 << 18):
                typer.error(f"{user}()'s {key} must be a multiple of 16 below 2**18 (the "
                            f"descriptor keeps bits 4 to 17), got {e.attr}", args[key])
        else:
            e = Expr("const", T.int64, attr=default, loc=typer.loc(node))
        operands.append(e)
    return typer.intrinsic("wgmma.descriptor", T.uint64, operands, node,
                           param=SWIZZLE_MODES[swizzle])


def _mma_typing(typer, node):
    user = "kj.wgmma.mma_async"
    params = ("acc", "desc_a", "desc_b", "shape", "dtype", "scale_d", "scale_a", "scale_b",
              "trans_a", "trans_b")
    args = _bind(typer, node, user, params, 4)
    dtype = dtype_arg(typer, args["dtype"]) if "dtype" in args else T.float16
    names = {t: name for name, t in INPUT_TYPES.items()}
    if dtype not in names:
        typer.error(f"{user}() multiplies {', '.join(map(str, INPUT_TYPES.values()))} "
                    f"inputs, got {dtype}", args["dtype"])
    k = k_of(names[dtype])
    shape = const_shape(typer, args["shape"])
    if len(shape) != 3 or shape[0] != M or shape[2] != k or not (
            8 <= shape[1] <= 256 and shape[1] % 8 == 0):
        typer.error(f"{user}() takes shape=(64, N, {k}) with N a multiple of 8 from 8 to 256 "
                    f"for {dtype} inputs, got {shape}", args["shape"])
    n = shape[1]
    acc = typer.expr(args["acc"])
    if not ACC.test(acc.type) or acc.type.layout != "C":
        typer.error(f"{user}() accumulates into a 1-d float32 local array of N/2 = {n // 2} "
                    f"elements (kj.local.array({n // 2}, kj.float32)), got "
                    f"{type_words(acc.type)}", args["acc"])
    imm = {}
    for key, allowed in (("scale_a", (1, -1)), ("scale_b", (1, -1)), ("trans_a", (0, 1)),
                         ("trans_b", (0, 1))):
        imm[key] = const_int(typer, args[key], f"{user}()'s {key}") if key in args \
            else allowed[0]
        if imm[key] not in allowed:
            typer.error(f"{user}()'s {key} must be {' or '.join(map(str, allowed))}, got "
                        f"{imm[key]}", args[key])
        if key.startswith("trans") and imm[key]:
            typer.error(f"{user}(): {key}=1 (an MN-major operand) is not supported yet; store "
                        "the operand K-major", args[key])
    scale_d = _int_operand(typer, args["scale_d"], f"{user}()'s scale_d", T.int32) \
        if "scale_d" in args else Expr("const", T.int32, attr=1, loc=typer.loc(node))
    descs = [_int_operand(typer, args[k], f"{user}()'s {k}", T.uint64)
             for k in ("desc_a", "desc_b")]
    if acc.op == "var":
        _acc_registers(typer)[acc.attr] = n // 2
    variant = MmaVariant(n, names[dtype], imm["scale_a"], imm["scale_b"], imm["trans_a"],
                         imm["trans_b"])
    return typer.intrinsic("wgmma.mma_async", T.void, (acc, *descs, scale_d), node,
                           param=variant)


@dataclass(frozen=True)
class WaitGroup:
    """``kj.wgmma.wait_group``'s static parameters: the groups that may stay pending, and
    the accumulator's register count when one is named (None otherwise)."""

    n: int
    regs: int | None = None

    def __str__(self) -> str:
        return f"{self.n}" if self.regs is None else f"{self.n}:{self.regs}"


@dataclass(frozen=True)
class MmaVariant:
    """``kj.wgmma.mma_async``'s static parameters: the tile's N, the input type's PTX name,
    the scales of A and B (1 or -1) and their transposes (0: K-major)."""

    n: int
    dtype: str
    scale_a: int
    scale_b: int
    trans_a: int
    trans_b: int

    def __str__(self) -> str:
        return (f"m{M}n{self.n}k{k_of(self.dtype)}.{self.dtype}.{self.scale_a}.{self.scale_b}."
                f"{self.trans_a}.{self.trans_b}")

    def fields(self) -> dict:
        """The parameters by name (what ``lower/wgmma_host.py`` reads)."""
        return {"n": self.n, "dtype": self.dtype, "scale_a": self.scale_a,
                "scale_b": self.scale_b, "trans_a": self.trans_a, "trans_b": self.trans_b}


# --- the GPU -------------------------------------------------------------------------------------

def _nvptx_plain(text: str):
    def lower(fl, e: Expr):
        inline_asm(fl, ir.VoidType(), text, "~{memory}", [], convergent=True)
    return lower


def _acc_pointers(fl, e: Expr, regs: int) -> list:
    b = fl.builder
    data = b.extract_value(fl.expr(e.args[0]), 0)
    return [b.gep(data, [ir.Constant(I64, i)], source_etype=F32) for i in range(regs)]


def _tied_asm(fl, text: str, ptrs: list, inputs: list, input_constraints: list[str]):
    """Inline PTX whose first ``len(ptrs)`` operands are float registers read and written
    (``+f``, as tied pairs): loaded from ``ptrs`` before, stored back after."""
    b = fl.builder
    regs = len(ptrs)
    values = [b.load(p, typ=F32) for p in ptrs]
    ret = ir.LiteralStructType([F32] * regs) if regs > 1 else F32
    constraints = ["=f"] * regs + input_constraints + [str(i) for i in range(regs)]
    out = inline_asm(fl, ret if regs else ir.VoidType(), text,
                     ",".join(constraints + ["~{memory}"]), inputs + values, convergent=True)
    for i, p in enumerate(ptrs):
        b.store(b.extract_value(out, i) if regs > 1 else out, p)


def _nvptx_wait(fl, e: Expr):
    text = f"wgmma.wait_group.sync.aligned {e.param.n};"
    if e.param.regs is None:
        inline_asm(fl, ir.VoidType(), text, "~{memory}", [], convergent=True)
        return
    _tied_asm(fl, text, _acc_pointers(fl, e, e.param.regs), [], [])


def _shared_address(fl, e: Expr):
    """The operand's address in the CTA's shared window (what cvta.to.shared gives), as i64."""
    b = fl.builder
    ptr = _array_address(fl, e)
    shared = b.addrspacecast(ptr, ir.PointerType(addrspace=3))
    return b.zext(b.ptrtoint(shared, I32), I64)


def _array_address(fl, e: Expr):
    b = fl.builder
    arr = fl.expr(e.args[0])
    data = b.extract_value(arr, 0)
    itemsize = e.args[0].type.dtype.itemsize
    offset = b.mul(fl.expr(e.args[1]), ir.Constant(I64, itemsize))
    return b.gep(data, [offset], source_etype=ir.IntType(8))


def _descriptor(fl, e: Expr, address):
    """The 64-bit matrix descriptor: start address >> 4 in bits 0-13, leading byte offset >> 4
    in 16-29, stride byte offset >> 4 in 32-45, the swizzle mode in 62-63 (PTX ISA, "matrix
    descriptor"); the base offset (bits 49-51) is 0: swizzled tiles are 1024-byte aligned."""
    b = fl.builder
    mask = ir.Constant(I64, 0x3FFF)

    def field(v, shift):
        v = b.and_(b.lshr(v, ir.Constant(I64, 4)), mask)
        return b.shl(v, ir.Constant(I64, shift)) if shift else v

    lbo, sbo = fl.expr(e.args[2]), fl.expr(e.args[3])
    mode = e.param
    desc = b.or_(b.or_(field(address, 0), field(lbo, 16)), field(sbo, 32))
    return b.or_(desc, ir.Constant(I64, mode << 62))


def _nvptx_descriptor(fl, e: Expr):
    return _descriptor(fl, e, _shared_address(fl, e))


def _nvptx_mma(fl, e: Expr):
    v = e.param.fields()
    regs = v["n"] // 2
    outs = ", ".join(f"${i}" for i in range(regs))
    a, bd, sd = regs, regs + 1, regs + 2
    # fp8 operands are K-major only: PTX's form has no transpose immediates for them
    trans = "" if k_of(v["dtype"]) != K else f", {v['trans_a']}, {v['trans_b']}"
    text = ("{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${sd}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m{M}n{v['n']}k{k_of(v['dtype'])}.f32.{v['dtype']}."
            f"{v['dtype']} {{{outs}}}, ${a}, ${bd}, p, {v['scale_a']}, {v['scale_b']}{trans};\n}}")
    descs = [fl.expr(x) for x in e.args[1:4]]
    _tied_asm(fl, text, _acc_pointers(fl, e, regs), descs, ["l", "l", "r"])


# --- the host ------------------------------------------------------------------------------------

def _host_nothing(fl, e: Expr):
    return None


def _host_descriptor(fl, e: Expr):
    return _descriptor(fl, e, wgmma_host.shared_offset(fl, _array_address(fl, e)))


def _host_mma(fl, e: Expr):
    v = e.param.fields()
    b = fl.builder
    data = b.extract_value(fl.expr(e.args[0]), 0)
    da, db, sd = (fl.expr(x) for x in e.args[1:4])
    wgmma_host.mma(fl, v, INPUT_TYPES[v["dtype"]], data, da, db, sd)


# --- declarations --------------------------------------------------------------------------------

# the proxy fence (generic-proxy shared stores before an async-proxy read) is sm_90's, not 90a's
for _op, _ptx, _arch in (("fence", "wgmma.fence.sync.aligned;", ARCH),
                         ("commit_group", "wgmma.commit_group.sync.aligned;", ARCH),
                         ("fence_proxy_async", "fence.proxy.async.shared::cta;", "sm_90")):
    register(Intrinsic(
        name=f"wgmma.{_op}", operands=Operands(result=T.void),
        lowering={"nvptx": _nvptx_plain(_ptx), "host": _host_nothing},
        calls={getattr(L.wgmma, _op): _plain_typing(_op)}, convergent=True, min_arch=_arch))
register(Intrinsic(
    name="wgmma.wait_group", operands=Operands(result=T.void, rest=ACC),
    lowering={"nvptx": _nvptx_wait, "host": _host_nothing},
    calls={L.wgmma.wait_group: _wait_typing}, convergent=True, min_arch=ARCH,
    param=WaitGroup))
register(Intrinsic(
    name="wgmma.descriptor", operands=Operands(ARRAY, T.int64, T.int64, T.int64,
                                               result=T.uint64),
    lowering={"nvptx": _nvptx_descriptor, "host": _host_descriptor},
    calls={L.wgmma.descriptor: _descriptor_typing}, pure=True, min_arch=ARCH, param=int))
register(Intrinsic(
    name="wgmma.mma_async", operands=Operands(ACC, T.uint64, T.uint64, T.int32, result=T.void),
    lowering={"nvptx": _nvptx_mma, "host": _host_mma},
    calls={L.wgmma.mma_async: _mma_typing}, convergent=True, writes=(0,), min_arch=ARCH,
    param=MmaVariant))

__all__ = ["ARCH", "INPUT_TYPES", "SWIZZLE_MODES", "MmaVariant", "WaitGroup"]
