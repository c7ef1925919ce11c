"""``for i in kj.static_range(start, stop, step)``: unrolled while typing. Each copy of the
body is the loop's AST with the loop variable replaced by one constant, typed in order, so the
variable may index tuples (``frag[i]``) and everything it computes folds."""

from __future__ import annotations

import ast

from .. import types as T
from ..errors import UnsupportedError
from ..kir import Expr
from .arguments import const_int
from .values import PyObj

MAX_UNROLL = 1024  # copies of one loop body, a guard against a mistyped bound


_LOCATION = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def _substituted(node, name: str, value):
    """A copy of ``node`` (an AST, a list of them or a field's plain value) in which every read
    of ``name`` is the constant ``value`` (or a copy of the expression ``value``, an AST): one
    pass, several times faster than a deepcopy followed by a transformer, which matters for
    nested unrolled loops."""
    if isinstance(node, list):
        return [_substituted(x, name, value) for x in node]
    if not isinstance(node, ast.AST) or isinstance(node, ast.expr_context):
        return node  # str, int, None, Load/Store (shared, never changed)
    if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
        if isinstance(value, ast.AST):
            return _substituted(value, "", None)
        return ast.copy_location(ast.Constant(value), node)
    new = node.__class__()
    for field, v in ast.iter_fields(node):
        setattr(new, field, _substituted(v, name, value))
    for attr in _LOCATION:
        if hasattr(node, attr):
            setattr(new, attr, getattr(node, attr))
    return new


def _jumps_out(body: list) -> ast.AST | None:
    """A ``break`` or ``continue`` of this loop (not of a loop inside it), if there is one."""
    todo = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Break, ast.Continue)):
            return n
        if isinstance(n, (ast.For, ast.While)):
            todo.extend(n.orelse)
            continue
        if isinstance(n, (ast.FunctionDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return None


def _loop_variable(typer, node: ast.For, what: str) -> str:
    """The loop's variable, which an unrolled loop substitutes: a plain name, never assigned
    in the body, and no ``break`` or ``continue`` leaving the loop."""
    if not isinstance(node.target, ast.Name):
        typer.error("the loop variable must be a plain name", node.target, UnsupportedError)
    name = node.target.id
    jump = _jumps_out(node.body)
    if jump is not None:
        typer.error(f"'break' and 'continue' cannot leave a {what} loop (it is unrolled)",
                    jump, UnsupportedError)
    for n in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            typer.error(f"the loop variable {name!r} of {what} cannot be assigned", n,
                        UnsupportedError)
    return name


def _unrolled(typer, node: ast.For, name: str, values) -> list:
    """The body typed once per value, ``name`` replaced by it in each copy."""
    # the typer makes several passes over a function: each pass types the same copies
    copies = typer.family_states.setdefault("static_range", {})
    out = []
    for k, v in enumerate(values):
        body = copies.get((id(node), k))
        if body is None:
            body = _substituted(node.body, name, v)
            copies[(id(node), k)] = body
        out.extend(typer._block(body))
    return out


def literal_for(typer, node: ast.For) -> list:
    """``for x in kj.literal_unroll(tup)``: one copy of the body per item, ``x`` replaced by
    ``tup[k]`` (so ``tup`` is read once per copy: a name, an attribute or a tuple display)."""
    it = node.iter
    if it.keywords or len(it.args) != 1:
        typer.error("literal_unroll() takes one argument, a tuple", it)
    seq = typer.visit(it.args[0])
    if isinstance(seq, PyObj) and isinstance(seq.value, tuple):
        n = len(seq.value)
    elif isinstance(seq, Expr) and isinstance(seq.type, T.TupleType):
        n = len(seq.type.elements)
    else:
        typer.error("literal_unroll() takes a tuple", it.args[0], UnsupportedError)
    name = _loop_variable(typer, node, "literal_unroll()")
    items = [ast.copy_location(ast.Subscript(value=it.args[0], slice=ast.Constant(k),
                                             ctx=ast.Load()), it.args[0]) for k in range(n)]
    return _unrolled(typer, node, name, items)


def static_for(typer, node: ast.For) -> list:
    it = node.iter
    if it.keywords or not 1 <= len(it.args) <= 3:
        typer.error("kj.static_range() takes 1 to 3 positional arguments", it)
    bounds = [const_int(typer, a, "kj.static_range()'s bounds") for a in it.args]
    if len(bounds) == 1:
        bounds = [0, bounds[0]]
    values = range(*bounds)
    if len(values) > MAX_UNROLL:
        typer.error(f"kj.static_range() unrolls at most {MAX_UNROLL} copies, got {len(values)}",
                    it)
    name = _loop_variable(typer, node, "kj.static_range()")
    return _unrolled(typer, node, name, values)
