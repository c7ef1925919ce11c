"""Typing of calls inside kernels: kj.* builtins, math, casts, Python builtins, device functions.

Each callable a kernel may use maps (by identity) to a typing function that returns a typed
IR expression, usually an ``intrinsic`` node the targets lower.
"""

from __future__ import annotations

import ast
import builtins as py_builtins
import inspect
import math
import sys

from .. import language as L
from .. import types as T
from ..errors import TypingError, UnsupportedError
from .kir import Expr
from .values import PyObj, type_words

# math functions of one float argument whose result has the argument's type
MATH_UNARY = (
    "sqrt exp expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
    "acosh atanh erf erfc gamma lgamma fabs"
).split()
MATH_BINARY = "atan2 pow hypot copysign fmod".split()
MATH_TO_INT = "floor ceil trunc".split()
MATH_PREDICATES = "isnan isinf isfinite".split()

SREGS = {
    f"{reg}.{axis}": f"sreg.{ptx}.{axis}"
    for reg, ptx in (("threadIdx", "tid"), ("blockIdx", "ctaid"), ("blockDim", "ntid"),
                     ("gridDim", "nctaid"))
    for axis in "xyz"
}
SREGS["laneid"] = "sreg.laneid"

ATOMIC_INT_ONLY = {"and", "or", "xor", "inc", "dec"}
ATOMIC_DTYPES = (T.int32, T.uint32, T.int64, T.uint64, T.float32, T.float64)
SHUFFLE_DTYPES = (T.int32, T.uint32, T.int64, T.uint64, T.float32, T.float64)


def sreg_expr(typer, builtin: L.KernelBuiltin, node) -> Expr | None:
    name = SREGS.get(builtin.name)
    if name is None:
        return None
    return typer.intrinsic(name, T.int32, (), node)


def value_attribute(typer, base: Expr, attr: str, node) -> Expr:
    t = base.type
    if isinstance(t, T.ArrayType):
        if attr == "shape":
            items = tuple(
                Expr("shape", T.int64, (base,), attr=d, loc=typer.loc(node)) for d in range(t.ndim)
            )
            return Expr("tuple", T.TupleType((T.int64,) * t.ndim), items, loc=typer.loc(node))
        if attr == "ndim":
            return Expr("const", T.int64, attr=t.ndim, loc=typer.loc(node), weak=True)
        if attr == "size":
            size = Expr("shape", T.int64, (base,), attr=0, loc=typer.loc(node))
            for d in range(1, t.ndim):
                dim = Expr("shape", T.int64, (base,), attr=d, loc=typer.loc(node))
                size = Expr("binop", T.int64, (size, dim), attr="*", loc=typer.loc(node))
            return size
        typer.error(f"arrays in kernels have .shape, .size and .ndim, not .{attr}", node)
    typer.error(f"{type_words(t)} has no attribute {attr!r}", node)


def _args(typer, node, n_min: int, n_max: int | None = None, name: str = "") -> list[Expr]:
    if node.keywords:
        kw = node.keywords[0]
        typer.error(f"{name}() takes no keyword argument {kw.arg!r}", kw.value)
    n_max = n_min if n_max is None else n_max
    if not n_min <= len(node.args) <= n_max:
        want = str(n_min) if n_min == n_max else f"{n_min} to {n_max}"
        typer.error(f"{name}() takes {want} arguments, got {len(node.args)}", node)
    return [typer.expr(a) for a in node.args]


def _scalar(typer, e: Expr, node, what: str) -> T.ScalarType:
    if not isinstance(e.type, T.ScalarType):
        typer.error(f"{what} needs a number, got {type_words(e.type)}", node)
    return e.type


def _const_int(typer, node, what: str) -> int:
    e = typer.expr(node)
    if e.op != "const" or not isinstance(e.attr, int) or isinstance(e.attr, bool):
        typer.error(f"{what} must be a constant integer", node)
    return e.attr


