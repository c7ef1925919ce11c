"""Complex numbers: the constructors ``complex(re, im)``, ``kj.complex64(re, im)``,
``kj.complex128(...)`` (and NumPy's), the parts ``z.real``, ``z.imag``, ``z.conjugate()``,
``abs(z)``, and Python's ``cmath`` functions. All pure.

Arithmetic on complex values is an ordinary ``binop`` node (lowered by
``kaiojit/lower/complexops.py``); what is declared here is what users call by name.
"""

from __future__ import annotations

import cmath

from llvmlite import ir

from .. import types as T
from .api import (ANY_TARGET, FLOAT, I8, I64, Expr, Intrinsic, Kind, Operands, Same, byte_strides,
                  call_args, complexinv, complexops, make_array, math_call, register,
                  result_scalar, scalar_arg)

COMPLEX = Kind("a complex number", lambda t: isinstance(t, T.ScalarType) and t.is_complex)


def complex_of(t: T.ScalarType) -> T.ScalarType:
    """The complex type a real number becomes (float32 and float16 give complex64, NumPy's
    rule; integers and float64 give complex128)."""
    if t.is_complex:
        return t
    return T.complex64 if t.is_float and t.bits <= 32 else T.complex128


def _as_complex(typer, e: Expr, node, what: str) -> Expr:
    t = scalar_arg(typer, e, node, what)
    return typer.coerce(e, T.complex128 if e.weak and not t.is_complex else complex_of(t), node)


# --- constructors --------------------------------------------------------------------------------

def _constructor(target: T.ScalarType | None, spelled: str):
    """``complex(re, im)`` (``target`` None: complex128, as Python) or ``kj.complex64(x)``."""
    def typing(typer, node):
        args = call_args(typer, node, 1, 2, spelled)
        for a, n in zip(args, node.args):
            scalar_arg(typer, a, n, f"{spelled}()")
        ct = target or T.complex128
        if len(args) == 1:
            return typer.coerce(args[0], ct, node)  # a cast (makes a weak literal strong)
        for a, n in zip(args, node.args):
            if a.type.is_complex:
                typer.error(f"{spelled}(re, im) takes real parts, got {a.type}", n)
        re, im = (typer.coerce(a, ct.component, node) for a in args)
        return typer.intrinsic("complex.make", ct, (re, im), node)
    return typing


# --- cmath ---------------------------------------------------------------------------------------

def _cmath_unary(name: str):
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, f"cmath.{name}")
        z = _as_complex(typer, a, node.args[0], f"cmath.{name}()")
        return typer.intrinsic(f"cmath.{name}", z.type, (z,), node)
    return typing


def _cmath_log(typer, node):
    """cmath.log(z) or cmath.log(z, base) = log(z) / log(base), as Python's."""
    args = call_args(typer, node, 1, 2, "cmath.log")
    zs = [_as_complex(typer, a, n, "cmath.log()") for a, n in zip(args, node.args)]
    ct = zs[0].type if len(zs) == 1 else result_scalar(zs[0].type, False, zs[1].type, False)
    logs = [typer.intrinsic("cmath.log", ct, (typer.coerce(z, ct, node),), node) for z in zs]
    if len(logs) == 1:
        return logs[0]
    return Expr("binop", ct, tuple(logs), attr="/", loc=typer.loc(node))


def _cmath_real(name: str, result):
    """cmath functions of a complex number with a real result (phase, isnan, ...)."""
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, f"cmath.{name}")
        z = _as_complex(typer, a, node.args[0], f"cmath.{name}()")
        return typer.intrinsic(f"cmath.{name}", result(z.type), (z,), node)
    return typing


def _polar(typer, node):
    (a,) = call_args(typer, node, 1, 1, "cmath.polar")
    z = _as_complex(typer, a, node.args[0], "cmath.polar()")
    pt = z.type.component
    r = typer.intrinsic("complex.abs", pt, (z,), node)
    phi = typer.intrinsic("cmath.phase", pt, (z,), node)
    return Expr("tuple", T.TupleType((pt, pt)), (r, phi), loc=typer.loc(node))


def _rect(typer, node):
    r, phi = call_args(typer, node, 2, 2, "cmath.rect")
    for a, n in zip((r, phi), node.args):
        if scalar_arg(typer, a, n, "cmath.rect()").is_complex:
            typer.error(f"cmath.rect(r, phi) takes real numbers, got {a.type}", n)
    t = result_scalar(r.type, r.weak, phi.type, phi.weak)
    pt = t if t.is_float else T.float64
    return typer.intrinsic("cmath.rect", complex_of(pt),
                           (typer.coerce(r, pt, node), typer.coerce(phi, pt, node)), node)


def _numpy_part(method: str):
    """``np.real(z)``, ``np.imag(z)``, ``np.conj(z)``: the scalar's attribute or method."""
    def typing(typer, node):
        from .api import scalar_attribute

        (a,) = call_args(typer, node, 1, 1, f"np.{method}")
        t = scalar_arg(typer, a, node.args[0], f"np.{method}()")
        if method == "conjugate":
            return typer.intrinsic("complex.conj", t, (a,), node) if t.is_complex else a
        return scalar_attribute(typer, a, method, node)
    return typing


def _numpy_abs(typer, node):
    from .api import call_builtin

    return call_builtin(typer, abs, node)  # np.abs is abs of a number (complex: its modulus)


# --- lowering ------------------------------------------------------------------------------------

def _lower_make(fl, e: Expr):
    return complexops.make(fl, e.type, *(fl.expr(a) for a in e.args))


def _lower_part(index: int):
    def lower(fl, e: Expr):
        return fl.builder.extract_value(fl.expr(e.args[0]), index)
    return lower


