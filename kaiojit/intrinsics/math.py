"""Math: Python's ``math`` functions (and NumPy's of the same meaning), ``kj.fma``, and what
``abs``, ``min``, ``max``, ``round`` and ``**`` of floats lower to. All pure.

Each function of floats is lowered by ``ops.math_call``: an LLVM intrinsic where every target
has one, else the target's math library (libdevice on the GPU, libm on the host).
"""

from __future__ import annotations

import builtins
import math

from .. import language as L
from .. import types as T
from .api import (ANY_TARGET, FLOAT, INT, SCALAR, Expr, Intrinsic, Operands, Same, call_args,
                  compare, convert, float_type, math_call, register, result_scalar, scalar_arg)

# math functions of one float argument whose result has the argument's type
UNARY = (
    "sqrt exp expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
    "acosh atanh erf erfc gamma lgamma fabs exp2 cbrt"
).split()
BINARY = "atan2 pow hypot copysign fmod remainder nextafter".split()
TO_INT = "floor ceil trunc".split()  # int64 from math, the float type from NumPy
PREDICATES = "isnan isinf isfinite".split()
# NumPy's names for the same functions (np.floor and friends keep the float type)
NUMPY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan",
         "floor": "floor", "ceil": "ceil", "trunc": "trunc", "fabs": "fabs", "expm1": "expm1",
         "log1p": "log1p", "log2": "log2", "log10": "log10", "arcsin": "asin",
         "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
         "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}

FLOAT_UNARY = Operands(FLOAT, result=Same(0))
FLOAT_BINARY = Operands(FLOAT, Same(0), result=Same(0))


# --- typing --------------------------------------------------------------------------------------

# NumPy's functions that take complex numbers too (then computed as cmath's: complex.py)
COMPLEX_TOO = frozenset("exp log log10 log2 sqrt sin cos tan sinh cosh tanh asin acos atan "
                        "asinh acosh atanh".split())


def _unary(name: str, spelled: str, numpy: bool = False):
    """``name`` of one number, computed in its float type (integers in float64)."""
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, spelled)
        t = scalar_arg(typer, a, node.args[0], f"{spelled}()")
        if numpy and t.is_complex and name in COMPLEX_TOO:
            return typer.intrinsic(f"cmath.{name}", t, (a,), node)
        ft = float_type(t)
        return typer.intrinsic(f"math.{name}", ft, (typer.coerce(a, ft, node),), node)
    return typing


def _binary(name: str):
    def typing(typer, node):
        a, b = call_args(typer, node, 2, 2, f"math.{name}")
        t = result_scalar(scalar_arg(typer, a, node.args[0], f"math.{name}()"), a.weak,
                          scalar_arg(typer, b, node.args[1], f"math.{name}()"), b.weak)
        ft = float_type(t)
        return typer.intrinsic(f"math.{name}", ft,
                               (typer.coerce(a, ft, node), typer.coerce(b, ft, node)), node)
    return typing


def _builtin_pow(typer, node):
    """Python's ``pow(x, y)`` is ``x ** y`` for every kind of number (complex included, an
    integer staying an integer); the three-argument form is not supported."""
    a, b = call_args(typer, node, 2, 2, "pow")
    return typer.binop("**", a, b, node)


def _to_int(name: str):
    """math.floor/ceil/trunc: int64, as in Python (an integer argument is only converted)."""
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, f"math.{name}")
        t = scalar_arg(typer, a, node.args[0], f"math.{name}()")
        if not t.is_float:
            return typer.coerce(a, T.int64, node)
        r = typer.intrinsic(f"math.{name}", t, (a,), node)
        return Expr("cast", T.int64, (r,), loc=typer.loc(node))
    return typing


def _predicate(name: str):
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, f"math.{name}")
        t = scalar_arg(typer, a, node.args[0], f"math.{name}()")
        if not t.is_float:
            return Expr("const", T.bool_, attr=(name == "isfinite"), loc=typer.loc(node))
        return typer.intrinsic(f"math.{name}", T.bool_, (a,), node)
    return typing


def _fma(typer, node):
    args = call_args(typer, node, 3, 3, "kj.fma")
    t, weak = args[0].type, args[0].weak
    for a, n in zip(args, node.args):
        scalar_arg(typer, a, n, "kj.fma()")
        t, weak = result_scalar(t, weak, a.type, a.weak), weak and a.weak
    ft = float_type(t)
    return typer.intrinsic("math.fma", ft, tuple(typer.coerce(a, ft, node) for a in args), node)


# --- lowering ------------------------------------------------------------------------------------

