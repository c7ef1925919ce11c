"""NumPy's whole-array reductions in kernels: ``np.sum(a)``, ``np.mean(a)``, ``np.nanmax(a)``,
``np.all(a)``, ``np.count_nonzero(a)``, ... (numba's array reductions).

The thread that calls one reduces every element of the array itself, in C order, with
NumPy's result type and NumPy's answers on NaN, infinities and signed zeros (``min``/``max``
propagate a NaN, the ``nan`` forms skip them, ``nansum`` counts a NaN as 0). Each reduction is
a device function generated as Python source for the array's rank and element kind and typed
as any device function is, so it specializes on the array type like user code.
No ``axis``, ``dtype`` or ``out`` argument (numba's kernels take none either). An empty
array's ``min``/``max`` is NaN for floats and 0 for integers, where NumPy raises.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

from .. import types as T
from ..kir import Expr
from .source import generated_function

# numba's reductions, by their NumPy names
_NAMES = ("sum", "prod", "mean", "var", "std", "min", "max", "amin", "amax", "nansum",
          "nanprod", "nanmean", "nanvar", "nanstd", "nanmin", "nanmax", "all", "any",
          "count_nonzero")
_COMPLEX_OK = frozenset({"sum", "prod", "mean", "nansum", "nanprod", "nanmean", "all", "any",
                         "count_nonzero"})
_ALIASES = {"amin": "min", "amax": "max"}


def reduction_table() -> dict[object, Callable]:
    """NumPy's reduction functions -> their typing rules (empty without NumPy)."""
    np = sys.modules.get("numpy")
    if np is None:
        return {}
    return {getattr(np, name): _typing(name) for name in _NAMES if hasattr(np, name)}


ARRAY_METHODS = frozenset({"sum", "prod", "mean", "var", "std", "min", "max", "all", "any"})


def reduce_method(typer, name: str, arr: Expr, node) -> Expr:
    """``a.sum()`` and the other reductions NumPy's arrays have as methods."""
    if node.args or node.keywords:
        typer.error(f"a.{name}() in a kernel takes no arguments (no axis, dtype or out)", node)
    return reduce_array(typer, name, arr, node)


def _typing(name: str) -> Callable:
    def typing(typer, node) -> Expr:
        if len(node.args) != 1 or node.keywords:
            typer.error(f"np.{name}() in a kernel takes one array (no axis, dtype or out)", node)
        return reduce_array(typer, name, typer.expr(node.args[0]), node)
    return typing


def reduce_array(typer, name: str, arr: Expr, node) -> Expr:
    """The call of the reduction ``name`` of the array ``arr``."""
    name = _ALIASES.get(name, name)
    t = arr.type
    if not isinstance(t, T.ArrayType) or not isinstance(t.dtype, T.ScalarType):
        typer.error(f"np.{name}() takes an array of numbers in kernels, got "
                    f"{getattr(t, 'name', t)}", node)
    dtype = t.dtype
    if dtype.is_complex and name not in _COMPLEX_OK:
        typer.error(f"np.{name}() of complex numbers is not supported in kernels", node)
    if dtype.kind not in "biufc":
        typer.error(f"np.{name}() takes an array of numbers in kernels, got {dtype}", node)
    callee = typer.specialize_device(_device_function(name, t.ndim, dtype), (t,),
                                     typer.loc(node))
    if callee not in typer.callees:
        typer.callees.append(callee)
    return Expr("call", callee.return_type, (arr,), attr=callee, loc=typer.loc(node))


# --- the generated device functions ------------------------------------------------------------

_FUNCTIONS: dict[tuple, object] = {}


def _device_function(name: str, ndim: int, dtype: T.ScalarType):
    acc, result = _types(name, dtype)
    kind = "b" if dtype.is_bool else ("f" if dtype.is_float else dtype.kind)
    key = (name, ndim, kind, acc, result)
    fn = _FUNCTIONS.get(key)
    if fn is None:
        fname = f"np_{name}_{ndim}d"
        source = _source(fname, name, ndim, kind)
        pyfunc = generated_function(
            fname, source, {"ACC": acc, "RES": result, "math": math, "NAN": math.nan})
        # kaiojit is loaded whenever a kernel is typed; the frontend does not import the
        # dispatcher's stage, it asks the package for a device function
        fn = _FUNCTIONS[key] = sys.modules["kaiojit"].jit(device=True)(pyfunc)
    return fn


