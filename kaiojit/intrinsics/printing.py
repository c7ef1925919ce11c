"""``print(...)`` of numbers and string literals inside kernels: one line per call, shown
after the next synchronize (``vprintf`` on the GPU, a print buffer on the host)."""

from __future__ import annotations

import builtins

from llvmlite import ir

from .. import types as T
from ..errors import UnsupportedError
from .api import (ANY_TARGET, PRINTABLE, Expr, Intrinsic, Operands, convert, register,
                  type_words)


def _typing(typer, node):
    if node.keywords:
        typer.error("print() keyword arguments are not supported in kernels",
                    node.keywords[0].value, UnsupportedError)
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


def _lower(fl, e: Expr):
    """A printf format from the operands' types (strings go into the format itself), then
    the target's print."""
    parts, values = [], []
    for a in e.args:
        if isinstance(a.type, T.StringType):
            parts.append(a.attr.replace("%", "%%"))
            continue
        v = fl.expr(a)
        t = a.type
        if t.is_complex:  # as Python writes it: (1.000000+2.000000j)
            parts.append("(%f%+fj)")
            for k in (0, 1):
                part = fl.builder.extract_value(v, k)
                values.append(part if t.bits == 128 else fl.builder.fpext(part, ir.DoubleType()))
            continue
        if t.is_float:
            parts.append("%f")
            if t.float_format is not None:  # fp8: its bits, widened by conversion
                v = convert(fl, v, t, T.float64)
            elif t.bits < 64:
                v = fl.builder.fpext(v, ir.DoubleType())
        elif t.is_bool:  # as Python writes it: True / False
            parts.append("%s")
            v = fl.builder.select(v, fl.target.string_pointer(fl, "True"),
                                  fl.target.string_pointer(fl, "False"))
        elif t.kind == "i":
            parts.append("%lld")
            v = convert(fl, v, t, T.int64)
        else:
            parts.append("%llu")
            v = convert(fl, v, t, T.uint64)
        values.append(v)
    fl.target.print(fl, " ".join(parts) + "\n", values)


register(Intrinsic(name="print", operands=Operands(result=T.void, rest=PRINTABLE),
                   lowering={ANY_TARGET: _lower}, calls={builtins.print: _typing}))