def _lower_call(fl, e: Expr):
    return math_call(fl, e.attr[len("math."):], e.type, [fl.expr(a) for a in e.args])


def _lower_minmax(op: str):
    def lower(fl, e: Expr):
        # Python: min(a, b) is b if b < a else a (the first of equals, NaN as it comes)
        a, b_ = (fl.expr(x) for x in e.args)
        return fl.builder.select(compare(fl, op, e.args[0].type, b_, a), b_, a)
    return lower


def _lower_scale(factor: float):
    """math.degrees/radians: one multiplication by the constant, as CPython and NumPy do
    (half-precision floats in float32, rounded once)."""
    def lower(fl, e: Expr):
        t = e.type
        v = fl.expr(e.args[0])
        if t.bits == 16:
            w = convert(fl, v, t, T.float32)
            return convert(fl, fl.builder.fmul(w, w.type(factor)), T.float32, t)
        return fl.builder.fmul(v, v.type(factor), flags=fl.fastmath)
    return lower


def _lower_iabs(fl, e: Expr):
    b = fl.builder
    v = fl.expr(e.args[0])
    return b.select(b.icmp_signed("<", v, v.type(0)), b.neg(v), v)


def _float_operand(fl, e: Expr):
    """The operand of a float predicate, an fp8 one widened (it has no LLVM float type)."""
    t = e.args[0].type
    v = fl.expr(e.args[0])
    if t.float_format is not None:
        return convert(fl, v, t, T.float32), T.float32
    return v, t


def _lower_isnan(fl, e: Expr):
    v, _ = _float_operand(fl, e)
    return fl.builder.fcmp_unordered("uno", v, v)


def _lower_isinf(finite: bool):
    def lower(fl, e: Expr):
        v, t = _float_operand(fl, e)
        absval = math_call(fl, "fabs", t, [v])
        return fl.builder.fcmp_ordered("<" if finite else "==", absval, v.type(float("inf")))
    return lower


# --- declarations --------------------------------------------------------------------------------

def _math(name: str, operands, lowering=_lower_call, calls=None) -> None:
    register(Intrinsic(name=f"math.{name}", operands=operands, lowering={ANY_TARGET: lowering},
                       calls=calls or {}, pure=True, elementwise=True))


_NUMPY_OF = {}
for _np_name, _name in NUMPY.items():
    _spelled = f"np.{_name}" if _name in TO_INT else f"math.{_name}"
    _NUMPY_OF.setdefault(_name, {})[f"numpy.{_np_name}"] = _unary(_name, _spelled, numpy=True)

for _name in UNARY:
    _math(_name, FLOAT_UNARY,
          calls={getattr(math, _name): _unary(_name, f"math.{_name}"), **_NUMPY_OF.get(_name, {})})
for _name in BINARY:
    _calls = {getattr(math, _name): _binary(_name)}
    if _name == "pow":
        _calls[builtins.pow] = _builtin_pow
    _math(_name, FLOAT_BINARY, calls=_calls)
for _name in TO_INT:
    _math(_name, FLOAT_UNARY, calls={getattr(math, _name): _to_int(_name), **_NUMPY_OF[_name]})
_math("isnan", Operands(FLOAT, result=T.bool_), _lower_isnan, {math.isnan: _predicate("isnan")})
_math("isinf", Operands(FLOAT, result=T.bool_), _lower_isinf(False),
      {math.isinf: _predicate("isinf")})
_math("isfinite", Operands(FLOAT, result=T.bool_), _lower_isinf(True),
      {math.isfinite: _predicate("isfinite")})
_math("fma", Operands(FLOAT, Same(0), Same(0), result=Same(0)), calls={L.fma: _fma})
for _name, _np_names, _factor in (("degrees", ("degrees", "rad2deg"), 180.0 / math.pi),
                                  ("radians", ("radians", "deg2rad"), math.pi / 180.0)):
    _math(_name, FLOAT_UNARY, _lower_scale(_factor),
          calls={getattr(math, _name): _unary(_name, f"math.{_name}"),
                 **{f"numpy.{n}": _unary(_name, f"np.{n}") for n in _np_names}})
# round(x) of a float (frontend/builtins.py), and NumPy's rint
_math("rint", FLOAT_UNARY, calls={"numpy.rint": _unary("rint", "np.rint")})
_math("iabs", Operands(INT, result=Same(0)), _lower_iabs)  # abs() of a signed integer
_math("min", Operands(SCALAR, Same(0), result=Same(0)), _lower_minmax("<"))
_math("max", Operands(SCALAR, Same(0), result=Same(0)), _lower_minmax(">"))
