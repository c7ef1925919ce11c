"""NumPy ufuncs called with output arrays inside a kernel: ``np.sin(x, out)``,
``np.greater(a, b, out)``, as numba compiles them (its array-expression support).

The statement is rewritten, before typing, into a loop over the output's elements in the
calling thread: each element is the ufunc of the inputs' elements there, NumPy's
broadcasting applied (an input of fewer dimensions lines up with the trailing ones, a
dimension of length 1 repeats). The per-element computation is the scalar form kaiojit
already types (``np.sin(v)`` of a number is ``math.sin``), or, for the ufuncs that have no
scalar function of their own, Python's operators: comparisons (of complex numbers
lexicographic, as NumPy orders them), ``logical_*``, ``bitwise_*``, ``maximum``/``minimum``
(a NaN wins) and ``fmax``/``fmin`` (a NaN loses).
"""

from __future__ import annotations

import ast
import math
import sys

from .. import types as T
from .iteration import PyValue, _call, _located, _name

_COMPARE = {"greater": ast.Gt, "greater_equal": ast.GtE, "less": ast.Lt,
            "less_equal": ast.LtE, "equal": ast.Eq, "not_equal": ast.NotEq}
_BITWISE = {"bitwise_and": ast.BitAnd, "bitwise_or": ast.BitOr, "bitwise_xor": ast.BitXor}
_MATH = {"arctan2": math.atan2, "hypot": math.hypot, "deg2rad": math.radians,
         "radians": math.radians, "rad2deg": math.degrees, "degrees": math.degrees}


def ufunc_statement(typer, node: ast.Expr) -> list[ast.stmt] | None:
    """The loop replacing ``node`` if it calls a NumPy ufunc with its outputs given as
    arrays, else None (the call is typed as it stands)."""
    call = node.value
    np = sys.modules.get("numpy")
    if np is None or not isinstance(call, ast.Call) or not (call.args or call.keywords):
        return None
    fn = typer.visit(call.func)
    uf = getattr(fn, "value", None)
    if not isinstance(uf, np.ufunc) or uf.nout != 1:
        return None
    args = list(call.args)
    for kw in call.keywords:
        if kw.arg != "out":
            return None
        args.append(kw.value.elts[0] if isinstance(kw.value, ast.Tuple) else kw.value)
    if len(args) != uf.nin + 1:
        return None
    types = [typer.expr(a).type for a in args]
    out_t = types[-1]
    if not isinstance(out_t, T.ArrayType) or not all(
            isinstance(t, (T.ArrayType, T.ScalarType)) for t in types[:-1]):
        return None
    where = f"{call.lineno}_{call.col_offset}"
    names = [f"$uf{where}_{k}" for k in range(len(args))]
    prelude = [ast.Assign(targets=[_name(n, True)], value=a) for n, a in zip(names, args)]
    out = names[-1]
    flat, rest = f"$uflat{where}", f"$urest{where}"
    idx = [f"$ui{where}_{d}" for d in range(out_t.ndim)]
    body: list[ast.stmt] = [ast.Assign(targets=[_name(rest, True)], value=_name(flat))]
    for d in range(out_t.ndim - 1, -1, -1):
        extent = _shape(out, d)
        body.append(ast.Assign(targets=[_name(idx[d], True)],
                               value=ast.BinOp(left=_name(rest), op=ast.Mod(), right=extent)))
        body.append(ast.Assign(targets=[_name(rest, True)], value=ast.BinOp(
            left=_name(rest), op=ast.FloorDiv(), right=_shape(out, d))))
    elems = [_element(n, t, idx) for n, t in zip(names[:-1], types[:-1])]
    value = _scalar(uf, elems, types[:-1])
    target = ast.Subscript(value=_name(out), ctx=ast.Store(),
                           slice=ast.Tuple(elts=[_name(i) for i in idx], ctx=ast.Load()))
    body.append(ast.Assign(targets=[target], value=value))
    size = ast.Attribute(value=_name(out), attr="size", ctx=ast.Load())
    loop = ast.For(target=_name(flat, True), iter=_call(range, size), body=body, orelse=[],
                   type_comment=None)
    return _located(prelude + [loop], node)


def _shape(name: str, d: int) -> ast.expr:
    shape = ast.Attribute(value=_name(name), attr="shape", ctx=ast.Load())
    return ast.Subscript(value=shape, slice=ast.Constant(d), ctx=ast.Load())


