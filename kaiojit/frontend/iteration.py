"""Loops the typer does not lower directly, rewritten into ones it does, as numba accepts them:

- ``for x in a`` over an array (its first dimension: rows of a 2-d array are views);
- ``enumerate(s, start)`` and ``zip(a, b, ...)`` of arrays, tuples, ranges and of each other;
- ``for ... else`` and ``while ... else``: the ``else`` runs when no ``break`` left the loop.

Each becomes a loop over ``range(n)`` whose body first assigns the loop's target from the
index (``x = a[k]``; a tuple's item at a run-time index is a chain of selects), or a loop
with a flag its ``break`` statements set. The rewrite makes new AST nodes around the user's
(never changing them: the typer visits the function once per pass) located at the loop, so
errors still point at the user's lines.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from .values import PyObj


class PyValue(ast.expr):
    """A Python object in generated AST (``range``, ``len``): typed as that object whatever
    the kernel's names shadow."""

    _fields = ()

    def __init__(self, value, **kwargs):
        super().__init__(**kwargs)
        self.value = value


def _call(fn, *args) -> ast.Call:
    return ast.Call(func=PyValue(fn), args=list(args), keywords=[])


def _name(name: str, store: bool = False) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Store() if store else ast.Load())


def _located(stmts: list[ast.stmt], at: ast.AST) -> list[ast.stmt]:
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, (ast.stmt, ast.expr)) and not hasattr(n, "lineno"):
                ast.copy_location(n, at)
    return stmts


# --- for / while ... else ---------------------------------------------------------------------


class _BreakFlagger(ast.NodeTransformer):
    """``break`` of the loop itself (not of loops nested in it) also sets the flag."""

    def __init__(self, flag: str):
        self.flag = flag

    def visit_Break(self, node):
        setter = ast.Assign(targets=[_name(self.flag, True)], value=ast.Constant(True))
        return _located([setter], node) + [node]

    def visit_For(self, node):
        return node  # its breaks are its own

    visit_While = visit_AsyncFor = visit_FunctionDef = visit_Lambda = visit_For


def without_else(node: ast.For | ast.While) -> list[ast.stmt]:
    """``flag = False; <loop whose breaks set flag>; if not flag: <else>``."""
    flag = f"$broke{node.lineno}_{node.col_offset}"
    flagger = _BreakFlagger(flag)
    body = [flagger.visit(copy.deepcopy(s)) for s in node.body]
    loop = copy.copy(node)
    loop.body = [s for item in body for s in (item if isinstance(item, list) else [item])]
    loop.orelse = []
    start = ast.Assign(targets=[_name(flag, True)], value=ast.Constant(False))
    after = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=_name(flag)), body=node.orelse,
                   orelse=[])
    return _located([start, loop, after], node)


# --- loops over sequences ---------------------------------------------------------------------


class _Sequence:
    """What a loop walks by index: statements run once before it, its length, its items."""

    def __init__(self, prelude: list[ast.stmt], length: ast.expr,
                 item: Callable[[ast.expr], ast.expr]):
        self.prelude = prelude
        self.length = length
        self.item = item


def iterated_call(typer, it: ast.expr):
    """``enumerate`` or ``zip`` when ``it`` calls one of them, else None."""
    if not isinstance(it, ast.Call):
        return None
    fn = typer.visit(it.func)
    return fn.value if isinstance(fn, PyObj) and fn.value in (enumerate, zip) else None


def _sequence(typer, it: ast.expr, where: str) -> _Sequence:
    fn = iterated_call(typer, it)
    if fn is enumerate:
        if not 1 <= len(it.args) + len(it.keywords) <= 2 or any(
                k.arg != "start" for k in it.keywords):
            typer.error("enumerate() takes an iterable and a start", it)
        inner = _sequence(typer, it.args[0], where + "e")
        start = it.args[1] if len(it.args) > 1 else (
            it.keywords[0].value if it.keywords else ast.Constant(0))
        first = f"$start{where}"
        prelude = inner.prelude + [ast.Assign(targets=[_name(first, True)], value=start)]
        return _Sequence(prelude, inner.length, lambda k: ast.Tuple(
            elts=[ast.BinOp(left=_name(first), op=ast.Add(), right=k), inner.item(k)],
            ctx=ast.Load()))
    if fn is zip:
        if it.keywords or not it.args:
            typer.error("zip() in kernels takes one or more sequences", it)
        parts = [_sequence(typer, a, f"{where}z{i}") for i, a in enumerate(it.args)]
        length = parts[0].length if len(parts) == 1 else _call(min, *(p.length for p in parts))
        return _Sequence([s for p in parts for s in p.prelude], length,
                         lambda k: ast.Tuple(elts=[p.item(k) for p in parts], ctx=ast.Load()))
    fn = typer.visit(it.func) if isinstance(it, ast.Call) else None
    if isinstance(fn, PyObj) and fn.value is range:
        return _range_sequence(typer, it, where)
    held = f"$seq{where}"
    prelude = _located([ast.Assign(targets=[_name(held, True)], value=it)], it)
    length = _located([ast.Expr(_call(len, _name(held)))], it)[0].value  # errors name `it`
    return _Sequence(prelude, length, lambda k: ast.copy_location(
        ast.Subscript(value=ast.copy_location(_name(held), it), slice=k, ctx=ast.Load()), it))


def _range_sequence(typer, it: ast.Call, where: str) -> _Sequence:
    """``range(start, stop, step)`` by index: ``start + k * step``, of Python's length."""
    if it.keywords or not 1 <= len(it.args) <= 3:
        typer.error("range() takes 1 to 3 positional arguments", it)
    args = list(it.args)
    if len(args) == 1:
        args = [ast.Constant(0), args[0]]
    if len(args) == 2:
        args.append(ast.Constant(1))
    names = [f"$r{part}{where}" for part in ("start", "stop", "step")]
    prelude = [ast.Assign(targets=[_name(n, True)], value=a) for n, a in zip(names, args)]
    start, stop, step = (_name(n) for n in names)
    # Python's len(range): (stop - start + step - sign(step)) // step, at least 0
    sign = ast.IfExp(test=ast.Compare(left=_name(names[2]), ops=[ast.Gt()],
                                      comparators=[ast.Constant(0)]),
                     body=ast.Constant(1), orelse=ast.Constant(-1))
    span = ast.BinOp(left=ast.BinOp(left=ast.BinOp(left=stop, op=ast.Sub(), right=start),
                                    op=ast.Add(), right=step), op=ast.Sub(), right=sign)
    length = _call(max, ast.Constant(0), ast.BinOp(left=span, op=ast.FloorDiv(),
                                                   right=_name(names[2])))
    return _Sequence(prelude, length, lambda k: ast.BinOp(
        left=_name(names[0]), op=ast.Add(),
        right=ast.BinOp(left=k, op=ast.Mult(), right=_name(names[2]))))


def indexed_loop(typer, node: ast.For) -> list[ast.stmt]:
    """``node`` (over an array, ``enumerate(...)`` or ``zip(...)``) as a loop over indices."""
    where = f"{node.iter.lineno}_{node.iter.col_offset}"
    seq = _sequence(typer, node.iter, where)
    index = f"$k{where}"
    assign = ast.Assign(targets=[node.target], value=seq.item(_name(index)))
    loop = ast.For(target=_name(index, True), iter=_call(range, seq.length),
                   body=_located([assign], node.target) + list(node.body), orelse=[],
                   type_comment=None)
    return _located(seq.prelude + [loop], node.iter)

