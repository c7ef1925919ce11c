"""The reference numerics: every scalar operation a generated kernel performs, written from
docs/semantics.md and API.md (Python's operators, NumPy 2's promotion and float arithmetic),
not from kaiojit's lowering.

Integers are Python ints held in their type's range; floats are NumPy scalars of their type
(NumPy's float16/32/64 arithmetic is IEEE, rounded once per operation); bools are Python bools.
"""

from __future__ import annotations

import math

import numpy as np

INTS = ("int32", "int64", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64")
NUMERIC = INTS + FLOATS
NP = {name: np.dtype(name).type for name in NUMERIC}
BITS = {"int32": 32, "int64": 64, "uint32": 32, "uint64": 64,
        "float16": 16, "float32": 32, "float64": 64,
        "int8": 8, "int16": 16, "uint8": 8, "uint16": 16}
# types a value only passes through, in a conversion (``kj.int32(kj.bfloat16(x))``): a
# bfloat16 is held as the float32 of its value, a bool as a Python bool
SMALL_INTS = ("int8", "int16", "uint8", "uint16")
PASS_THROUGH = SMALL_INTS + ("bool", "bfloat16")


def is_int(t: str) -> bool:
    return t in INTS


def is_float(t: str) -> bool:
    return t in FLOATS


def is_signed(t: str) -> bool:
    return t.startswith("int")


def int_range(t: str) -> tuple[int, int]:
    bits = BITS[t]
    if is_signed(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def wrap(v: int, t: str) -> int:
    bits = BITS[t]
    v &= (1 << bits) - 1
    if is_signed(t) and v >> (bits - 1):
        v -= 1 << bits
    return v


# --- promotion (NumPy 2, NEP 50: Python literals are weak) ----------------------------------------

def result_type(a: str, a_weak: bool, b: str, b_weak: bool) -> str:
    """The type of a binary arithmetic operation's result (before ``/`` of integers)."""
    if a_weak and b_weak:
        return "float64" if "float64" in (a, b) else "int64"
    if a_weak or b_weak:
        strong, weak = (b, a) if a_weak else (a, b)
        if is_float(weak) and is_int(strong):
            return "float64"
        return strong
    return np.result_type(a, b).name


# --- conversions ---------------------------------------------------------------------------------

def int_to_float(v: int, t: str):
    """An integer rounded once to the nearest float of type ``t`` (ties to even); too large
    for the type is infinity."""
    if abs(v) < (1 << 53):
        with np.errstate(all="ignore"):
            return NP[t](float(v)) if t != "float64" else np.float64(v)
    mant = {"float16": 11, "float32": 24, "float64": 53}[t]
    sign = -1 if v < 0 else 1
    m = abs(v)
    shift = m.bit_length() - mant
    q, r = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    value = q << shift
    finfo = np.finfo(NP[t])
    if value > int(finfo.max):
        return NP[t](sign * np.inf)
    return NP[t](sign * float(value))


def float_to_int(f, t: str) -> int:
    """Float to integer: toward zero, saturating, NaN gives 0 (docs/semantics.md)."""
    lo, hi = int_range(t)
    f = float(f)
    if math.isnan(f):
        return 0
    if f >= hi:
        return hi
    if f <= lo:
        return lo
    return int(f)


def convert(v, src: str, dst: str):
    """The value ``v`` of type ``src`` converted to ``dst`` (``PASS_THROUGH`` types too)."""
    if src == dst:
        return v
    if src == "bfloat16":  # widening is exact
        v, src = np.float32(v), "float32"
        if dst == src:
            return v
    if dst == "bool":
        return bool(v != 0) if not is_float(src) else bool(v != 0 or np.isnan(v))
    if src == "bool":
        v, src = int(v), "int64"
    if dst == "bfloat16":  # through float32, then to the nearest bfloat16 (ties to even)
        return to_bfloat16(convert(v, src, "float32"))
    if is_int(dst) or dst in SMALL_INTS:
        return float_to_int(v, dst) if is_float(src) else wrap(v, dst)
    if is_int(src) or src in SMALL_INTS:
        return int_to_float(v, dst)
    with np.errstate(all="ignore"):
        return NP[dst](v)


def to_bfloat16(f) -> np.float32:
    """A float32 rounded to the nearest bfloat16 (ties to even), held as a float32."""
    f = np.float32(f)
    if np.isnan(f):
        return f
    bits = int(f.view(np.uint32))
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return np.uint32(bits & 0xFFFFFFFF).view(np.float32)


# --- operators -----------------------------------------------------------------------------------

def int_binop(op: str, a: int, b: int, t: str) -> int:
    bits = BITS[t]
    if op == "+":
        return wrap(a + b, t)
    if op == "-":
        return wrap(a - b, t)
    if op == "*":
        return wrap(a * b, t)
    if op == "//":
        return 0 if b == 0 else wrap(a // b, t)
    if op == "%":
        return 0 if b == 0 else wrap(a % b, t)
    if op == "**":
        assert b >= 0, "the generator raises integers to non-negative powers only"
        return wrap(pow(a, b, 1 << bits), t)
    if op == "&":
        return wrap(a & b, t)
    if op == "|":
        return wrap(a | b, t)
    if op == "^":
        return wrap(a ^ b, t)
    # shifts: the amount is taken as unsigned; the width or more gives 0 (or the sign)
    amount = b & ((1 << bits) - 1)
    if op == "<<":
        return 0 if amount >= bits else wrap(a << amount, t)
    if op == ">>":
        if amount >= bits:
            return -1 if a < 0 else 0
        return wrap(a >> amount, t)
    raise AssertionError(op)


def float_binop(op: str, a, b, t: str):
    with np.errstate(all="ignore"):
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "//":
            return np.floor_divide(a, b)
        if op == "%":
            return np.remainder(a, b)
        if op == "**":  # C's pow (NumPy's power of arrays; its scalars take shortcuts)
            return NP[t](np.power(np.array([a], np.float64), np.array([b], np.float64))[0])
    raise AssertionError(op)


def binop(op: str, a, b, t: str):
    """``a op b`` with both operands already of the operation's type ``t``."""
    if is_int(t):
        return int_binop(op, a, b, t)
    return float_binop(op, a, b, t)


def compare(op: str, a, ta: str, b, tb: str) -> bool:
    """NumPy 2: integers of any signedness compare exactly; otherwise both sides are
    converted to the promoted type first."""
    if not (is_int(ta) and is_int(tb)):
        t = result_type(ta, False, tb, False)
        a, b = convert(a, ta, t), convert(b, tb, t)
    with np.errstate(all="ignore"):
        return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
                     "==": a == b, "!=": a != b}[op])


def unary(op: str, a, t: str):
    if op == "+":
        return a
    if op == "-":
        return wrap(-a, t) if is_int(t) else -a
    if op == "~":
        return wrap(~a, t)
    raise AssertionError(op)


def py_min(a, b):
    """Python's ``min(a, b)``: ``b if b < a else a`` (the first of equals, NaN as it comes)."""
    with np.errstate(all="ignore"):
        return b if b < a else a


def py_max(a, b):
    with np.errstate(all="ignore"):
        return b if b > a else a


def py_abs(a, t: str):
    if is_int(t):
        return wrap(abs(a), t)
    return np.abs(a)


# --- math functions -------------------------------------------------------------------------------

EXACT_MATH = ("sqrt", "fabs", "floor", "ceil", "trunc", "copysign", "fmod", "rint")
INEXACT_MATH = ("exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
                "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
                "erfc", "atan2", "pow", "hypot")
BINARY_MATH = ("copysign", "fmod", "atan2", "pow", "hypot")
_NP_NAME = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
            "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power"}