def _lower_conj(fl, e: Expr):
    return complexops.conj(fl, e.type, fl.expr(e.args[0]))


def _lower_abs(fl, e: Expr):
    return complexops.magnitude(fl, e.args[0].type, fl.expr(e.args[0]))


def _lower_phase(fl, e: Expr):
    return complexops.phase(fl, e.args[0].type, fl.expr(e.args[0]))


def _lower_cmath(name: str):
    def lower(fl, e: Expr):
        return complexinv.cmath_call(fl, name, e.type, fl.expr(e.args[0]))
    return lower


def _lower_rect(fl, e: Expr):
    r, phi = (fl.expr(a) for a in e.args)
    return complexops.make(fl, e.type, *complexinv.rect_parts(fl, e.type.component, r, phi))


def _lower_test(which: str):
    def lower(fl, e: Expr):
        b = fl.builder
        re, im = complexops.parts(fl, fl.expr(e.args[0]))
        pt = e.args[0].type.component
        if which == "isnan":
            return b.or_(b.fcmp_unordered("uno", re, re), b.fcmp_unordered("uno", im, im))
        inf = re.type(float("inf"))
        ar, ai = math_call(fl, "fabs", pt, [re]), math_call(fl, "fabs", pt, [im])
        if which == "isinf":
            return b.or_(b.fcmp_ordered("==", ar, inf), b.fcmp_ordered("==", ai, inf))
        return b.and_(b.fcmp_ordered("<", ar, inf), b.fcmp_ordered("<", ai, inf))
    return lower


# --- declarations --------------------------------------------------------------------------------

def _check_part_view(e: Expr) -> str | None:
    at = e.args[0].type if len(e.args) == 1 else None
    if not (isinstance(at, T.ArrayType) and isinstance(at.dtype, T.ScalarType)
            and at.dtype.is_complex):
        return "takes one array of complex numbers"
    want = T.ArrayType(at.dtype.component, at.ndim)
    return None if e.type == want else f"result is {e.type}, expected {want}"


def _lower_part_view(index: int):
    """``a.real`` / ``a.imag`` of a complex array: the same shape and byte strides, the data
    pointer moved to the part (a view: writes and atomics through it reach ``a``)."""
    def lower(fl, e: Expr):
        b = fl.builder
        at = e.args[0].type
        arr = fl.expr(e.args[0])
        ptr = b.extract_value(arr, 0)
        if index:
            ptr = b.gep(ptr, [ir.Constant(I64, at.dtype.component.itemsize)], source_etype=I8)
        shape = [b.extract_value(arr, [1, d]) for d in range(at.ndim)]
        return make_array(b, ptr, shape, at.dtype.component, "A",
                          byte_strides(b, arr, at, shape))
    return lower


def _declare(name: str, operands, lowering, calls=None) -> None:
    register(Intrinsic(name=name, operands=operands, lowering={ANY_TARGET: lowering},
                       calls=calls or {}, pure=True, elementwise=True))


def _part_of(index: int):
    """The result type check of an intrinsic whose result is its operand's part type."""
    def check(e: Expr) -> str | None:
        t = e.args[0].type if len(e.args) == 1 else None
        if not (isinstance(t, T.ScalarType) and t.is_complex):
            return f"operand is {t}, expected a complex number"
        return None if e.type == t.component else f"result is {e.type}, expected {t.component}"
    return check


def _make_check(e: Expr) -> str | None:
    why = Operands(FLOAT, Same(0), result=COMPLEX)(e)
    if why is None and e.type.component != e.args[0].type:
        return f"parts of {e.args[0].type} make no {e.type}"
    return why


for _index, _part in enumerate(("real", "imag")):
    register(Intrinsic(name=f"array.{_part}", operands=_check_part_view,
                       lowering={ANY_TARGET: _lower_part_view(_index)}, pure=True, view=True))
_declare("complex.make", _make_check, _lower_make, calls={
    complex: _constructor(None, "complex"),
    T.complex64: _constructor(T.complex64, "complex64"),
    T.complex128: _constructor(T.complex128, "complex128"),
    "numpy.complex64": _constructor(T.complex64, "np.complex64"),
    "numpy.complex128": _constructor(T.complex128, "np.complex128"),
})
_declare("complex.real", _part_of(0), _lower_part(0), calls={"numpy.real": _numpy_part("real")})
_declare("complex.imag", _part_of(1), _lower_part(1), calls={"numpy.imag": _numpy_part("imag")})
_declare("complex.conj", Operands(COMPLEX, result=Same(0)), _lower_conj,
         calls={"numpy.conj": _numpy_part("conjugate"),
                "numpy.conjugate": _numpy_part("conjugate")})
_declare("complex.abs", _part_of(0), _lower_abs,
         calls={"numpy.abs": _numpy_abs, "numpy.absolute": _numpy_abs})
_declare("cmath.phase", _part_of(0), _lower_phase,
         calls={cmath.phase: _cmath_real("phase", lambda t: t.component), cmath.polar: _polar})
_declare("cmath.rect", Operands(FLOAT, Same(0), result=COMPLEX), _lower_rect,
         calls={cmath.rect: _rect})
for _name in complexinv.CMATH:
    _declare(f"cmath.{_name}", Operands(COMPLEX, result=Same(0)), _lower_cmath(_name),
             calls={getattr(cmath, _name): _cmath_log if _name == "log" else _cmath_unary(_name)}
             if hasattr(cmath, _name) else None)  # log2: NumPy's np.log2 of a complex number
for _name in ("isnan", "isinf", "isfinite"):
    _declare(f"cmath.{_name}", Operands(COMPLEX, result=T.bool_), _lower_test(_name),
             calls={getattr(cmath, _name): _cmath_real(_name, lambda t: T.bool_)})
