"""``print(...)`` of numbers, string literals and tuples of numbers inside kernels (and of
``cuda.threadIdx`` and the other dim3 registers, as tuples): one line per call, shown after
the next synchronize (``vprintf`` on the GPU, a print buffer on the host)."""

from __future__ import annotations

import ast
import builtins

from llvmlite import ir

from .. import language as L
from .. import types as T
from ..errors import UnsupportedError, warn_user
from .api import ANY_TARGET, Expr, Intrinsic, Kind, Operands, convert, register, type_words


MAX_PRINT_ITEMS = 32  # CUDA's printf: at most 32 arguments after the format


def _printable(t) -> bool:
    if isinstance(t, T.TupleType):
        return all(isinstance(e, T.ScalarType) or _printable(e) for e in t.elements)
    return isinstance(t, (T.ScalarType, T.StringType))


PRINTABLE = Kind("a number, a string or a tuple of numbers", _printable)


def _operand(typer, node) -> Expr:
    """A print operand; ``cuda.threadIdx`` (a dim3 register) is the tuple ``(x, y, z)``, as
    numba prints it."""
    r = typer.visit(node)
    if not isinstance(getattr(r, "value", None), L.Dim3Register):
        return r if isinstance(r, Expr) else typer.pyobj_to_expr(r, node)
    items = [typer.expr(ast.copy_location(ast.Attribute(node, c, ast.Load()), node))
             for c in "xyz"]
    return Expr("tuple", T.TupleType(tuple(e.type for e in items)), tuple(items),
                loc=typer.loc(node))


def _typing(typer, node):
    if node.keywords:
        typer.error("print() keyword arguments are not supported in kernels",
                    node.keywords[0].value, UnsupportedError)
    args = []
    for a in node.args:
        e = _operand(typer, a)
        if isinstance(e.type, T.ScalarType):
            if e.weak:
                e = typer.coerce(e, e.type, a)
        elif not _printable(e.type):
            typer.error(f"print() takes scalars, string literals and tuples of numbers, not "
                        f"{type_words(e.type)}", a)
        args.append(e)
    return typer.intrinsic("print", T.void, args, node)


def _lower(fl, e: Expr):
    """A printf format from the operands' types (strings go into the format itself), then
    the target's print."""
    parts, values = [], []
    for a in e.args:
        if isinstance(a.type, T.StringType):
            parts.append(a.attr.replace("%", "%%"))
            continue
        parts.append(_format(fl, a.type, fl.expr(a), values))
    fmt = " ".join(parts) + "\n"
    if len(values) > MAX_PRINT_ITEMS:
        # CUDA's printf takes 32 arguments; past that the GPU would print some and leave the
        # rest as raw specifiers. Both backends print the raw format instead, as numba does.
        warn_user(f"{e.loc}: CUDA print() cannot print more than {MAX_PRINT_ITEMS} items. "
                  "The raw format string will be emitted by the kernel instead.", UserWarning)
        fmt, values = fmt.replace("%", "%%"), []
    fl.target.print(fl, fmt, values)


def _format(fl, t, v, values: list) -> str:
    """The printf format of a value ``v`` of type ``t`` (its operands appended to
    ``values``): a tuple as Python writes one, ``(1, 2.500000)`` and ``(1,)``."""
    if isinstance(t, T.TupleType):
        items = [_format(fl, et, fl.builder.extract_value(v, k), values)
                 for k, et in enumerate(t.elements)]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if t.is_complex:  # as Python writes it: (1.000000+2.000000j)
        for k in (0, 1):
            part = fl.builder.extract_value(v, k)
            values.append(part if t.bits == 128 else fl.builder.fpext(part, ir.DoubleType()))
        return "(%f%+fj)"
    if t.is_float:
        if t.float_format is not None:  # fp8: its bits, widened by conversion
            v = convert(fl, v, t, T.float64)
        elif t.bits < 64:
            v = fl.builder.fpext(v, ir.DoubleType())
        values.append(v)
        return "%f"
    if t.is_bool:  # as Python writes it: True / False
        values.append(fl.builder.select(v, fl.target.string_pointer(fl, "True"),
                                        fl.target.string_pointer(fl, "False")))
        return "%s"
    if t.kind == "i":
        values.append(convert(fl, v, t, T.int64))
        return "%lld"
    values.append(convert(fl, v, t, T.uint64))
    return "%llu"


register(Intrinsic(name="print", operands=Operands(result=T.void, rest=PRINTABLE),
                   lowering={ANY_TARGET: _lower}, calls={builtins.print: _typing}))
