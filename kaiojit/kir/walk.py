"""The one walker of the kernel IR: every analysis and rewrite visits nodes through it.

* ``walk_stmts(body)``: every statement of a block, nested ones included, in order;
* ``stmt_exprs(s)``: the expressions a statement evaluates itself (not its nested statements');
* ``walk_expr(e)``: an expression and all its operands, depth first;
* ``function_exprs(f)``: every expression of a function, depth first, statement by statement;
* ``walk_functions(f)``: a function and the device functions it calls, each once.
"""

from __future__ import annotations

from collections.abc import Iterator

from .nodes import Assign, Expr, ExprStmt, ForRange, If, KFunction, Return, Stmt, Store, While


def walk_stmts(body: list[Stmt]) -> Iterator[Stmt]:
    """Every statement in a block, nested ones included, in order."""
    for s in body:
        yield s
        if isinstance(s, If):
            yield from walk_stmts(s.body)
            yield from walk_stmts(s.orelse)
        elif isinstance(s, (While, ForRange)):
            yield from walk_stmts(s.body)


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement evaluates directly (not those of nested statements)."""
    if isinstance(s, Assign):
        return (s.value,)
    if isinstance(s, Store):
        return (s.array, *s.indices, s.value)
    if isinstance(s, (If, While)):
        return (s.cond,)
    if isinstance(s, ForRange):
        return (s.start, s.stop, s.step)
    if isinstance(s, Return):
        return (s.value,) if s.value is not None else ()
    if isinstance(s, ExprStmt):
        return (s.expr,)
    return ()


def walk_expr(e: Expr) -> Iterator[Expr]:
    """An expression and all its operands, depth first."""
    yield e
    for a in e.args:
        yield from walk_expr(a)


def body_exprs(body: list[Stmt]) -> Iterator[Expr]:
    """Every expression of a block, statement by statement, each depth first."""
    for s in walk_stmts(body):
        for top in stmt_exprs(s):
            yield from walk_expr(top)


def function_exprs(f: KFunction) -> Iterator[Expr]:
    """Every expression of one function (not of its callees)."""
    return body_exprs(f.body)


def walk_functions(f: KFunction) -> Iterator[KFunction]:
    """A function, then the device functions it calls (directly or not), each once."""
    seen: set[int] = set()
    todo = [f]
    while todo:
        g = todo.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        yield g
        todo.extend(reversed(g.callees))