def _const_shape(typer, node) -> tuple[int, ...]:
    e = typer.expr(node)
    items = list(e.args) if e.op == "tuple" else [e]
    shape = []
    for it in items:
        if it.op != "const" or not isinstance(it.attr, int) or isinstance(it.attr, bool):
            typer.error("the shape must be a constant integer or a tuple of them (a module-level "
                        "constant works)", node)
        if it.attr < 0:
            typer.error(f"shape dimensions must not be negative, got {it.attr}", node)
        shape.append(it.attr)
    return tuple(shape)


def _dtype_arg(typer, node) -> T.ScalarType:
    r = typer.visit(node)
    v = r.value if isinstance(r, PyObj) else None
    if isinstance(v, T.ScalarType):
        return v
    try:
        if v is not None and not isinstance(v, (int, float)):
            return T.from_dtype(v)
    except TypeError:
        pass
    typer.error("dtype must be a kaiojit or NumPy scalar type, e.g. kj.float32", node)


def _float_type(t: T.ScalarType) -> T.ScalarType:
    """The float type math on ``t`` computes in (integers promote to float64, as in Python)."""
    return t if t.is_float else T.float64


# --- the table ----------------------------------------------------------------------------------


def _cast(target: T.ScalarType):
    def typing(typer, node):
        (a,) = _args(typer, node, 1, 1, target.name)
        _scalar(typer, a, node.args[0], f"{target.name}()")
        if target.is_bool:
            return typer.truth(a, node)
        return typer.coerce(a, target, node) if a.type != target else a
    return typing


def _py_int(typer, node):
    (a,) = _args(typer, node, 1, 1, "int")
    t = _scalar(typer, a, node.args[0], "int()")
    if t.is_int and not a.weak:
        return a
    return typer.coerce(a, T.int64, node)


def _py_float(typer, node):
    (a,) = _args(typer, node, 1, 1, "float")
    _scalar(typer, a, node.args[0], "float()")
    return typer.coerce(a, T.float64, node)


def _py_bool(typer, node):
    (a,) = _args(typer, node, 1, 1, "bool")
    return typer.truth(a, node)


def _py_len(typer, node):
    (a,) = _args(typer, node, 1, 1, "len")
    if isinstance(a.type, T.ArrayType):
        return Expr("shape", T.int64, (a,), attr=0, loc=typer.loc(node))
    if isinstance(a.type, T.TupleType):
        return Expr("const", T.int64, attr=len(a.type.elements), loc=typer.loc(node), weak=True)
    typer.error(f"len() of {type_words(a.type)}", node.args[0])


def _py_abs(typer, node):
    (a,) = _args(typer, node, 1, 1, "abs")
    t = _scalar(typer, a, node.args[0], "abs()")
    if t.is_bool:
        a, t = typer.coerce(a, T.int64, node), T.int64
    if t.kind == "u":
        return a
    return Expr("intrinsic", t, (a,), attr="math.fabs" if t.is_float else "math.iabs",
                loc=typer.loc(node), weak=a.weak)


def _minmax(which: str):
    def typing(typer, node):
        if len(node.args) == 1:
            typer.error(f"{which}() of one value: pass two or more numbers", node)
        args = _args(typer, node, 2, 64, which)
        from .values import result_scalar
        t, weak = _scalar(typer, args[0], node.args[0], f"{which}()"), args[0].weak
        for a, n in zip(args[1:], node.args[1:]):
            _scalar(typer, a, n, f"{which}()")
            t, weak = result_scalar(t, weak, a.type, a.weak), weak and a.weak
        out = typer.coerce(args[0], t, node)
        for a in args[1:]:
            out = Expr("intrinsic", t, (out, typer.coerce(a, t, node)), attr=f"math.{which}",
                       loc=typer.loc(node), weak=weak)
        return out
    return typing


def _py_round(typer, node):
    if len(node.args) == 2:
        typer.error("round() with ndigits is not supported in kernels", node.args[1],
                    UnsupportedError)
    (a,) = _args(typer, node, 1, 1, "round")
    t = _scalar(typer, a, node.args[0], "round()")
    if not t.is_float:
        return a
    r = Expr("intrinsic", t, (a,), attr="math.rint", loc=typer.loc(node))
    return Expr("cast", T.int64, (r,), loc=typer.loc(node))