def math_fn(name: str, args: list, t: str):
    """``math.<name>`` of floats of type ``t`` (float16 computes in float32). Exact functions
    are computed in ``t``'s own precision (sqrt in float64 then rounded: exact for float32);
    the others in float64, rounded to ``t`` (compared within a tolerance)."""
    with np.errstate(all="ignore"):
        if name in ("erf", "erfc"):
            x = float(args[0])
            return NP[t](getattr(math, name)(x))
        if name == "pow":  # C's pow, as math.pow (NumPy's power of scalars takes shortcuts)
            return float_binop("**", args[0], args[1], t)
        fn = getattr(np, _NP_NAME.get(name, name))
        if name in ("fmod", "copysign", "fabs", "floor", "ceil", "trunc", "rint"):
            return NP[t](fn(*args))
        return NP[t](fn(*[np.float64(a) for a in args]))


def math_to_int(name: str, a) -> int:
    """``math.floor/ceil/trunc`` and ``round()`` of a float: int64 (saturating, NaN is 0)."""
    f = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint}[name](a)
    return float_to_int(f, "int64")


def bits_of(v, t: str) -> int:
    return int(NP[t](v).view(f"uint{BITS[t]}"))


def same_value(got, want, t: str, tolerance_ulps: int = 0) -> bool:
    """Bit-for-bit equality (any NaN equals any NaN); with a tolerance, floats within that many
    units in the last place of the larger, with the same sign (zeros' signs included)."""
    if is_int(t) or t == "bool":
        return int(got) == int(want)
    g, w = NP[t](got), NP[t](want)
    if np.isnan(g) or np.isnan(w):
        return bool(np.isnan(g) and np.isnan(w))
    if tolerance_ulps and np.isinf(g) != np.isinf(w) and np.signbit(g) == np.signbit(w):
        # the largest finite value and infinity are one unit in the last place apart: a
        # library rounding up at the top of the range (libdevice's hypot) gives inf
        return abs(float(w if np.isinf(g) else g)) == float(np.finfo(NP[t]).max)
    if tolerance_ulps == 0 or np.isinf(g) or np.isinf(w):
        return bits_of(g, t) == bits_of(w, t)
    if np.signbit(g) != np.signbit(w):
        return False
    scale = max(abs(float(g)), abs(float(w)), float(np.finfo(NP[t]).smallest_subnormal))
    ulp = float(np.spacing(NP[t](scale)))
    return abs(float(g) - float(w)) <= tolerance_ulps * ulp


