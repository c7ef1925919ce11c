"""NumPy's promotion of two dtypes, with ml_dtypes' bfloat16 where a NumPy release does not say.

Newer NumPy releases refuse to promote ml_dtypes' bfloat16 with some integers (DTypePromotionError
for int16, seen with NumPy 2.5 on the H200); kaiojit keeps the rule docs/semantics.md writes down,
ml_dtypes' own table: bfloat16 promotes as float16 does, a float16 result staying bfloat16,
bfloat16 with float16 gives float32, and bfloat16 with a float8 stays bfloat16."""

from __future__ import annotations

import numpy as np


def result_type(a: np.dtype, b: np.dtype) -> np.dtype:
    try:
        return np.result_type(a, b)
    except TypeError:  # numpy.exceptions.DTypePromotionError is a TypeError
        pass
    import ml_dtypes
    bf16, half = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)
    other = b if a == bf16 else a
    if other in (bf16, half):  # bfloat16 with itself stays; with float16 neither holds the other
        return bf16 if other == bf16 else np.dtype(np.float32)
    if other.name.startswith("float8"):  # bfloat16 holds every float8 value (ml_dtypes' table)
        return bf16
    r = np.result_type(half, other)  # else as float16: int8/uint8/bool keep the 16-bit float
    return bf16 if r == half else r
