"""bfloat16 conversions with a rounding mode, and its bits: ``cuda.bf16``'s
``int32_to_bfloat16_rz``, ``bfloat16_to_uint16_ru``, ``float64_to_bfloat16``,
``bfloat16_as_int16``, ... (numba-cuda's names for CUDA's ``__int2bfloat16_rz`` and friends).

Every conversion rounds once, in the mode its name says (``rn`` nearest, ties to even; ``rz``
toward zero; ``rd`` down; ``ru`` up), the same on every target, from the bits:

* to bfloat16: the source is first made a float32 that *rounds to odd* (truncated, its last bit
  set where anything was dropped), then that float32 is rounded to bfloat16 in the mode. A
  float32 has 24 bits and a bfloat16 8, so rounding to odd first never changes the final
  rounding in any mode. Integers beyond 2**53 get to float64 the same way (rounded to odd).
  NaN gives 0x7FFF, as the GPU's ``cvt`` does.
* from bfloat16 to an integer: exact in float32, rounded to an integer in the mode, then
  converted with saturation (NaN gives 0, out-of-range values the nearest bound), as CUDA's
  ``__bfloat162int_rn`` and friends do.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..language import KernelBuiltin
from .api import (ANY_TARGET, SCALAR, Expr, Intrinsic, Operands, call_args, convert, ll_type,
                  math_call, register, scalar_arg)

MODES = ("rn", "rz", "rd", "ru")
_INT_ROUND = {"rn": "rint", "rz": "trunc", "rd": "floor", "ru": "ceil"}
I16, I32, I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()

# numba's name -> (source type, result type, mode); "as" = the same 16 bits
CONVERSIONS: dict[str, tuple[T.ScalarType, T.ScalarType, str]] = {}
for _t in (T.int16, T.int32, T.int64, T.uint16, T.uint32, T.uint64):
    for _m in MODES:
        CONVERSIONS[f"{_t}_to_bfloat16_{_m}"] = (_t, T.bfloat16, _m)
        CONVERSIONS[f"bfloat16_to_{_t}_{_m}"] = (T.bfloat16, _t, _m)
for _t in (T.int8, T.uint8):
    CONVERSIONS[f"bfloat16_to_{_t}_rz"] = (T.bfloat16, _t, "rz")
for _m in MODES:
    CONVERSIONS[f"float32_to_bfloat16_{_m}"] = (T.float32, T.bfloat16, _m)
    CONVERSIONS[f"float64_to_bfloat16_{_m}"] = (T.float64, T.bfloat16, _m)
CONVERSIONS["float32_to_bfloat16"] = (T.float32, T.bfloat16, "rn")
CONVERSIONS["float64_to_bfloat16"] = (T.float64, T.bfloat16, "rn")
CONVERSIONS["bfloat16_to_float32"] = (T.bfloat16, T.float32, "rn")  # exact
for _t in (T.int16, T.uint16):
    CONVERSIONS[f"bfloat16_as_{_t}"] = (T.bfloat16, _t, "as")
    CONVERSIONS[f"{_t}_as_bfloat16"] = (_t, T.bfloat16, "as")

# the functions user code calls (cuda.bf16 exports them); each only inside kernels
FUNCTIONS = {name: KernelBuiltin(f"cuda.bf16.{name}") for name in CONVERSIONS}


def _typing(name: str):
    src, dst, _ = CONVERSIONS[name]

    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, name)
        t = scalar_arg(typer, a, node.args[0], f"{name}()")
        if t.is_complex:
            typer.error(f"{name}() takes a {src}, got {t}", node.args[0])
        if t != src:  # converted first, as numba does
            a = Expr("cast", src, (a,), loc=typer.loc(node.args[0]))
        return typer.intrinsic(f"bf16.{name}", dst, (a,), node)
    return typing


# --- lowering ------------------------------------------------------------------------------------

def _f32_round_to_odd(fl, d):
    """The float64 ``d`` as a float32 rounded to odd (NaN stays NaN, huge values FLT_MAX)."""
    b = fl.builder
    f = b.fptrunc(d, F32)
    back = b.fpext(f, F64)
    bits = b.bitcast(f, I32)
    # rounded away from zero (|f| > |d|): step back one unit toward zero; then the sticky bit
    away = b.fcmp_ordered(">", math_call(fl, "fabs", T.float64, [back]),
                          math_call(fl, "fabs", T.float64, [d]))
    bits = b.sub(bits, b.zext(away, I32))
    inexact = b.fcmp_ordered("!=", back, d)
    return b.or_(bits, b.zext(inexact, I32))


def _int_round_to_odd(fl, v, t: T.ScalarType):
    """The integer ``v`` as a float64 rounded to odd (exact below 2**53)."""
    b = fl.builder
    wide = b.sext(v, I64) if t.kind == "i" else b.zext(v, I64) if t.bits < 64 else v
    if t.bits < 64:
        return (b.sitofp if t.kind == "i" else b.uitofp)(wide, F64)
    neg = b.icmp_signed("<", wide, I64(0)) if t.kind == "i" else ir.Constant(ir.IntType(1), 0)
    mag = b.select(neg, b.neg(wide), wide)  # |INT64_MIN| is 2**63 as an unsigned
    ctlz = fl.mod.declare("llvm.ctlz.i64", I64, [I64, ir.IntType(1)])
    length = b.sub(I64(64), b.call(ctlz, [mag, ir.Constant(ir.IntType(1), 0)]))
    shift = b.select(b.icmp_unsigned(">", length, I64(53)), b.sub(length, I64(53)), I64(0))
    dropped = b.and_(mag, b.sub(b.shl(I64(1), shift), I64(1)))
    kept = b.or_(b.lshr(mag, shift), b.zext(b.icmp_unsigned("!=", dropped, I64(0)), I64))
    scale = b.bitcast(b.shl(b.add(shift, I64(1023)), I64(52)), F64)  # 2**shift, exactly
    d = b.fmul(b.uitofp(kept, F64), scale)
    return b.select(neg, b.fneg(d), d)


def _bf16_from_f32_bits(fl, u, mode: str):
    """A float32's bits ``u`` rounded to bfloat16 in ``mode``."""
    b = fl.builder
    high = b.lshr(u, I32(16))
    low_nonzero = b.icmp_unsigned("!=", b.and_(u, I32(0xFFFF)), I32(0))
    negative = b.icmp_signed("<", u, I32(0))
    if mode == "rn":
        r = b.lshr(b.add(u, b.add(I32(0x7FFF), b.and_(high, I32(1)))), I32(16))
    elif mode == "rz":
        r = high
    else:  # rd: negative values move away from zero; ru: positive ones
        grows = b.and_(low_nonzero, negative if mode == "rd" else b.not_(negative))
        r = b.add(high, b.zext(grows, I32))
    nan = b.icmp_unsigned(">", b.and_(u, I32(0x7FFFFFFF)), I32(0x7F800000))
    r = b.select(nan, I32(0x7FFF), r)
    return _as_bf16(fl, b.trunc(r, I16))


