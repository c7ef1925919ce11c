"""Typing of calls inside kernels that are not intrinsics: Python's builtins (``int``, ``len``,
``abs``, ``min``, ``round``...), casts to scalar types, the memory spaces (``kj.shared.array``,
``kj.local.array``, ``kj.const.array_like``) and device functions. Every other callable is
looked up in the intrinsic registry (``kaiojit.kir.intrinsics``), by identity.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import math
import sys

from .. import language as L
from .. import types as T
from ..errors import CompileError, TypingError, UnsupportedError
from ..kir import Expr
from ..kir.intrinsics import call_typing, value_intrinsic
from ..overloads import best_signature
from .arguments import call_args, const_shape, dtype_arg, scalar_arg
from .operators import operator_table
from .recursion import call_return_type
from .reductions import ARRAY_METHODS, reduce_method, reduction_table
from .values import PyObj, describe, is_ndarray, result_scalar, type_words


def value_builtin(typer, obj: object, node) -> Expr | None:
    """A kernel object used as a value (``kj.threadIdx.x``): the intrinsic it reads, or None."""
    decl = value_intrinsic(obj)
    if decl is None:
        return None
    return typer.intrinsic(decl.name, decl.operands.result, (), node)


def value_attribute(typer, base: Expr, attr: str, node) -> Expr:
    """``a.shape``, ``a.size``, ``a.ndim``, ``a.dtype`` of an array value."""
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
            if t.ndim == 0:  # a 0-d array holds one element
                return Expr("const", T.int64, attr=1, loc=typer.loc(node), weak=True)
            size = Expr("shape", T.int64, (base,), attr=0, loc=typer.loc(node))
            for d in range(1, t.ndim):
                dim = Expr("shape", T.int64, (base,), attr=d, loc=typer.loc(node))
                size = Expr("binop", T.int64, (size, dim), attr="*", loc=typer.loc(node))
            return size
        if attr == "dtype":  # a type, as a global dtype is: cuda.local.array(n, a.dtype)
            return PyObj(t.dtype)
        if attr in ("real", "imag") and isinstance(t.dtype, T.ScalarType):
            if t.dtype.is_complex:  # a strided view of the parts, as NumPy's
                return typer.intrinsic(f"array.{attr}", T.ArrayType(t.dtype.component, t.ndim),
                                       (base,), node)
            if attr == "real":
                return base
        if attr == "reshape":
            return PyObj(_BoundMethod(lambda typer, call: _reshape(typer, base, call)))
        if attr in ARRAY_METHODS:  # a.sum(), a.max(), ...: reductions.py
            return PyObj(_BoundMethod(lambda typer, call: reduce_method(typer, attr, base,
                                                                          call)))
        typer.error(f"arrays in kernels have .shape, .size, .ndim, .dtype, .reshape(), the "
                    f"reductions ({', '.join(sorted(ARRAY_METHODS))}) and .real, .imag of "
                    f"complex arrays, not .{attr}", node)
    if isinstance(t, T.RecordType):
        from .records import get_field
        return get_field(typer, base, attr, node)
    if isinstance(t, T.NamedTupleType) and attr in t.fields:
        return typer.tuple_item(base, t.fields.index(attr))
    if isinstance(t, T.GridGroupType) and attr == "sync":
        def sync(typer, call):
            call_args(typer, call, 0, 0, "sync")
            return typer.intrinsic("cg.grid_sync", T.void, (), call)
        return PyObj(_BoundMethod(sync))
    if isinstance(t, T.ScalarType):
        found = scalar_attribute(typer, base, attr, node)
        if found is not None:
            return found
    typer.error(f"{type_words(t)} has no attribute {attr!r}", node)


def _reshape(typer, base: Expr, node) -> Expr:
    """``a.reshape(shape)`` / ``a.reshape(d0, d1, ...)`` of a C-contiguous array: a view with
    as many dimensions as the shape has extents (one may be -1, NumPy's)."""
    if node.keywords or not node.args:
        typer.error("a.reshape(shape) takes the new shape", node)
    parts = [typer.expr(a) for a in node.args]
    if len(parts) == 1 and isinstance(parts[0].type, T.TupleType):
        shape = parts[0]
        parts = [typer.tuple_item(shape, i) for i in range(len(shape.type.elements))]
    for p in parts:
        if not (isinstance(p.type, T.ScalarType) and p.type.is_int):
            typer.error(f"a.reshape() takes integer extents, got {type_words(p.type)}", node)
    if base.type.layout != "C":
        typer.error(f"a.reshape() in a kernel needs a C-contiguous array, got {base.type}",
                    node.func)
    vt = T.ArrayType(base.type.dtype, len(parts), "C")
    return typer.intrinsic("array.reshape", vt, (base, *parts), node)


class _BoundMethod:
    """``z.conjugate`` before it is called: ``call_builtin`` calls ``kaiojit_method``."""

    __slots__ = ("kaiojit_method",)

    def __init__(self, typing):
        self.kaiojit_method = typing


def scalar_attribute(typer, base: Expr, attr: str, node):
    """``.real``, ``.imag`` (of any number, as NumPy's scalars have them) and
    ``.conjugate()``; None for another attribute (the caller reports it)."""
    t = base.type
    if attr in ("real", "imag"):
        if t.is_complex:
            return typer.intrinsic(f"complex.{attr}", t.component, (base,), node)
        if attr == "real":
            return base
        zero = Expr("const", t, attr=False if t.is_bool else 0 if not t.is_float else 0.0,
                    loc=typer.loc(node), weak=base.weak)
        return zero
    if attr in ("conjugate", "conj"):
        def typing(typer, call):
            call_args(typer, call, 0, 0, f"{attr}")
            if not t.is_complex:
                return base
            return typer.intrinsic("complex.conj", t, (base,), call)
        return PyObj(_BoundMethod(typing))
    if attr == "bit_count" and t.is_int:
        def bit_count(typer, call):
            # Python's int.bit_count(): the ones of |x| (|INT_MIN| wraps to itself: one bit)
            call_args(typer, call, 0, 0, "bit_count")
            v = typer.intrinsic("math.iabs", t, (base,), call) if t.kind == "i" else base
            return typer.intrinsic("bits.popc", T.int32, (v,), call)
        return PyObj(_BoundMethod(bit_count))
    return None


# --- Python's builtins and casts -----------------------------------------------------------------


def _cast(target: T.ScalarType):
    def typing(typer, node):
        (a,) = call_args(typer, node, 1, 1, target.name)
        scalar_arg(typer, a, node.args[0], f"{target.name}()")
        if target.is_bool:
            return typer.truth(a, node)
        return typer.coerce(a, target, node)  # a cast makes a weak literal strong (NEP 50)
    return typing


def _py_int(typer, node):
    (a,) = call_args(typer, node, 1, 1, "int")
    t = scalar_arg(typer, a, node.args[0], "int()")
    if t.is_int and not a.weak:
        return a
    return typer.coerce(a, T.int64, node)


def _py_float(typer, node):
    arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        # float("nan"), float("-inf"), float("1e3"): a Python float, folded here
        try:
            value = float(arg.value)
        except ValueError:
            typer.error(f"float() cannot convert {arg.value!r} to a number", arg)
        return Expr("const", T.float64, attr=value, loc=typer.loc(node), weak=True)
    (a,) = call_args(typer, node, 1, 1, "float")
    scalar_arg(typer, a, node.args[0], "float()")
    return typer.coerce(a, T.float64, node)


def _py_bool(typer, node):
    (a,) = call_args(typer, node, 1, 1, "bool")
    return typer.truth(a, node)


def _py_len(typer, node):
    (a,) = call_args(typer, node, 1, 1, "len")
    if isinstance(a.type, T.ArrayType):
        return Expr("shape", T.int64, (a,), attr=0, loc=typer.loc(node))
    if isinstance(a.type, T.TupleType):
        return Expr("const", T.int64, attr=len(a.type.elements), loc=typer.loc(node), weak=True)
    typer.error(f"len() of {type_words(a.type)}", node.args[0])


def _py_abs(typer, node):
    (a,) = call_args(typer, node, 1, 1, "abs")
    t = scalar_arg(typer, a, node.args[0], "abs()")
    if t.is_bool:
        a, t = typer.coerce(a, T.int64, node), T.int64
    if t.is_complex:
        return typer.intrinsic("complex.abs", t.component, (a,), node)
    if t.kind == "u":
        return a
    e = typer.intrinsic("math.fabs" if t.is_float else "math.iabs", t, (a,), node)
    e.weak = a.weak
    return e


def _minmax(which: str):
    def typing(typer, node):
        if len(node.args) == 1:
            typer.error(f"{which}() of one value: pass two or more numbers", node)
        args = call_args(typer, node, 2, 64, which)
        t, weak = scalar_arg(typer, args[0], node.args[0], f"{which}()"), args[0].weak
        for a, n in zip(args[1:], node.args[1:]):
            scalar_arg(typer, a, n, f"{which}()")
            t, weak = result_scalar(t, weak, a.type, a.weak), weak and a.weak
        if t.is_complex:
            typer.error(f"{which}() of complex numbers: they have no order", node)
        out = typer.coerce(args[0], t, node)
        for a in args[1:]:
            out = typer.intrinsic(f"math.{which}", t, (out, typer.coerce(a, t, node)), node)
            out.weak = weak
        return out
    return typing


def _py_round(typer, node):
    if len(node.args) == 2:  # numba's round(x, ndigits): intrinsics/floatparts.py
        a, n = call_args(typer, node, 2, 2, "round")
        t = scalar_arg(typer, a, node.args[0], "round()")
        if not t.is_float:
            typer.error("round() of an integer with ndigits is not supported in kernels",
                        node.args[0], UnsupportedError)
        if scalar_arg(typer, n, node.args[1], "round()").kind not in "iub":
            typer.error(f"round()'s ndigits must be an integer, got {n.type}", node.args[1])
        return typer.intrinsic("math.round_to", t, (a, typer.coerce(n, T.int64, node)), node)
    (a,) = call_args(typer, node, 1, 1, "round")
    t = scalar_arg(typer, a, node.args[0], "round()")
    if not t.is_float:
        return a
    r = typer.intrinsic("math.rint", t, (a,), node)
    return Expr("cast", T.int64, (r,), loc=typer.loc(node))


def _no_range(typer, node):
    typer.error("range() can only be used in 'for ... in range(...)'", node, UnsupportedError)


# --- memory spaces -------------------------------------------------------------------------------


def _shared_array(typer, node):
    align_node = next((k.value for k in node.keywords if k.arg == "alignment"), None)
    if align_node is not None:  # kj.shared.array(shape, dtype, alignment=128)
        node = ast.copy_location(
            ast.Call(node.func, node.args, [k for k in node.keywords if k.arg != "alignment"]),
            node)
    shape, dtype = _array_args(typer, node, "kj.shared.array")
    typer.shared_names += 1
    name = f"{_owner(typer)}_smem{typer.shared_names}"
    dynamic = shape == (0,) or shape == ()
    ndim = 1 if dynamic else len(shape)
    at = T.ArrayType(dtype, ndim, "C")
    attr = (() if dynamic else shape, dtype, name)
    if align_node is not None:
        attr += (_alignment(typer, align_node),)
    return Expr("shared", at, attr=attr, loc=typer.loc(node))


def _owner(typer) -> str:
    """The shared arrays' name prefix: one per function and specialization (numba allocates
    per specialization), so two device functions of one name, or one device function typed
    for two sets of argument types (a dtype, a shape), never share an array."""
    f = typer.pyfunc
    key = f"{f.__module__}.{f.__qualname__}{tuple(typer.arg_types)}"
    return f"{f.__name__}_{hashlib.blake2s(key.encode(), digest_size=4).hexdigest()}"


MAX_SHARED_ALIGNMENT = 1024  # the 128B TMA swizzle pattern repeats every 1024 bytes


def _alignment(typer, node) -> int:
    """``alignment=``: a constant power of two, 16 (the default) to 1024 bytes."""
    e = typer.expr(node)
    value = e.attr if e.op == "const" and type(e.attr) is int else None
    if value is None or value <= 0 or value & (value - 1) or value > MAX_SHARED_ALIGNMENT:
        typer.error("kj.shared.array(): alignment must be a constant power of two up to "
                    f"{MAX_SHARED_ALIGNMENT} bytes", node)
    return max(value, 16)


LOCAL_MEMORY_LIMIT = 512 * 1024  # CUDA's local memory a thread (every compute capability)


def _local_array(typer, node):
    shape, dtype = _array_args(typer, node, "kj.local.array")
    if not shape or 0 in shape:
        typer.error("kj.local.array needs a shape with no zero dimension", node.args[0])
    nbytes = math.prod(shape) * max(dtype.itemsize, 1)
    if nbytes > LOCAL_MEMORY_LIMIT:
        typer.error(f"kj.local.array of {nbytes} bytes: a thread has at most "
                    f"{LOCAL_MEMORY_LIMIT // 1024} KB of local memory", node)
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
    return const_shape(typer, shape_node), dtype_arg(typer, dtype_node)


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


# --- the table ----------------------------------------------------------------------------------


def _py_isinstance(typer, node) -> Expr:
    """``isinstance(x, cls)`` with ``cls`` a kaiojit type, ``int``, ``float``, ``complex``,
    ``bool``, ``tuple``, a NumPy scalar type or a tuple of those: a constant, the kernel's
    types being known when it compiles (numba folds it the same way)."""
    if len(node.args) != 2 or node.keywords:
        typer.error("isinstance() takes a value and a type", node)
    value = typer.visit(node.args[0])
    spelled = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    classes = []
    for n in spelled:
        cls = typer.visit(n)
        if not isinstance(cls, PyObj):
            typer.error("isinstance()'s second argument must be a type (or a tuple of types) "
                        "known when the kernel compiles", n)
        classes.extend(cls.value if type(cls.value) is tuple else (cls.value,))  # types are tuples
    if isinstance(value, PyObj):
        found = any(_python_isinstance(value.value, c) for c in classes)
    else:
        found = any(_type_matches(typer, value.type, c, node.args[1]) for c in classes)
    return Expr("const", T.bool_, attr=found, loc=typer.loc(node))


def _python_isinstance(obj, c) -> bool:
    try:
        return isinstance(obj, c)
    except TypeError:
        return False


def _type_matches(typer, t: T.Type, c, node) -> bool:
    if isinstance(c, T.Type):
        return t == c
    scalar = isinstance(t, T.ScalarType)
    python = {bool: scalar and t.is_bool, int: scalar and (t.is_int or t.is_bool),
              float: scalar and t.is_float, complex: scalar and t.is_complex,
              tuple: isinstance(t, T.TupleType)}
    if c in python:
        return python[c]
    np = sys.modules.get("numpy")
    if np is not None and c is np.ndarray:
        return isinstance(t, T.ArrayType)
    try:
        return scalar and T.from_dtype(c) == t  # np.float32 and friends
    except TypeError:
        typer.error(f"isinstance() in a kernel takes kaiojit or NumPy types, int, float, "
                    f"complex, bool or tuple, not {describe(c)}", node)


def _build_table():
    table = {
        int: _py_int, float: _py_float, bool: _py_bool, len: _py_len, abs: _py_abs,
        min: _minmax("min"), max: _minmax("max"), round: _py_round, range: _no_range,
        isinstance: _py_isinstance,
        L.shared.array: _shared_array, L.local.array: _local_array,
        L.const.array_like: _const_array_like,
    }
    table.update(operator_table())
    for t in T.SCALARS.values():
        if not t.is_complex:  # complex constructors take (re, im): intrinsics/complex.py
            table[t] = _cast(t)
    np = sys.modules.get("numpy")
    if np is None:
        return table  # NumPy's scalar types join once the program imports it
    for t in T.SCALARS.values():
        if t is not T.bool_ and not t.is_complex:
            table[t.np_dtype.type] = _cast(t)
    table[np.bool_] = _cast(T.bool_)
    table.update(reduction_table())  # np.sum(a), np.nanmax(a), ... (reductions.py)
    return table


_TABLE = None
_TABLE_HAS_NUMPY = False


def call_builtin(typer, fn, node: ast.Call) -> Expr:
    """The typed expression of a call of the Python object ``fn`` inside a kernel."""
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
    method = getattr(fn, "kaiojit_method", None)  # a bound method of a value (z.conjugate)
    if method is not None:
        return method(typer, node)
    found = call_typing(fn)
    if found is not None:
        return found[1](typer, node)
    if getattr(fn, "_kaiojit_dispatcher", False):
        return _device_call(typer, fn, node)
    if _is_cffi_from_buffer(fn):
        return _from_buffer(typer, node)
    if isinstance(fn, L.KernelBuiltin):
        typer.error(f"kj.{fn.name} is not callable like this", node)
    if inspect.isfunction(fn):
        typer.error(f"function {fn.__name__!r} cannot be called from a kernel: decorate it with "
                    "@kj.jit(device=True) (or @kj.jit) to make it a device function", node.func,
                    UnsupportedError)
    typer.error(f"{describe(fn)} cannot be called from a kernel", node.func, UnsupportedError)


def _is_cffi_from_buffer(fn) -> bool:
    """``ffi.from_buffer`` of a ``cffi.FFI()`` (numba's way to pass an array to foreign
    code as a pointer)."""
    return getattr(fn, "__name__", "") == "from_buffer" and \
        type(getattr(fn, "__self__", None)).__module__ == "cffi.api"


def _from_buffer(typer, node) -> Expr:
    """``ffi.from_buffer(a)`` in a kernel: a pointer to the array's first element, of type
    ``types.CPointer(a.dtype)``, for a declared device function (kaiojit/linking.py)."""
    if node.keywords or len(node.args) != 1:
        typer.error("ffi.from_buffer() takes one array in a kernel", node)
    arr = typer.expr(node.args[0])
    if not isinstance(arr.type, T.ArrayType):
        typer.error(f"ffi.from_buffer() takes an array, got {type_words(arr.type)}",
                    node.args[0])
    return typer.intrinsic("foreign.buffer", T.CPointer(arr.type.dtype), (arr,), node)


def _device_arg(typer, node, may_bind: bool):
    """A device function's argument: a kernel value, or (where none can be) the Python object
    itself, bound into the callee (a dtype, a function, a tuple of them), as numba passes
    functions and type classes to device functions."""
    r = typer.visit(node)
    if not isinstance(r, PyObj):
        return r
    try:
        return typer.pyobj_to_expr(r, node)
    except TypingError:
        if not may_bind or is_ndarray(r.value):
            raise
        return T.BoundObjectType(r.value)


def _literal(a) -> bool:
    """A literal constant argument, or a tuple of them (a shape)."""
    if isinstance(a, Expr) and a.op == "tuple":
        return bool(a.args) and all(_literal(x) for x in a.args)
    return (isinstance(a, Expr) and a.op == "const" and a.weak
            and type(a.attr) in (bool, int, float))


def _folded(a) -> T.ConstexprType:
    if a.op == "tuple":
        return T.BoundObjectType(tuple(x.attr for x in a.args))
    return T.ConstexprType(a.attr)


def _specialize(typer, dispatcher, args, arg_types, node):
    """The callee for ``arg_types``; where that does not type and some arguments are literal
    constants, the callee again with those folded in as constexprs (numba's literal dispatch:
    ``cuda.shared.array(n, dt)`` with ``n`` a literal argument)."""
    arg_types = tuple(arg_types)
    try:
        return typer.specialize_device(dispatcher, arg_types, typer.loc(node)), arg_types
    except CompileError as first:
        if dispatcher.declared_signatures or not any(_literal(a) for a in args):
            raise
        literal = tuple(_folded(a) if _literal(a) else t for a, t in zip(args, arg_types))
        try:
            return typer.specialize_device(dispatcher, literal, typer.loc(node)), literal
        except CompileError:
            raise first from None  # the error of the call as written


def _device_call(typer, dispatcher, node) -> Expr:
    if node.keywords:
        typer.error("device functions take positional arguments only", node.keywords[0].value)
    params = dispatcher.py_func.__code__.co_varnames[:dispatcher.py_func.__code__.co_argcount]
    if len(node.args) != len(params):
        typer.error(f"{dispatcher.__name__}() takes {len(params)} argument"
                    f"{'' if len(params) == 1 else 's'} ({', '.join(params)}), "
                    f"got {len(node.args)}", node)
    args = [_device_arg(typer, a, not dispatcher.declared_signatures) for a in node.args]
    arg_types = []
    for a, n in zip(args, node.args):
        if isinstance(a, T.BoundObjectType):
            arg_types.append(a)
            continue
        if isinstance(a.type, (T.StringType, T.VoidType)):
            typer.error(f"cannot pass {type_words(a.type)} to a device function", n)
        arg_types.append(a.type)
    declared = dispatcher.declared_signatures
    if declared:  # declared signatures: the arguments convert to the chosen one's
        sig = best_signature(declared, tuple(arg_types))
        if sig is None:
            typer.error(f"{dispatcher.__name__}() was declared for "
                        f"{', '.join(str(s) for s in declared)}; none accepts "
                        f"({', '.join(str(t) for t in arg_types)})", node)
        arg_types = list(sig.args)
    try:
        callee, typed_for = _specialize(typer, dispatcher, args, arg_types, node)
    except TypeError as e:
        raise TypingError(str(e), typer.loc(node)) from None
    passed = [a for a, t in zip(args, typed_for) if not isinstance(t, T.ConstexprType)]
    args = [typer.coerce(a, t, node) for a, (_, t) in zip(passed, callee.params)]
    if callee not in typer.callees:
        typer.callees.append(callee)
    return Expr("call", call_return_type(typer, callee, node), tuple(args), attr=callee,
                loc=typer.loc(node))
