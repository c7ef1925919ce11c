"""kaiojit types as LLVM types, and the few value helpers every lowering needs."""

from __future__ import annotations

import math

from llvmlite import ir

from .. import types as T

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_SCALAR_LL = {
    "b": lambda bits: I1,
    "i": lambda bits: ir.IntType(bits),
    "u": lambda bits: ir.IntType(bits),
}
_FLOAT_LL = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}


class BFloatType(ir.types._BaseFloatType):
    """LLVM's ``bfloat`` (llvmlite has no class for it): 8 exponent bits, 7 mantissa bits."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value) -> str:
        return f"0xR{float_to_bf16_bits(float(value)):04X}"


BFloatType._create_instance()
BFLOAT = BFloatType()


def float_to_bf16_bits(value: float) -> int:
    """The bfloat16 nearest ``value`` (through float32, ties to even; NaN is 0x7FFF, as the
    GPU's ``cvt.rn.bf16.f32`` gives), as its 16 bits."""
    import struct

    if math.isnan(value):
        return 0x7FFF
    if abs(value) > 3.4028234663852886e38:  # beyond float32: struct cannot pack it
        return 0xFF80 if value < 0 else 0x7F80
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def ll_type(t: T.Type) -> ir.Type:
    """The LLVM type of a value of type ``t`` in registers (bool is i1)."""
    if isinstance(t, T.ScalarType):
        if t.kind == "f":
            return BFLOAT if t == T.bfloat16 else _FLOAT_LL[t.bits]
        if t.kind == "c":  # {real, imag}, laid out as NumPy's complex
            return ir.LiteralStructType([_FLOAT_LL[t.bits // 2]] * 2)
        return _SCALAR_LL[t.kind](t.bits)
    if isinstance(t, T.ArrayType):
        return array_struct(t.ndim)
    if isinstance(t, T.TupleType):
        return ir.LiteralStructType([ll_type(e) for e in t.elements])
    if isinstance(t, T.VoidType):
        return VOID
    if isinstance(t, T.TensorMapType):
        return PTR  # the address of the 128 bytes (a byval parameter's, on the GPU)
    if isinstance(t, T.RecordType):
        return PTR  # a record value refers to the element in memory
    if isinstance(t, T.GridGroupType):
        return I8  # no data: the grid is implicit
    raise TypeError(f"no LLVM type for {t}")


def ll_mem_type(t: T.ScalarType) -> ir.Type:
    """The LLVM type of an array element in memory (bool is one byte, as in NumPy)."""
    if isinstance(t, T.RecordType):
        return ir.ArrayType(I8, t.itemsize)  # addressed by its bytes (intrinsics/records.py)
    return I8 if t.is_bool else ll_type(t)


def array_struct(ndim: int) -> ir.LiteralStructType:
    """An array value: data pointer, shape, strides in bytes."""
    return ir.LiteralStructType([PTR, ir.ArrayType(I64, ndim), ir.ArrayType(I64, ndim)])


def ll_param_type(part: str) -> ir.Type:
    """The LLVM type of one kernel parameter (see ``kaiojit.types.param_parts``)."""
    if part == T.PARAM_PTR:
        return PTR
    t = T.SCALARS[part]
    return I8 if t.is_bool else ll_type(t)


def const(t: T.ScalarType, value) -> ir.Constant:
    if t.is_bool:
        return ir.Constant(I1, int(bool(value)))
    if t.is_float:
        return ir.Constant(ll_type(t), float(value))
    if t.is_complex:
        value = complex(value)
        part = _FLOAT_LL[t.bits // 2]
        return ir.Constant(ll_type(t), [ir.Constant(part, value.real),
                                        ir.Constant(part, value.imag)])
    return ir.Constant(ll_type(t), int(value))
