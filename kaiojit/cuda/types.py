"""``numba.cuda.types``: kaiojit's types, under numba's names (see :mod:`kaiojit.types`)."""

from __future__ import annotations  # noqa: I001  (a star import with named ones)

from ..types import *  # the numba names (NUMBA_NAMES) with kaiojit's own
from ..types import (  # noqa: F401
    NUMBA_NAMES, ArrayType, RecordType, Signature, TupleType, Type, bfloat16, bool_, complex64,
    complex128, float16, float32, float64, from_dtype, int8, int16, int32, int64, uint8,
    uint16, uint32, uint64, void,
)

__all__ = [  # noqa: PLE0604
    "Signature", "Type", "bfloat16", "bool_", "complex64", "complex128", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "void",
    *NUMBA_NAMES,
]
