"""Floats a kernel computes on in float32: bfloat16 and the fp8 formats, widened and narrowed.

A type with ``computes_in`` (``kaiojit.types``) is stored narrow and computed wide: every
operation widens its operands to float32 (exact), computes there, and narrows the result
once. :func:`widen` and :func:`narrow` are those two steps for every target:

* bfloat16 is LLVM's ``bfloat``: ``fpext`` widens; the GPU narrows with ``cvt.rn.bf16.f32``,
  the host by rounding the bits (:func:`float_to_bf16`).
* an fp8 format (``t.float_format``, a :class:`kaiojit.floatbits.MiniFloat`) is an ``i8`` in
  registers. On sm_90 and newer the GPU converts with ``cvt.rn.satfinite.<fmt>x2.f32`` and
  ``cvt.rn.f16x2.<fmt>x2`` (sm_89 has them too, but only from PTX ISA 8.1, newer than the
  7.8 kaiojit writes for it); the host and older GPUs run the same rounding in integer and
  float32 operations (:func:`_encode_soft`, :func:`_decode_soft`), bit for bit the same.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..floatbits import MiniFloat, float32_bits
from ..target import parse_arch
from .llvmtypes import BFLOAT, I8, I16, I32

F32 = ir.FloatType()
FP8_HARDWARE_ARCH = "sm_90"  # cvt to and from e4m3x2 / e5m2x2 with PTX ISA 7.8


def widen(fl, v, t: T.ScalarType):
    """A value of the narrow float type ``t`` as the float32 it is (exact)."""
    fmt = t.float_format
    if fmt is None:
        return fl.builder.fpext(v, F32)
    if _has_fp8_cvt(fl):
        return _decode_cvt(fl, v, fmt)
    return _decode_soft(fl, v, fmt)


def narrow(fl, v, t: T.ScalarType):
    """A float32 rounded to the narrow float type ``t`` (to nearest even; fp8 saturates)."""
    fmt = t.float_format
    if fmt is None:
        return float_to_bf16(fl, v)
    if _has_fp8_cvt(fl):
        return _encode_cvt(fl, v, fmt)
    return _encode_soft(fl, v, fmt)


def negate(fl, v, t: T.ScalarType):
    """``-v``: its sign bit flipped (exact, on every target)."""
    b = fl.builder
    it = ir.IntType(t.bits)
    bits = v if v.type == it else b.bitcast(v, it)
    flipped = b.xor(bits, ir.Constant(it, 1 << (t.bits - 1)))
    return flipped if v.type == it else b.bitcast(flipped, v.type)


def float_to_bf16(fl, v):
    """A float32 rounded to the nearest bfloat16, ties to even; NaN becomes 0x7FFF. On the GPU
    ``cvt.rn.bf16.f32`` (LLVM's fptrunc); the host has no instruction for it (LLVM would call
    a runtime function), so it rounds the bits itself, to the same result."""
    b = fl.builder
    if fl.target.name == "nvptx":
        return b.fptrunc(v, BFLOAT)
    is_nan = b.fcmp_unordered("uno", v, v)
    out = b.select(is_nan, ir.Constant(I32, 0x7FFF), _round_to_bf16_bits(b, b.bitcast(v, I32)))
    return b.bitcast(b.trunc(out, I16), BFLOAT)


def _round_to_bf16_bits(b, bits):
    """A float32's bits rounded to its upper 16, ties to even (a NaN's are not its NaN)."""
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    return b.lshr(b.add(bits, b.add(ir.Constant(I32, 0x7FFF), lsb)), ir.Constant(I32, 16))


HOST_TRUNCATION = "__truncsfbf2"


def define_host_truncation(module: ir.Module) -> None:
    """LLVM's x86 code generator holds a ``bfloat`` in a register as the float32 it is, and
    narrows it again before a store by calling ``__truncsfbf2`` (on a CPU with AVX512-BF16
    by VCVTNEPS2BF16, which flushes subnormals to zero: kaiojit.target turns that feature
    off). libgcc has the function only from GCC 13, and MCJIT sends a call of a missing one
    to address 0: each host module defines its own, kept through optimization
    (``llvm.compiler.used``), and the assembler binds the call to it. It is exact for every
    value a bfloat holds; a NaN keeps its sign and payload, quieted."""
    fn = ir.Function(module, ir.FunctionType(BFLOAT, [F32]), HOST_TRUNCATION)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bits = b.bitcast(fn.args[0], I32)
    is_nan = b.icmp_unsigned(">", b.and_(bits, ir.Constant(I32, 0x7FFFFFFF)),
                             ir.Constant(I32, 0x7F800000))
    quiet = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    out = b.select(is_nan, quiet, _round_to_bf16_bits(b, bits))
    b.ret(b.bitcast(b.trunc(out, I16), BFLOAT))
    kept = ir.GlobalVariable(module, ir.ArrayType(fn.type, 1), "llvm.compiler.used")
    kept.linkage = "appending"
    kept.section = "llvm.metadata"
    kept.initializer = ir.Constant(ir.ArrayType(fn.type, 1), [fn])


def _has_fp8_cvt(fl) -> bool:
    if fl.target.name != "nvptx":
        return False
    return parse_arch(fl.target.arch) >= parse_arch(FP8_HARDWARE_ARCH)


def _pure_asm(fl, ret: ir.Type, text: str, constraints: str, args: list):
    asm = ir.InlineAsm(ir.FunctionType(ret, [a.type for a in args]), text, constraints)
    return fl.builder.call(asm, args)


def _encode_cvt(fl, v, fmt: MiniFloat):
    # two inputs, packed high then low: the value goes in the low byte
    pair = _pure_asm(fl, I16, f"cvt.rn.satfinite.{fmt.ptx}x2.f32 $0, $1, $2;", "=h,f,f",
                     [ir.Constant(F32, 0.0), v])
    return fl.builder.trunc(pair, I8)


def _decode_cvt(fl, v, fmt: MiniFloat):
    b = fl.builder
    pair = _pure_asm(fl, I32, f"cvt.rn.f16x2.{fmt.ptx}x2 $0, $1;", "=r,h", [b.zext(v, I16)])
    return b.fpext(b.bitcast(b.trunc(pair, I16), ir.HalfType()), F32)


def _c(value: int) -> ir.Constant:
    return ir.Constant(I32, value)


def _encode_soft(fl, v, fmt: MiniFloat):
    """:meth:`MiniFloat.encode` in IR: mantissa rounded by an integer add (ties to even), the
    exponent rebiased; the format's subnormals rounded by a float32 add of a power of two
    whose ulp is their spacing; beyond the largest finite value (or infinite): that value."""
    b = fl.builder
    m, bias = fmt.mantissa_bits, fmt.bias
    drop = 23 - m
    bits = b.bitcast(v, I32)
    sign = b.and_(b.lshr(bits, _c(31 - (fmt.bits - 1))), _c(fmt.sign_bit))
    a = b.and_(bits, _c(0x7FFFFFFF))
    lsb = b.and_(b.lshr(a, _c(drop)), _c(1))
    normal = b.lshr(b.add(a, b.add(_c((1 << (drop - 1)) - 1), lsb)), _c(drop))
    normal = b.sub(normal, _c((127 - bias) << m))
    magic = 2.0 ** (24 - bias - m)
    spaced = b.fadd(b.bitcast(a, F32), ir.Constant(F32, magic))
    subnormal = b.sub(b.bitcast(spaced, I32), _c(float32_bits(magic)))
    is_sub = b.icmp_unsigned("<", a, _c(float32_bits(fmt.min_normal)))
    mag = b.select(is_sub, subnormal, normal)
    too_big = b.icmp_unsigned(">", a, _c(float32_bits(fmt.max_value)))
    mag = b.select(too_big, _c(fmt.max_code), mag)
    is_nan = b.icmp_unsigned(">", a, _c(0x7F800000))
    mag = b.select(is_nan, _c(fmt.nan_code), mag)
    return b.trunc(b.or_(sign, mag), I8)


def _decode_soft(fl, v, fmt: MiniFloat):
    return decode_soft(fl.builder, v, fmt)


def decode_soft(b: ir.IRBuilder, v, fmt: MiniFloat):
    """:meth:`MiniFloat.decode` in IR: a normal's exponent rebiased and mantissa shifted into
    float32's bits, a subnormal's mantissa times the smallest subnormal (exact)."""
    m, bias = fmt.mantissa_bits, fmt.bias
    c = b.zext(v, I32)
    sign = b.shl(b.and_(c, _c(fmt.sign_bit)), _c(32 - fmt.bits))
    mag = b.and_(c, _c(fmt.sign_bit - 1))
    normal = b.add(b.shl(mag, _c(23 - m)), _c((127 - bias) << 23))
    unit = ir.Constant(F32, 2.0 ** (1 - bias - m))
    subnormal = b.bitcast(b.fmul(b.uitofp(mag, F32), unit), I32)
    out = b.select(b.icmp_unsigned("<", mag, _c(1 << m)), subnormal, normal)
    if fmt.finite_only:
        out = b.select(b.icmp_unsigned("==", mag, _c(fmt.sign_bit - 1)), _c(0x7FC00000), out)
    else:
        top = ((1 << fmt.exponent_bits) - 1) << m
        special = b.select(b.icmp_unsigned("==", mag, _c(top)), _c(0x7F800000), _c(0x7FC00000))
        out = b.select(b.icmp_unsigned(">=", mag, _c(top)), special, out)
    return b.bitcast(b.or_(out, sign), F32)


__all__ = ["FP8_HARDWARE_ARCH", "HOST_TRUNCATION", "decode_soft", "define_host_truncation",
           "float_to_bf16", "narrow", "negate", "widen"]
