"""Floats narrower than float32, as bits: the software conversions the host side needs.

A kernel computes on bfloat16 and the fp8 formats in float32 and rounds back; these
functions are that rounding (and its inverse) in Python, for packing scalar arguments and
folding constants. They give the same bits as the kernels' conversions on both backends:

* bfloat16: round to nearest, ties to even, through float32; NaN becomes 0x7FFF (the GPU's
  ``cvt.rn.bf16.f32``); beyond the range: infinity.
* fp8 (:class:`MiniFloat`): round to nearest, ties to even, through float32, *saturating*
  (``cvt.rn.satfinite.e4m3x2.f32`` on sm_89 and newer): a finite value beyond the largest
  finite one, or an infinity, becomes the largest finite value of its sign; NaN stays NaN
  (its sign kept). Within the range this is ml_dtypes' conversion bit for bit; outside it
  ml_dtypes gives NaN (e4m3fn) or infinity (e5m2) where the hardware saturates.

This module imports nothing from kaiojit (``kaiojit.types`` builds on it).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
FLOAT32_MAX = 3.4028234663852886e38


def float32_bits(value: float) -> int:
    """The bits of ``value`` rounded to float32 (to nearest even; beyond the range: infinity)."""
    try:
        return _U32.unpack(_F32.pack(value))[0]
    except OverflowError:
        return 0xFF800000 if value < 0 else 0x7F800000


def bits_float32(bits: int) -> float:
    return _F32.unpack(_U32.pack(bits & 0xFFFFFFFF))[0]


def float_to_bf16_bits(value) -> int:
    """The bfloat16 nearest ``value`` (through float32, ties to even; NaN is 0x7FFF, as the
    GPU's ``cvt.rn.bf16.f32`` gives), as its 16 bits."""
    value = float(value)
    if math.isnan(value):
        return 0x7FFF
    if abs(value) > FLOAT32_MAX:  # beyond float32: struct cannot pack it
        return 0xFF80 if value < 0 else 0x7F80
    bits = _U32.unpack(_F32.pack(value))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def bf16_bits_to_float(bits: int) -> float:
    """The value of a bfloat16's 16 bits (exact: a bfloat16 is the top half of a float32)."""
    return bits_float32((bits & 0xFFFF) << 16)


@dataclass(frozen=True, eq=False, slots=True)
class MiniFloat:
    """An 8-bit float format: sign, ``exponent_bits``, ``mantissa_bits``, IEEE-style bias.

    ``finite_only`` formats (e4m3fn) have no infinities: the all-ones exponent still holds
    numbers, and only all-ones exponent *and* mantissa is NaN. Others (e5m2) are IEEE-like:
    the all-ones exponent is infinity (mantissa 0) or NaN. ``ptx`` is the PTX name of the
    format (``e4m3``), used by the GPU's conversions."""

    exponent_bits: int
    mantissa_bits: int
    finite_only: bool
    ptx: str

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def nan_code(self) -> int:
        """The positive NaN a NaN converts to (ml_dtypes' and the hardware's)."""
        return self.sign_bit - 1 if self.finite_only else self.sign_bit - (1 << (
            self.mantissa_bits - 1))

    @property
    def max_code(self) -> int:
        """The largest finite value's code."""
        top = self.sign_bit - 1
        return top - 1 if self.finite_only else top - (1 << self.mantissa_bits)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias)

    @property
    def max_value(self) -> float:
        return self.decode(self.max_code)

    def decode(self, code: int) -> float:
        """The value of a code (exact)."""
        m_bits = self.mantissa_bits
        sign = -1.0 if code & self.sign_bit else 1.0
        e = (code >> m_bits) & ((1 << self.exponent_bits) - 1)
        m = code & ((1 << m_bits) - 1)
        top = (1 << self.exponent_bits) - 1
        if e == top and (not self.finite_only or m == (1 << m_bits) - 1):
            return sign * math.inf if (m == 0 and not self.finite_only) else math.nan
        if e == 0:
            return sign * math.ldexp(m, 1 - self.bias - m_bits)
        return sign * math.ldexp((1 << m_bits) | m, e - self.bias - m_bits)

    def encode(self, value) -> int:
        """``value`` rounded through float32 to this format (to nearest even, saturating)."""
        value = float(value)
        if math.isnan(value):
            return self.nan_code | (self.sign_bit if math.copysign(1.0, value) < 0 else 0)
        x = float32_bits(value)
        sign = self.sign_bit if x >> 31 else 0
        a = bits_float32(x & 0x7FFFFFFF)
        if a > self.max_value:
            return sign | self.max_code
        if a < self.min_normal:  # a subnormal of this format: a multiple of its smallest one
            return sign | round(a / math.ldexp(1.0, 1 - self.bias - self.mantissa_bits))
        drop = 23 - self.mantissa_bits
        a_bits = x & 0x7FFFFFFF
        r = (a_bits + (1 << (drop - 1)) - 1 + ((a_bits >> drop) & 1)) >> drop
        return sign | (r - ((127 - self.bias) << self.mantissa_bits))

    def round(self, value) -> float:
        """``value`` rounded as a conversion to this format rounds it, as a float."""
        return self.decode(self.encode(value))


E4M3FN = MiniFloat(4, 3, True, "e4m3")
E5M2 = MiniFloat(5, 2, False, "e5m2")

__all__ = ["E4M3FN", "E5M2", "FLOAT32_MAX", "MiniFloat", "bf16_bits_to_float", "bits_float32",
           "float32_bits", "float_to_bf16_bits"]