def _py_print(typer, node):
    if node.keywords:
        typer.error("print() keyword arguments are not supported in kernels", node.keywords[0].value,
                    UnsupportedError)
    args = []
    for a in node.args:
        e = typer.expr(a)
        if isinstance(e.type, T.ScalarType):
            if e.weak:
                e = typer.coerce(e, e.type, a)
        elif not isinstance(e.type, T.StringType):
            typer.error(f"print() takes scalars and string literals, not {type_words(e.type)}", a)
        args.append(e)
    return typer.intrinsic("print", T.void, args, node)


def _math_unary(name: str):
    def typing(typer, node):
        (a,) = _args(typer, node, 1, 1, f"math.{name}")
        t = _scalar(typer, a, node.args[0], f"math.{name}()")
        ft = _float_type(t)
        return Expr("intrinsic", ft, (typer.coerce(a, ft, node),), attr=f"math.{name}",
                    loc=typer.loc(node))
    return typing


def _math_binary(name: str):
    def typing(typer, node):
        a, b = _args(typer, node, 2, 2, f"math.{name}")
        from .values import result_scalar
        t = result_scalar(_scalar(typer, a, node.args[0], f"math.{name}()"), a.weak,
                           _scalar(typer, b, node.args[1], f"math.{name}()"), b.weak)
        ft = _float_type(t)
        return Expr("intrinsic", ft, (typer.coerce(a, ft, node), typer.coerce(b, ft, node)),
                    attr=f"math.{name}", loc=typer.loc(node))
    return typing


def _math_to_int(name: str):
    def typing(typer, node):
        (a,) = _args(typer, node, 1, 1, f"math.{name}")
        t = _scalar(typer, a, node.args[0], f"math.{name}()")
        if not t.is_float:
            return typer.coerce(a, T.int64, node)
        r = Expr("intrinsic", t, (a,), attr=f"math.{name}", loc=typer.loc(node))
        return Expr("cast", T.int64, (r,), loc=typer.loc(node))
    return typing


def _math_predicate(name: str):
    def typing(typer, node):
        (a,) = _args(typer, node, 1, 1, f"math.{name}")
        t = _scalar(typer, a, node.args[0], f"math.{name}()")
        if not t.is_float:
            return Expr("const", T.bool_, attr=(name == "isfinite"), loc=typer.loc(node))
        return Expr("intrinsic", T.bool_, (a,), attr=f"math.{name}", loc=typer.loc(node))
    return typing


def _kj_fma(typer, node):
    args = _args(typer, node, 3, 3, "kj.fma")
    from .values import result_scalar
    t, weak = args[0].type, args[0].weak
    for a, n in zip(args, node.args):
        _scalar(typer, a, n, "kj.fma()")
        t, weak = result_scalar(t, weak, a.type, a.weak), weak and a.weak
    ft = _float_type(t)
    return Expr("intrinsic", ft, tuple(typer.coerce(a, ft, node) for a in args), attr="math.fma",
                loc=typer.loc(node))


def _bits(name: str):
    def typing(typer, node):
        (a,) = _args(typer, node, 1, 1, f"kj.{name}")
        t = _scalar(typer, a, node.args[0], f"kj.{name}()")
        if not t.is_int:
            typer.error(f"kj.{name}() needs an integer, got {type_words(t)}", node.args[0])
        if a.weak:
            a, t = typer.coerce(a, T.int64, node), T.int64
        rt = t if name == "brev" else T.int32
        return Expr("intrinsic", rt, (a,), attr=f"bits.{name}", loc=typer.loc(node))
    return typing


def _grid(kind: str):
    def typing(typer, node):
        if len(node.args) != 1 or node.keywords:
            typer.error(f"kj.{kind}() takes one argument, the number of dimensions", node)
        ndim = _const_int(typer, node.args[0], f"kj.{kind}()'s argument")
        if ndim not in (1, 2, 3):
            typer.error(f"kj.{kind}() takes 1, 2 or 3, got {ndim}", node.args[0])
        items = tuple(
            typer.intrinsic(f"{kind}.{axis}", T.int64, (), node) for axis in "xyz"[:ndim]
        )
        if ndim == 1:
            return items[0]
        return Expr("tuple", T.TupleType((T.int64,) * ndim), items, loc=typer.loc(node))
    return typing