def _element(name: str, t: T.Type, idx: list[str]) -> ast.expr:
    """An input's element at the output's index: NumPy's broadcasting (trailing dimensions
    line up; one of length 1 repeats its element)."""
    if not isinstance(t, T.ArrayType):
        return _name(name)
    if t.ndim == 0:
        return ast.Subscript(value=_name(name), slice=ast.Tuple(elts=[], ctx=ast.Load()),
                             ctx=ast.Load())
    mine = idx[len(idx) - t.ndim:]
    at = [_call(min, _name(i), ast.BinOp(left=_shape(name, d), op=ast.Sub(),
                                         right=ast.Constant(1)))
          for d, i in enumerate(mine)]
    return ast.Subscript(value=_name(name), slice=ast.Tuple(elts=at, ctx=ast.Load()),
                         ctx=ast.Load())


def _is_complex(t: T.Type) -> bool:
    dt = t.dtype if isinstance(t, T.ArrayType) else t
    return isinstance(dt, T.ScalarType) and dt.is_complex


def _attr(e: ast.expr, name: str) -> ast.expr:
    return ast.Attribute(value=e, attr=name, ctx=ast.Load())


def _cmp(a: ast.expr, op: type, b: ast.expr) -> ast.expr:
    return ast.Compare(left=a, ops=[op()], comparators=[b])


def _order(a: ast.expr, op: type, b: ast.expr, complex_: bool) -> ast.expr:
    """``a op b``; for complex numbers NumPy's lexicographic order (real parts, then
    imaginary)."""
    if not complex_ or op in (ast.Eq, ast.NotEq):
        return _cmp(a, op, b)
    strict = {ast.GtE: ast.Gt, ast.LtE: ast.Lt}.get(op, op)
    first = _cmp(_attr(a, "real"), strict, _attr(b, "real"))
    tie = ast.BoolOp(op=ast.And(), values=[_cmp(_attr(a, "real"), ast.Eq, _attr(b, "real")),
                                            _cmp(_attr(a, "imag"), op, _attr(b, "imag"))])
    return ast.BoolOp(op=ast.Or(), values=[first, tie])


def _truth(e: ast.expr) -> ast.expr:
    return _cmp(e, ast.NotEq, ast.Constant(0))


def _is_nan(e: ast.expr, complex_: bool) -> ast.expr:
    if complex_:
        return ast.BoolOp(op=ast.Or(), values=[_cmp(_attr(e, "real"), ast.NotEq,
                                                     _attr(e, "real")),
                                                _cmp(_attr(e, "imag"), ast.NotEq,
                                                     _attr(e, "imag"))])
    return _cmp(e, ast.NotEq, e)


def _pick(cond: ast.expr, a: ast.expr, b: ast.expr) -> ast.expr:
    return ast.IfExp(test=cond, body=a, orelse=b)


def _scalar(uf, elems: list[ast.expr], types: list[T.Type]) -> ast.expr:
    """The ufunc of one element of each input."""
    name = uf.__name__
    complex_ = any(_is_complex(t) for t in types)
    if name in _COMPARE:
        return _order(elems[0], _COMPARE[name], elems[1], complex_)
    if name in _BITWISE:
        return ast.BinOp(left=elems[0], op=_BITWISE[name](), right=elems[1])
    if name in ("invert", "bitwise_not"):
        dt = types[0].dtype if isinstance(types[0], T.ArrayType) else types[0]
        if dt == T.bool_:
            return ast.UnaryOp(op=ast.Not(), operand=elems[0])
        return ast.UnaryOp(op=ast.Invert(), operand=elems[0])
    if name == "logical_not":
        return ast.UnaryOp(op=ast.Not(), operand=_truth(elems[0]))
    if name in ("logical_and", "logical_or"):
        op = ast.BitAnd() if name == "logical_and" else ast.BitOr()
        return ast.BinOp(left=_truth(elems[0]), op=op, right=_truth(elems[1]))
    if name == "logical_xor":
        return _cmp(_truth(elems[0]), ast.NotEq, _truth(elems[1]))
    if name in ("maximum", "minimum", "fmax", "fmin"):
        a, b = elems
        keep_a = _order(a, ast.GtE if name in ("maximum", "fmax") else ast.LtE, b, complex_)
        chosen = _pick(keep_a, a, b)
        if name in ("maximum", "minimum"):  # a NaN wins, the first of two
            return _pick(_is_nan(a, complex_), a, _pick(_is_nan(b, complex_), b, chosen))
        return _pick(_is_nan(a, complex_), b, _pick(_is_nan(b, complex_), a, chosen))
    fn = _MATH.get(name, uf)
    return ast.Call(func=PyValue(fn), args=elems, keywords=[])
