"""``numba.cuda.types``: kaiojit's types, under numba's names (see :mod:`kaiojit.types`)."""

from __future__ import annotations

from .. import numba_types as _names
from ..numba_types import *
from ..types import (  # noqa: F401
    SCALARS,
    ArrayType,
    RecordType,
    Signature,
    TupleType,
    Type,
    bfloat16,
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    from_dtype,
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

__all__ = [
    "Signature", "Type", "bfloat16", "bool_", "complex64", "complex128", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "void",
]
__all__ += _names.__all__