def _shared_array(typer, node):
    shape, dtype = _array_args(typer, node, "kj.shared.array")
    typer.shared_names += 1
    name = f"{typer.pyfunc.__name__}_smem{typer.shared_names}"
    dynamic = shape == (0,) or shape == ()
    ndim = 1 if dynamic else len(shape)
    at = T.ArrayType(dtype, ndim, "C")
    return Expr("shared", at, attr=(() if dynamic else shape, dtype, name), loc=typer.loc(node))


def _local_array(typer, node):
    shape, dtype = _array_args(typer, node, "kj.local.array")
    if not shape or 0 in shape:
        typer.error("kj.local.array needs a shape with no zero dimension", node.args[0])
    return Expr("local", T.ArrayType(dtype, len(shape), "C"), attr=(shape, dtype),
                loc=typer.loc(node))


def _array_args(typer, node, what: str):
    kwargs = {k.arg: k.value for k in node.keywords}
    pos = list(node.args)
    if len(pos) + len(kwargs) != 2:
        typer.error(f"{what}(shape, dtype) takes two arguments", node)
    shape_node = pos[0] if pos else kwargs.get("shape")
    dtype_node = pos[1] if len(pos) > 1 else kwargs.get("dtype")
    if shape_node is None or dtype_node is None:
        typer.error(f"{what}(shape, dtype) takes two arguments", node)
    return _const_shape(typer, shape_node), _dtype_arg(typer, dtype_node)


def _const_array_like(typer, node):
    if len(node.args) != 1:
        typer.error("kj.const.array_like(ndarray) takes one argument", node)
    r = typer.visit(node.args[0])
    arr = r.value if isinstance(r, PyObj) else None
    np = sys.modules.get("numpy")
    if np is None or not isinstance(arr, np.ndarray):
        typer.error("kj.const.array_like() needs a NumPy array defined outside the kernel",
                    node.args[0])
    dtype = T.from_dtype(arr.dtype)
    arr = np.ascontiguousarray(arr)
    name = f"{typer.pyfunc.__name__}_cmem{node.lineno}_{node.col_offset}"
    return Expr("constarray", T.ArrayType(dtype, max(arr.ndim, 1), "C"), attr=(arr, name),
                loc=typer.loc(node))


def _sync(name: str, nargs: int = 0, returns: T.Type = T.void):
    def typing(typer, node):
        args = _args(typer, node, nargs, nargs, f"kj.{name}")
        if name.startswith("syncthreads_"):
            args = [typer.truth(args[0], node.args[0])]
        typer.uses_sync = True
        return typer.intrinsic(f"sync.{name}", returns, args, node)
    return typing


def _syncwarp(typer, node):
    args = _args(typer, node, 0, 1, "kj.syncwarp")
    mask = typer.coerce(args[0], T.uint32, node) if args else \
        Expr("const", T.uint32, attr=0xFFFFFFFF)
    typer.uses_sync = True
    return typer.intrinsic("sync.syncwarp", T.void, [mask], node)


def _fence(name: str):
    def typing(typer, node):
        _args(typer, node, 0, 0, f"kj.{name}")
        return typer.intrinsic(f"fence.{name}", T.void, (), node)
    return typing


def _atomic(user_name: str):
    op = user_name.rstrip("_")
    nargs = 4 if op == "cas" else 3

    def typing(typer, node):
        args = _args(typer, node, nargs, nargs, f"kj.atomic.{user_name}")
        arr = args[0]
        if not isinstance(arr.type, T.ArrayType):
            typer.error(f"kj.atomic.{user_name}() needs an array first, got {type_words(arr.type)}",
                        node.args[0])
        dt = arr.type.dtype
        if dt not in ATOMIC_DTYPES or (dt.is_float and op in ATOMIC_INT_ONLY):
            typer.error(f"kj.atomic.{user_name}() is not supported on {dt} arrays", node.args[0])
        if op in ("inc", "dec") and dt not in (T.uint32, T.uint64):
            typer.error(f"kj.atomic.{user_name}() needs a uint32 or uint64 array, got {dt}", node.args[0])
        idx_node = node.args[1]
        indices = typer.index_exprs(arr, idx_node, node)
        if len(indices) != arr.type.ndim:
            typer.error(f"kj.atomic.{user_name}() needs {arr.type.ndim} indices for a "
                        f"{arr.type.ndim}-d array", idx_node)
        vals = []
        for v, n in zip(args[2:], node.args[2:]):
            _scalar(typer, v, n, f"kj.atomic.{user_name}()")
            vals.append(typer.coerce(v, dt, n))
        return typer.intrinsic(f"atomic.{op}", dt, (arr, *indices, *vals), node)
    return typing