def _as_bf16(fl, bits16):
    return fl.builder.bitcast(bits16, ll_type(T.bfloat16))


def _lower(name: str):
    src, dst, mode = CONVERSIONS[name]

    def lower(fl, e: Expr):
        b = fl.builder
        v = fl.expr(e.args[0])
        if mode == "as":
            return b.bitcast(v, I16) if src == T.bfloat16 else _as_bf16(fl, v)
        if dst == T.bfloat16:
            if src == T.float32:
                return _bf16_from_f32_bits(fl, b.bitcast(v, I32), mode)
            d = v if src == T.float64 else _int_round_to_odd(fl, v, src)
            return _bf16_from_f32_bits(fl, _f32_round_to_odd(fl, d), mode)
        f = convert(fl, v, T.bfloat16, T.float32)  # exact
        if dst == T.float32:
            return f
        return convert(fl, math_call(fl, _INT_ROUND[mode], T.float32, [f]), T.float32, dst)
    return lower


for _name, (_src, _dst, _mode) in CONVERSIONS.items():
    register(Intrinsic(name=f"bf16.{_name}", operands=Operands(SCALAR, result=_dst),
                       lowering={ANY_TARGET: _lower(_name)},
                       calls={FUNCTIONS[_name]: _typing(_name)}, pure=True))
