"""numba's type names, for code that spells types numba's way (``kaiojit.cuda.types``).

Re-exported from :mod:`kaiojit.types`, whose types these are: ``types.Array(float32, 2, "C")``
is ``float32[:, ::1]``, ``types.UniTuple(int32, 3)`` a tuple type, ``types.none`` the void
return type, and the scalar aliases numba has (``types.float_``, ``types.intc``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import (
    ArrayType,
    RecordType,
    ScalarType,
    TupleType,
    Type,
    VoidType,
    bfloat16,
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    void,
)

b1 = bool_
i1, i2, i4, i8 = int8, int16, int32, int64
u1, u2, u4, u8 = uint8, uint16, uint32, uint64
f2, f4, f8 = float16, float32, float64
c8, c16 = complex64, complex128
intp, uintp = int64, uint64
bf16 = bfloat16

none = void
boolean = bool_
byte = uint8
char = int8
short, ushort = int16, uint16
intc, uintc = int32, uint32
long_, ulong = int64, uint64
longlong, ulonglong = int64, uint64
float_ = float32
double = float64
int_ = int64
uint = uint64
Boolean, Integer, Float, Complex = ScalarType, ScalarType, ScalarType, ScalarType
Number = ScalarType
Record = RecordType
NoneType = VoidType


@dataclass(frozen=True, slots=True)
class CPointer(Type):
    """numba's ``types.CPointer(dtype)``: a pointer to ``dtype`` values (foreign functions'
    parameters)."""

    dtype: Type

    def __str__(self) -> str:
        return f"CPointer({self.dtype})"


def Array(dtype: ScalarType, ndim: int, layout: str = "A") -> ArrayType:
    """numba's ``types.Array(dtype, ndim, layout)``: an array type."""
    if isinstance(dtype, str):
        from .types import parse_type
        dtype = parse_type(dtype)
    if layout not in ("C", "F", "A"):
        raise ValueError(f"an array's layout is 'C', 'F' or 'A', got {layout!r}")
    return ArrayType(dtype, int(ndim), layout)


def UniTuple(dtype: Type, count: int) -> TupleType:
    """numba's ``types.UniTuple(dtype, count)``: ``count`` values of one type."""
    return TupleType((dtype,) * int(count))


def Tuple(elements) -> TupleType:
    """numba's ``types.Tuple((t1, t2, ...))``."""
    return TupleType(tuple(elements))


__all__ = [
    "Array",
    "Boolean",
    "CPointer",
    "Complex",
    "Float",
    "Integer",
    "NoneType",
    "Number",
    "Record",
    "Tuple",
    "UniTuple",
    "b1",
    "bf16",
    "boolean",
    "byte",
    "c8",
    "c16",
    "char",
    "double",
    "f2",
    "f4",
    "f8",
    "float_",
    "i1",
    "i2",
    "i4",
    "i8",
    "int_",
    "intc",
    "intp",
    "long_",
    "longlong",
    "none",
    "short",
    "u1",
    "u2",
    "u4",
    "u8",
    "uint",
    "uintc",
    "uintp",
    "ulong",
    "ulonglong",
    "ushort",
]
