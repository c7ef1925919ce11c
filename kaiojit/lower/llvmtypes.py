"""kaiojit types as LLVM types, and the few value helpers every lowering needs."""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..floatbits import float_to_bf16_bits

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

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


_NAMED_LL: dict[str, ir.Type] = {"half": ir.HalfType(), "float": ir.FloatType(),
                                  "double": ir.DoubleType(), "bfloat": BFLOAT}


def _scalar_ll(name: str) -> ir.Type:
    """An LLVM type from its spelling in ``ScalarFacts.llvm``: ``i8``, ``float``, ``bfloat``,
    ``{float, float}`` (a complex value: real, imaginary, laid out as NumPy's complex)."""
    if name.startswith("{"):
        return ir.LiteralStructType([_scalar_ll(p.strip()) for p in name[1:-1].split(",")])
    if name.startswith("i"):
        return ir.IntType(int(name[1:]))
    return _NAMED_LL[name]


_LL_OF_SCALAR = {t: _scalar_ll(t.facts.llvm) for t in T.SCALARS.values()}


def ll_type(t: T.Type) -> ir.Type:
    """The LLVM type of a value of type ``t`` in registers (bool is i1; a float computed in
    float32 is stored as its bits where LLVM has no type for it: fp8 is i8)."""
    if isinstance(t, T.ScalarType):
        return _LL_OF_SCALAR[t]
    if isinstance(t, T.ArrayType):
        return array_struct(t.ndim)
    if isinstance(t, T.TupleType):
        return ir.LiteralStructType([ll_type(e) for e in t.elements])
    if isinstance(t, T.VoidType):
        return VOID
    if isinstance(t, T.TensorMapType):
        return PTR  # the address of the 128 bytes (a byval parameter's, on the GPU)
    if isinstance(t, (T.RecordType, T.CPointer)):
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
    if t.float_format is not None:  # an fp8 constant: its bits
        return ir.Constant(ll_type(t), t.facts.encode(value))
    if t.is_float:
        return ir.Constant(ll_type(t), float(value))
    if t.is_complex:
        value = complex(value)
        part = _FLOAT_LL[t.bits // 2]
        return ir.Constant(ll_type(t), [ir.Constant(part, value.real),
                                        ir.Constant(part, value.imag)])
    return ir.Constant(ll_type(t), int(value))
