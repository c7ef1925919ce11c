"""Typing of records (NumPy structured dtypes) in kernels: ``a[i]`` of a record array refers
to the element (a ``record.ref`` node), ``r.x`` and ``r['x']`` read a field, and ``a[i].x = v``,
``r['x'] += v`` write one. Field names must be known at compile time.

Reads and writes are intrinsics whose name carries the field (``record.get:x``,
``record.set:x``); they are declared and lowered in ``kaiojit/intrinsics/records.py``.
"""

from __future__ import annotations

import ast

from .. import kir
from .. import types as T
from ..errors import UnsupportedError
from ..kir import Expr
from .values import type_words


def element_ref(typer, base: Expr, indices: tuple, node) -> Expr:
    """``a[i, j]`` of an array of records: a reference to the element."""
    return typer.intrinsic("record.ref", base.type.dtype, (base, *indices), node)


def field_name(typer, rt: T.RecordType, index_node) -> str:
    """The field a constant subscript names: ``r['x']``, or ``r[0]`` by position (NumPy's and
    numba's indexing of a record by an integer)."""
    e = typer.expr(index_node)
    if e.op == "const" and isinstance(e.type, T.ScalarType) and e.type.is_int:
        n = len(rt.fields)
        if not -n <= e.attr < n:
            typer.error(f"record index {e.attr} is out of range: the record has {n} fields",
                        index_node)
        return rt.fields[e.attr][0]
    if e.op != "const" or not isinstance(e.type, T.StringType):
        typer.error("a record is indexed by a field name, a string literal (r['x']), or a "
                    "constant position (r[0])", index_node)
    return e.attr


def get_field(typer, rec: Expr, name: str, node) -> Expr:
    ft = _field_type(typer, rec.type, name, node)
    if isinstance(ft, T.SubarrayType):  # r.h: a view of the field's array
        return typer.intrinsic("record.view", T.ArrayType(ft.dtype, len(ft.shape), "C"),
                               (rec,), node, param=name)
    return typer.intrinsic("record.get", ft, (rec,), node, param=name)


def set_field(typer, rec: Expr, name: str, value: Expr, node) -> kir.ExprStmt:
    ft = _field_type(typer, rec.type, name, node)
    if isinstance(ft, T.SubarrayType):
        if (value.op == "intrinsic" and value.attr == "record.view"
                and value.args[0].type.field(value.param)[0] == ft):  # r.h = s.h
            e = typer.intrinsic("record.assign", T.void, (rec, value), node, param=name)
            return kir.ExprStmt(e, typer.loc(node))
        vt = value.type
        if isinstance(vt, T.ArrayType) and vt.dtype == ft.dtype and vt.ndim == len(ft.shape):
            # r.h = a: the field's elements from a's (numba's copy into a nested array)
            e = typer.intrinsic("record.fill", T.void, (rec, value), node, param=name)
            return kir.ExprStmt(e, typer.loc(node))
        typer.error(f"field {name!r} is an array ({ft}): assign its elements "
                    f"(r.{name}[i] = v), an array of its dtype and dimensions, or a field of "
                    f"its shape (r.{name} = s.{name})", node, UnsupportedError)
    if not isinstance(value.type, T.ScalarType):
        typer.error(f"cannot store {type_words(value.type)} into field {name!r} ({ft})", node)
    value = typer.coerce(value, ft, node) if typer.final else value
    e = typer.intrinsic("record.set", T.void, (rec, value), node, param=name)
    return kir.ExprStmt(e, typer.loc(node))


def field_target(typer, target) -> tuple[Expr, str] | None:
    """``(record, field)`` if an assignment target is ``r.x`` or ``r['x']`` of a record."""
    if isinstance(target, ast.Attribute):
        rec = typer.expr(target.value)
        if isinstance(rec.type, T.RecordType):
            return rec, target.attr
        typer.error(f"cannot assign to attribute {target.attr!r} of {type_words(rec.type)}",
                    target)
    if isinstance(target, ast.Subscript):
        rec = typer.expr(target.value)
        if isinstance(rec.type, T.RecordType):
            return rec, field_name(typer, rec.type, target.slice)
    return None


def _field_type(typer, rt: T.RecordType, name: str, node) -> T.ScalarType | T.SubarrayType:
    found = rt.field(name)
    if found is None:
        names = ", ".join(repr(n) for n, _, _ in rt.fields)
        typer.error(f"the record has no field {name!r} (its fields: {names})", node)
    return found[0]


def assign_record(typer, arr: Expr, indices: list, value: Expr, node) -> kir.ExprStmt:
    """``a[i] = r``: the whole record copied into the element."""
    dest = element_ref(typer, arr, tuple(indices), node)
    e = typer.intrinsic("record.assign", T.void, (dest, value), node, param="")
    return kir.ExprStmt(e, typer.loc(node))