def _types(name: str, dtype: T.ScalarType) -> tuple[T.ScalarType, T.ScalarType]:
    """The accumulator's type and the result's, as NumPy's reductions give them."""
    if name in ("all", "any"):
        return T.bool_, T.bool_
    if name == "count_nonzero":
        return T.int64, T.int64
    integral = dtype.is_bool or dtype.kind in "iu"
    if name in ("sum", "prod", "nansum", "nanprod"):
        if integral:
            wide = T.uint64 if dtype.kind == "u" else T.int64
            return wide, wide
        return dtype, dtype
    if name in ("min", "max", "nanmin", "nanmax"):
        return dtype, dtype
    if integral:  # mean, var, std and their nan forms
        return T.float64, T.float64
    if dtype == T.float16:  # NumPy computes them in float32 and rounds the result
        return T.float32, T.float16
    return dtype, dtype


def _source(fname: str, name: str, ndim: int, kind: str) -> str:
    floating = kind in "fc"
    nan_aware = name.startswith("nan") and floating
    truth = "v" if kind == "b" else "v != 0"
    index = ", ".join(f"i{d}" for d in range(ndim)) if ndim else "()"
    head, element, tail = _parts(name.removeprefix("nan") if name.startswith("nan") else name,
                                 nan_aware, floating, truth)
    lines = [f"def {fname}(a):"] + [f"    {x}" for x in head]
    depth = 1
    for d in range(ndim):
        lines.append("    " * depth + f"for i{d} in range(a.shape[{d}]):")
        depth += 1
    lines.append("    " * depth + f"v = a[{index}]")
    lines += ["    " * depth + x for x in element]
    if name in ("var", "std", "nanvar", "nanstd"):  # a second pass, over the deviations
        count = "n" if nan_aware else "a.size"
        lines += [f"    m = s / ACC({count})", "    q = ACC(0)"]
        depth = 1
        for d in range(ndim):
            lines.append("    " * depth + f"for i{d} in range(a.shape[{d}]):")
            depth += 1
        lines.append("    " * depth + f"v = a[{index}]")
        pad = "    " * depth
        if nan_aware:
            lines += [pad + "if v == v:", pad + "    d = ACC(v) - m", pad + "    q = q + d * d"]
        else:
            lines += [pad + "d = ACC(v) - m", pad + "q = q + d * d"]
    lines += [f"    {x}" for x in tail]
    return "\n".join(lines) + "\n"


def _parts(base: str, nan_aware: bool, floating: bool, truth: str
           ) -> tuple[list[str], list[str], list[str]]:
    """The lines before the element loop, in it (``v`` is the element) and after it."""
    if base in ("sum", "prod"):
        start = "0" if base == "sum" else "1"
        op = "+" if base == "sum" else "*"
        value = f"(ACC(v) if v == v else ACC({start}))" if nan_aware else "ACC(v)"
        return [f"s = ACC({start})"], [f"s = s {op} {value}"], ["return s"]
    if base in ("mean", "var", "std"):
        count = "n" if nan_aware else "a.size"
        element = (["if v == v:", "    s = s + ACC(v)", "    n += 1"] if nan_aware
                   else ["s = s + ACC(v)"])
        if base == "mean":
            return ["s = ACC(0)", "n = 0"], element, [f"return RES(s / ACC({count}))"]
        finish = f"q / ACC({count})"  # after the second pass (_source), over the deviations
        if base == "std":
            finish = f"math.sqrt({finish})"
        return ["s = ACC(0)", "n = 0"], element, [f"return RES({finish})"]
    if base in ("min", "max"):
        better = "<" if base == "min" else ">"
        start = "ACC(NAN)" if floating else "ACC(0)"
        if nan_aware:
            element = [f"if v == v and (not seen or ACC(v) {better} m):",
                       "    m = ACC(v)", "    seen = True"]
        else:
            nan = " or v != v" if floating else ""
            element = ["if not seen:", "    m = ACC(v)", "    seen = True",
                       f"elif ACC(v) {better} m{nan}:", "    m = ACC(v)"]
        return [f"m = {start}", "seen = False"], element, ["return m"]
    if base == "all":
        return [], [f"if not ({truth}):", "    return False"], ["return True"]
    if base == "any":
        return [], [f"if {truth}:", "    return True"], ["return False"]
    return ["n = ACC(0)"], [f"if {truth}:", "    n = n + 1"], ["return n"]  # count_nonzero