def _shuffle(kind: str):
    user_name = "kj.shfl_sync" if kind == "idx" else f"kj.shfl_{kind}_sync"

    def typing(typer, node):
        mask, value, lane = _args(typer, node, 3, 3, user_name)
        t = _scalar(typer, value, node.args[1], f"{user_name}()")
        if value.weak:
            value = typer.coerce(value, t, node)
        if t not in SHUFFLE_DTYPES:
            if t.is_int or t.is_bool:
                value, t = typer.coerce(value, T.int32 if t.kind in "ib" else T.uint32, node), \
                    T.int32 if t.kind in "ib" else T.uint32
            else:
                typer.error(f"{user_name}() cannot shuffle {t}: use 32- or 64-bit "
                            "integers or floats", node.args[1])
        typer.uses_sync = True
        return typer.intrinsic(
            f"warp.shfl_{kind}", t,
            (typer.coerce(mask, T.uint32, node), value, typer.coerce(lane, T.int32, node)), node)
    return typing


def _vote(kind: str):
    def typing(typer, node):
        mask, pred = _args(typer, node, 2, 2, f"kj.{kind}_sync")
        typer.uses_sync = True
        rt = T.uint32 if kind == "ballot" else T.bool_
        return typer.intrinsic(f"warp.{kind}", rt,
                               (typer.coerce(mask, T.uint32, node), typer.truth(pred, node.args[1])),
                               node)
    return typing


def _activemask(typer, node):
    _args(typer, node, 0, 0, "kj.activemask")
    typer.uses_sync = True  # which lanes are active is a warp-level fact the cpu backend must keep
    return typer.intrinsic("warp.activemask", T.uint32, (), node)


def _no_range(typer, node):
    typer.error("range() can only be used in 'for ... in range(...)'", node, UnsupportedError)


def _build_table():
    table = {
        int: _py_int, float: _py_float, bool: _py_bool, len: _py_len, abs: _py_abs,
        min: _minmax("min"), max: _minmax("max"), round: _py_round, print: _py_print,
        range: _no_range, py_builtins.pow: _math_binary("pow"),
        L.fma: _kj_fma, L.grid: _grid("grid"), L.gridsize: _grid("gridsize"),
        L.shared.array: _shared_array, L.local.array: _local_array,
        L.const.array_like: _const_array_like,
        L.syncthreads: _sync("syncthreads"),
        L.syncthreads_count: _sync("syncthreads_count", 1, T.int32),
        L.syncthreads_and: _sync("syncthreads_and", 1, T.int32),
        L.syncthreads_or: _sync("syncthreads_or", 1, T.int32),
        L.syncwarp: _syncwarp,
        L.threadfence: _fence("threadfence"), L.threadfence_block: _fence("threadfence_block"),
        L.threadfence_system: _fence("threadfence_system"),
        L.shfl_sync: _shuffle("idx"), L.shfl_up_sync: _shuffle("up"),
        L.shfl_down_sync: _shuffle("down"), L.shfl_xor_sync: _shuffle("xor"),
        L.all_sync: _vote("all"), L.any_sync: _vote("any"), L.ballot_sync: _vote("ballot"),
        L.activemask: _activemask,
    }
    for name in ("popc", "clz", "ffs", "brev"):
        table[getattr(L, name)] = _bits(name)
    for op in ("add", "sub", "max", "min", "exch", "and_", "or_", "xor", "inc", "dec", "cas"):
        table[getattr(L.atomic, op)] = _atomic(op)
    for name in MATH_UNARY:
        table[getattr(math, name)] = _math_unary(name)
    for name in MATH_BINARY:
        table[getattr(math, name)] = _math_binary(name)
    for name in MATH_TO_INT:
        table[getattr(math, name)] = _math_to_int(name)
    for name in MATH_PREDICATES:
        table[getattr(math, name)] = _math_predicate(name)
    for t in T.SCALARS.values():
        table[t] = _cast(t)
    np = sys.modules.get("numpy")
    if np is None:
        return table  # NumPy's functions and scalar types join once the program imports it
    for t in T.SCALARS.values():
        if t is not T.bool_:
            table[t.np_dtype.type] = _cast(t)
    table[np.bool_] = _cast(T.bool_)
    for fname in ("sqrt", "exp", "log", "sin", "cos", "tan", "floor", "ceil", "trunc", "fabs",
                  "expm1", "log1p", "log2", "log10", "arcsin", "arccos", "arctan", "sinh",
                  "cosh", "tanh", "arcsinh", "arccosh", "arctanh"):
        mathname = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
                    "arccosh": "acosh", "arctanh": "atanh"}.get(fname, fname)
        if mathname in MATH_TO_INT:
            table[getattr(np, fname)] = _np_round_fn(mathname)
        else:
            table[getattr(np, fname)] = _math_unary(mathname)
    return table


