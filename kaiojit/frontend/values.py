"""Compile-time values in the frontend: Python objects names resolve to, constants and their
folding, NumPy 2 promotion of scalar operands, and the words errors use for types."""

from __future__ import annotations

import math
import struct
import sys

from .. import types as T
from ..kir import Expr


class PyObj:
    """A Python object a name resolves to that is not a kernel value (a module, a builtin)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def numpy_if_imported():
    """NumPy if the program imported it, else None: compiling does not need NumPy, and without
    it no value a kernel sees can be a NumPy object."""
    return sys.modules.get("numpy")


INT_LITERAL_RANGE = (-(1 << 63), 1 << 64)  # a Python int a kernel holds (int64 or uint64)


def exact_int_result(op: str, x: int, y: int) -> int | None:
    """``x op y`` of Python ints where it is cheap to know exactly; a value outside
    ``INT_LITERAL_RANGE`` stands for any too large to compute (None: not an integer result)."""
    big = INT_LITERAL_RANGE[1] * 2
    if op in ("+", "-", "*", "&", "|", "^"):
        return {"+": x + y, "-": x - y, "*": x * y, "&": x & y, "|": x | y, "^": x ^ y}[op]
    if op in ("//", "%"):
        return None if y == 0 else (x // y if op == "//" else x % y)
    if op == "**":
        if y < 0:
            return None
        return x ** y if abs(x) < 2 or y < 130 else big
    if op == "<<":
        return None if y < 0 else (x << y if y < 130 or x == 0 else big)
    if op == ">>":
        return None if y < 0 else x >> min(y, 130)
    return None


def const_expr(value, loc=None) -> Expr:
    """A weak constant for a Python scalar, or a typed one for a NumPy scalar."""
    if isinstance(value, bool):
        return Expr("const", T.bool_, attr=value, loc=loc, weak=True)
    if isinstance(value, int):
        return Expr("const", T.int64, attr=value, loc=loc, weak=True)
    if isinstance(value, float):
        return Expr("const", T.float64, attr=value, loc=loc, weak=True)
    if isinstance(value, complex):
        return Expr("const", T.complex128, attr=value, loc=loc, weak=True)
    np = numpy_if_imported()
    if np is not None and isinstance(value, np.generic):
        t = T.from_dtype(value.dtype)
        return Expr("const", t, attr=value.item(), loc=loc)
    raise TypeError(value)


def is_constant_value(value) -> bool:
    if isinstance(value, (bool, int, float, complex)):
        return True
    if isinstance(value, tuple):
        return all(is_constant_value(v) for v in value)
    np = numpy_if_imported()
    return np is not None and isinstance(value, (np.bool_, np.integer, np.floating,
                                                 np.complexfloating))


def is_ndarray(value) -> bool:
    np = numpy_if_imported()
    return np is not None and isinstance(value, np.ndarray)


# --- promotion helpers ------------------------------------------------------------------------------


def result_scalar(t1: T.ScalarType, w1: bool, t2: T.ScalarType, w2: bool) -> T.ScalarType:
    if w1 and w2:
        order = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
        return t1 if order[t1.kind] >= order[t2.kind] else t2
    if w1:
        return T.promote_weak(t2, t1.kind)
    if w2:
        return T.promote_weak(t1, t2.kind)
    return T.promote(t1, t2)


def convert_const(v, t: T.ScalarType):
    """A Python value converted as a cast to ``t`` would convert it (integers wrap)."""
    if t.is_bool:
        return bool(v)
    if t.computes_in is not None:  # bfloat16, fp8: as the kernel's conversion rounds
        return t.round(v)
    if t.is_complex:
        c = complex(v)
        return complex(round_to_float(c.real, t.bits // 2), round_to_float(c.imag, t.bits // 2))
    if isinstance(v, complex):
        v = v.real  # NumPy's cast keeps the real part (the typer allows it only explicitly)
    if t.is_float:
        if isinstance(v, int) and abs(v) >= 1 << 53:  # float(v) would round twice
            return _int_to_float(v, t.bits)
        return round_to_float(float(v), t.bits)
    bits = t.bits
    if isinstance(v, float):  # as the conversion in a kernel: toward zero, saturating, NaN is 0
        if math.isnan(v):
            return 0
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t.kind == "i" else \
            (0, (1 << bits) - 1)
        return lo if v <= lo else hi if v >= hi else int(v)
    v = int(v)
    v &= (1 << bits) - 1
    if t.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _int_to_float(v: int, bits: int) -> float:
    """The integer ``v`` rounded once to a float of ``bits`` bits (to nearest, ties to even)."""
    mant = {16: 11, 32: 24, 64: 53}[bits]
    shift = abs(v).bit_length() - mant
    q, r = divmod(abs(v), 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    sign = -1.0 if v < 0 else 1.0
    try:
        return round_to_float(sign * float(q << shift), bits)  # exact, or too large
    except OverflowError:
        return sign * math.inf


def round_to_float(v: float, bits: int) -> float:
    """``v`` rounded to a float of ``bits`` bits (IEEE, round to nearest even)."""
    if bits == 64 or not math.isfinite(v):
        return v
    fmt = "e" if bits == 16 else "f"
    try:
        return struct.unpack(fmt, struct.pack(fmt, v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def fold_binop(op: str, a: Expr, b: Expr, rt: T.ScalarType) -> Expr | None:
    """Fold an operation on two constants (used for module-level constants and literals) to
    exactly what the kernel would compute at run time; None leaves it to run time. Python's
    float arithmetic rounds once in float64, which for ``+ - * /`` of narrower floats rounds
    as their own arithmetic does; float ``**`` follows the lowering's constant exponents
    (``x ** 0.5`` is ``sqrt``) and is otherwise left to the target's ``pow``; float ``//`` and ``%`` of narrower floats, and complex ``/`` and
    ``**``, whose run-time rounding differs from Python's float64 or complex arithmetic, are
    not folded."""
    if a.op != "const" or b.op != "const":
        return None
    x, y = a.attr, b.attr
    if rt.is_float and op == "**":
        return _fold_float_pow(float(x), float(y), rt)
    if (rt.is_float and rt != T.float64 and op in ("//", "%")) or \
            (rt.is_complex and op in ("/", "**")):
        return None
    try:
        if op == "+":
            r = x + y
        elif op == "-":
            r = x - y
        elif op == "*":
            r = x * y
        elif op == "/":
            r = x / y
        elif op == "//":
            r = x // y
        elif op == "%":
            r = x % y
        elif op == "**":
            if isinstance(x, int) and isinstance(y, int) and rt.is_int:
                # the wrapped result without the exact one, which can take hours to compute
                r = pow(x, y, 1 << rt.bits) if y >= 0 else None
            else:
                r = x ** y
        elif op == "<<":
            r = x << y if 0 <= y < rt.bits else None
        elif op == ">>":
            r = x >> y if 0 <= y < rt.bits else None
        elif op == "&":
            r = x & y
        elif op == "|":
            r = x | y
        elif op == "^":
            r = x ^ y
        else:
            return None
    except (ZeroDivisionError, OverflowError, ValueError, TypeError):
        return None
    if r is None or (isinstance(r, complex) and not rt.is_complex):
        return None
    return Expr("const", rt, attr=convert_const(r, rt))


def _fold_float_pow(x: float, y: float, rt: T.ScalarType) -> Expr | None:
    """``x ** y`` of floats as the lowering computes it (``ops._float_pow``): ``x * x``,
    ``x`` and ``sqrt(x)`` for the exponents 2, 1 and 0.5 (so ``(-0.0) ** 0.5`` is -0.0 and
    ``(-inf) ** 0.5`` NaN); None for the others, which call the target's ``pow``: the host's
    libm and the GPU's libdevice round some results differently (65504.0 ** 1.7 one ulp
    apart), so only run time knows the target's result."""
    if y == 2.0:
        r = x * x
    elif y == 1.0:
        r = x
    elif y == 0.5:
        r = math.sqrt(x) if x >= 0.0 else math.nan  # sqrt(-0.0) is -0.0; NaN stays NaN
    else:
        return None
    return Expr("const", rt, attr=convert_const(r, rt))


STRING_ONLY_IN_PRINT = "a string can only be an argument of print() in kernels"


def describe(v) -> str:
    if isinstance(v, type(math)):
        return f"module {v.__name__!r}"
    name = getattr(v, "__name__", None)
    module = getattr(v, "__module__", None)
    if name and callable(v) and isinstance(module, str) and module.split(".")[0] in (
            "numpy", "math", "builtins"):
        return f"{'' if module == 'builtins' else module.split('.')[0] + '.'}{name}"
    if name:
        return f"{type(v).__name__} {name!r}"
    return f"a {type(v).__name__}"


def type_words(t: T.Type) -> str:
    if isinstance(t, T.ArrayType):
        return f"an array {t}"
    if isinstance(t, T.TupleType):
        return f"a tuple {t}"
    if isinstance(t, T.StringType):
        return "a string"
    if isinstance(t, T.VoidType):
        return "nothing (a function that returns no value)"
    return str(t)
