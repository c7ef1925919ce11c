"""NumPy's promotion of two dtypes, with ml_dtypes' bfloat16 and float8 where a NumPy release does
not say.

Newer NumPy releases refuse to promote ml_dtypes' bfloat16 and float8 types with some integers
(DTypePromotionError for int16: bfloat16 with NumPy 2.5 on an H200 machine, float8_e4m3fn on an
H100 machine); kaiojit keeps the rule docs/semantics.md writes down, ml_dtypes' own table (what
NumPy 2.4 answers): these types promote with integers and wider floats as float16 does, a float16
result staying the type itself; bfloat16 with float16 gives float32, bfloat16 with a float8 stays
bfloat16, the two float8 types meet in float32."""

from __future__ import annotations

import numpy as np


def result_type(a: np.dtype, b: np.dtype) -> np.dtype:
    try:
        return np.result_type(a, b)
    except TypeError:  # numpy.exceptions.DTypePromotionError is a TypeError
        pass
    import ml_dtypes
    bf16, half = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)
    low = {bf16, np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)}
    low_one, other = (a, b) if a in low else (b, a)
    if other == low_one:
        return low_one
    if other in low:  # bfloat16 holds every float8 value; the two float8 types meet in float32
        return bf16 if bf16 in (low_one, other) else np.dtype(np.float32)
    if other == half:  # neither holds the other
        return np.dtype(np.float32)
    r = np.result_type(half, other)  # as float16: int8/uint8/bool keep the 8/16-bit float
    return low_one if r == half else r