def round_fraction(value, t: str):
    """The exact rational ``value`` rounded once to type ``t`` (to nearest, ties to even)."""
    from fractions import Fraction

    value = Fraction(value)
    if value == 0:
        return NP[t](0.0)
    mant = {"float16": 11, "float32": 24, "float64": 53}[t]
    emin = {"float16": -14, "float32": -126, "float64": -1022}[t]
    sign = -1.0 if value < 0 else 1.0
    m = abs(value)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    e = max(e, emin)  # subnormals keep the smallest exponent's quantum
    quantum = Fraction(2) ** (e - mant + 1)
    q, r = divmod(m, quantum)
    half = quantum / 2
    if r > half or (r == half and q % 2 == 1):
        q += 1
    result = q * quantum
    with np.errstate(all="ignore"):
        if result > Fraction(float(np.finfo(NP[t]).max)):
            return NP[t](sign * np.inf)
        return NP[t](sign * float(result))


def fma(a, b, c, t: str):
    """``a * b + c`` rounded once."""
    from fractions import Fraction

    if not all(np.isfinite(x) for x in (a, b, c)):
        with np.errstate(all="ignore"):
            if np.isfinite(a) and np.isfinite(b) and not np.isnan(c):
                return NP[t](c)  # the exact product is finite: an infinite c decides
            return NP[t](np.float64(a) * np.float64(b) + np.float64(c))
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if exact == 0:  # the sign of an exact zero follows IEEE's rules for the sum
        prod_neg = np.signbit(a) != np.signbit(b)
        if prod_neg and np.signbit(c):
            return NP[t](-0.0)
        return NP[t](0.0)
    return round_fraction(exact, t)
