"""Atomics on global or shared arrays, returning the old value: ``kj.atomic.add, sub, max, min,
nanmax, nanmin, exch, and_, or_, xor, inc, dec`` as ``(array, index, value)`` and
``kj.atomic.cas(array, index, old, value)``. Each writes through its array operand (operand 0);
the target lowers the read-modify-write itself (``Target.atomic``).

Floats: ``max``/``min`` are Python's (and numba's) ``max(old, value)``: a NaN already in memory
stays, a NaN value leaves memory as it is; ``nanmax``/``nanmin`` ignore NaNs (a NaN in memory
is replaced by the value), as NumPy's ``nanmax``. On integers the two pairs are the same."""

from __future__ import annotations

from .. import language as L
from .. import types as T
from .api import ANY_TARGET, Expr, Intrinsic, call_args, register, scalar_arg, type_words

INT_ONLY = {"and", "or", "xor", "inc", "dec"}
DTYPES = (T.int32, T.uint32, T.int64, T.uint64, T.float32, T.float64)
OPS = ("add", "sub", "max", "min", "nanmax", "nanmin", "exch", "and_", "or_", "xor", "inc", "dec", "cas")


def _typing(user_name: str):
    op = user_name.rstrip("_")
    nargs = 4 if op == "cas" else 3

    def typing(typer, node):
        args = call_args(typer, node, nargs, nargs, f"kj.atomic.{user_name}")
        arr = args[0]
        if not isinstance(arr.type, T.ArrayType):
            typer.error(f"kj.atomic.{user_name}() needs an array first, got {type_words(arr.type)}",
                        node.args[0])
        dt = arr.type.dtype
        if dt not in DTYPES or (dt.is_float and op in INT_ONLY):
            typer.error(f"kj.atomic.{user_name}() is not supported on {dt} arrays", node.args[0])
        if op in ("inc", "dec") and dt not in (T.uint32, T.uint64):
            typer.error(f"kj.atomic.{user_name}() needs a uint32 or uint64 array, got {dt}",
                        node.args[0])
        idx_node = node.args[1]
        indices = typer.index_exprs(arr, idx_node, node)
        if len(indices) != arr.type.ndim:
            typer.error(f"kj.atomic.{user_name}() needs {arr.type.ndim} indices for a "
                        f"{arr.type.ndim}-d array", idx_node)
        vals = []
        for v, n in zip(args[2:], node.args[2:]):
            scalar_arg(typer, v, n, f"kj.atomic.{user_name}()")
            vals.append(typer.coerce(v, dt, n))
        return typer.intrinsic(f"atomic.{op}", dt, (arr, *indices, *vals), node)
    return typing


def _operands(nvals: int):
    """(array, one integer index per dimension, ``nvals`` values of its dtype) -> its dtype."""
    def check(e: Expr) -> str | None:
        at = e.args[0].type if e.args else None
        if not isinstance(at, T.ArrayType):
            return "operand 0 must be an array"
        if len(e.args) != 1 + at.ndim + nvals:
            return (f"takes an array, {at.ndim} indices and {nvals} values, got "
                    f"{len(e.args)} operands")
        for i, a in enumerate(e.args[1:], 1):
            ok = a.type == at.dtype if i > at.ndim else (
                isinstance(a.type, T.ScalarType) and a.type.is_int)
            if not ok:
                return f"operand {i} is {a.type}"
        return None if e.type == at.dtype else f"result is {e.type}, expected {at.dtype}"
    return check


def _lower(fl, e: Expr):
    at = e.args[0].type
    n = at.ndim
    arr = fl.expr(e.args[0])
    idx_exprs = e.args[1:1 + n]
    indices = [fl.expr(i) for i in idx_exprs]
    vals = [fl.expr(v) for v in e.args[1 + n:]]
    fl.array_name = str(e.args[0])
    ptr = fl.element_pointer(arr, at, indices, idx_exprs, e.loc)
    return fl.target.atomic(fl, e.attr[len("atomic."):], at.dtype, ptr, vals)


for _user in OPS:
    register(Intrinsic(
        name=f"atomic.{_user.rstrip('_')}", operands=_operands(2 if _user == "cas" else 1),
        lowering={ANY_TARGET: _lower}, calls={getattr(L.atomic, _user): _typing(_user)},
        writes=(0,)))