def _np_round_fn(name: str):
    def typing(typer, node):
        (a,) = _args(typer, node, 1, 1, f"np.{name}")
        t = _float_type(_scalar(typer, a, node.args[0], f"np.{name}()"))
        return Expr("intrinsic", t, (typer.coerce(a, t, node),), attr=f"math.{name}",
                    loc=typer.loc(node))
    return typing


_TABLE = None
_TABLE_HAS_NUMPY = False


def call_builtin(typer, fn, node: ast.Call) -> Expr:
    global _TABLE, _TABLE_HAS_NUMPY
    if _TABLE is None or (not _TABLE_HAS_NUMPY and "numpy" in sys.modules):
        _TABLE_HAS_NUMPY = "numpy" in sys.modules
        _TABLE = _build_table()
    try:
        typing = _TABLE.get(fn)
    except TypeError:
        typing = None
    if typing is not None:
        return typing(typer, node)
    if getattr(fn, "_kaiojit_dispatcher", False):
        return _device_call(typer, fn, node)
    if isinstance(fn, L.KernelBuiltin):
        typer.error(f"kj.{fn.name} is not callable like this", node)
    from .values import describe
    if inspect.isfunction(fn):
        typer.error(f"function {fn.__name__!r} cannot be called from a kernel: decorate it with "
                    "@kj.jit(device=True) (or @kj.jit) to make it a device function", node.func,
                    UnsupportedError)
    typer.error(f"{describe(fn)} cannot be called from a kernel", node.func, UnsupportedError)


def _device_call(typer, dispatcher, node) -> Expr:
    if node.keywords:
        typer.error("device functions take positional arguments only", node.keywords[0].value)
    params = dispatcher.py_func.__code__.co_varnames[:dispatcher.py_func.__code__.co_argcount]
    if len(node.args) != len(params):
        typer.error(f"{dispatcher.__name__}() takes {len(params)} argument"
                    f"{'' if len(params) == 1 else 's'} ({', '.join(params)}), "
                    f"got {len(node.args)}", node)
    args = [typer.expr(a) for a in node.args]
    arg_types = []
    for a, n in zip(args, node.args):
        if isinstance(a.type, (T.StringType, T.VoidType)):
            typer.error(f"cannot pass {type_words(a.type)} to a device function", n)
        arg_types.append(a.type)
    try:
        callee = typer.specialize_device(dispatcher, tuple(arg_types), typer.loc(node))
    except TypeError as e:
        raise TypingError(str(e), typer.loc(node)) from None
    args = [typer.coerce(a, t, node) for a, (_, t) in zip(args, callee.params)]
    if callee not in typer.callees:
        typer.callees.append(callee)
    return Expr("call", callee.return_type, tuple(args), attr=callee, loc=typer.loc(node))
