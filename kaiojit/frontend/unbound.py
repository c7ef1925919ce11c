"""Variables read where some path has not assigned them (Python's UnboundLocalError).

``first_unbound_use(fdef, params)`` walks a function's statements with the set of local
variables assigned on every path so far and returns the first read of a local variable that is
not in it. An ``if`` without an ``else`` (or a branch that does not assign it) is such a path,
and so is a branch that ends the function, the loop or the iteration early (``return``,
``break``, ``continue``: the paths after it do not come from that branch).

Loops are taken to run their body at least once: whether ``for k in range(n)`` runs at all is
known only at run time, and a value computed in a loop and used after it is a common pattern
(Python raises there only when ``n`` is 0). A variable a zero-trip loop leaves unassigned is
zero (``zero_trip_reads``: the typer assigns those zero first; docs/correctness.md).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class UnboundUse:
    """A read of ``name`` (the ``ast.Name`` node ``node``) that some path reaches with the
    variable unassigned; ``assigned_at`` are the lines that assign it."""

    name: str
    node: ast.Name
    assigned_at: tuple[int, ...]

    def message(self) -> str:
        lines = ", ".join(str(n) for n in self.assigned_at)
        where = f"line {lines}" if len(self.assigned_at) == 1 else f"lines {lines}"
        return (f"local variable {self.name!r} may be read here before it is assigned: it is "
                f"assigned ({where}) on some paths to this line only (Python would raise "
                "UnboundLocalError); assign it before the branch")


def first_unbound_use(fdef: ast.FunctionDef, params: list[str]) -> UnboundUse | None:
    """The first read of a local variable that a path reaches unassigned, or None (kept on the
    node: a function is typed once per argument types, its source analysed once)."""
    found = getattr(fdef, "_kaiojit_unbound", False)
    if found is False:
        stores: dict[str, list[int]] = {}
        for n in _walk(fdef.body):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores.setdefault(n.id, []).append(n.lineno)
        walk = _Walk(stores)
        try:
            walk.block(fdef.body, frozenset(params))
        except _Found as f:
            found = f.use
        else:
            found = None
        if any(isinstance(n, ast.NamedExpr) for n in _walk(fdef.body)):
            found = None  # ':=' is refused by the typer, with its own message
        fdef._kaiojit_unbound = found
    return found


def zero_trip_reads(fdef: ast.FunctionDef, params: list[str]) -> frozenset:
    """The local variables some read reaches unassigned only when a loop runs no iteration
    (``for k in range(n): v = ...`` then ``out[i] = v``, with ``n`` 0): the typer assigns them
    zero at the function's start, so that read is defined (0) on every backend. Kept on the
    node, as ``first_unbound_use``."""
    names = getattr(fdef, "_kaiojit_zero_trip", None)
    if names is None:
        stores: dict[str, list[int]] = {}
        for n in _walk(fdef.body):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores.setdefault(n.id, []).append(n.lineno)
        walk = _Walk(stores, zero_trip=True)
        walk.block(fdef.body, frozenset(params))
        names = fdef._kaiojit_zero_trip = frozenset(walk.unassigned)
    return names


class _Found(Exception):
    def __init__(self, use: UnboundUse):
        self.use = use


class _Walk:
    """The assigned-on-every-path sets through a block. A block's result is the set after it,
    or None when no path falls through its end."""

    def __init__(self, stores: dict[str, list[int]], zero_trip: bool = False):
        self.stores = stores
        # zero_trip: loops may also run no iteration, and reads of unassigned names are
        # collected in ``unassigned`` instead of raised
        self.zero_trip = zero_trip
        self.unassigned: set[str] = set()
        self.exits: list[list] = []  # per enclosing loop: sets at its break statements
        self.nexts: list[list] = []  # per enclosing loop: sets at its continue statements

    def reads(self, node, assigned: frozenset) -> None:
        if node is None:
            return
        for n in _walk([node]):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.stores \
                    and n.id not in assigned:
                self.unbound(n)

    def unbound(self, n: ast.Name) -> None:
        if self.zero_trip:
            self.unassigned.add(n.id)
            return
        raise _Found(UnboundUse(n.id, n, tuple(sorted(set(self.stores[n.id])))))

    def block(self, stmts: list, assigned: frozenset | None) -> frozenset | None:
        for s in stmts:
            if assigned is None:
                return None  # unreachable code after return/break/continue
            assigned = self.statement(s, assigned)
        return assigned

    def statement(self, s: ast.stmt, assigned: frozenset) -> frozenset | None:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            self.reads(s.value, assigned)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self.reads_in_target(t, assigned)
            return assigned | _stored(targets)
        if isinstance(s, ast.AugAssign):
            self.reads(s.value, assigned)
            self.reads_in_target(s.target, assigned)
            t = s.target
            if isinstance(t, ast.Name) and t.id not in assigned:  # x += v reads x
                self.unbound(t)
            return assigned | _stored([s.target])
        if isinstance(s, ast.If):
            self.reads(s.test, assigned)
            return _meet(self.block(s.body, assigned), self.block(s.orelse, assigned))
        if isinstance(s, (ast.For, ast.While)):
            return self.loop(s, assigned)
        if isinstance(s, ast.Return):
            self.reads(s.value, assigned)
            return None
        if isinstance(s, ast.Break):
            if self.exits:
                self.exits[-1].append(assigned)
            return None
        if isinstance(s, ast.Continue):
            if self.nexts:
                self.nexts[-1].append(assigned)
            return None
        if isinstance(s, ast.Expr):
            self.reads(s.value, assigned)
        return assigned

    def reads_in_target(self, target, assigned: frozenset) -> None:
        """Reads a store makes: the array and index of ``a[i] = v``, the object of ``o.x = v``."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.reads_in_target(t, assigned)
        elif isinstance(target, ast.Subscript):
            self.reads(target.value, assigned)
            self.reads(target.slice, assigned)
        elif isinstance(target, ast.Attribute):
            self.reads(target.value, assigned)

    def loop(self, s, assigned: frozenset) -> frozenset | None:
        """A loop taken to run at least once: the set after it is that at the end of an
        iteration, at a ``continue`` or at a ``break``, on every path. (A read of a value an
        earlier iteration assigned, before this iteration assigns it, the typer refuses: it
        reads names in source order.)"""
        head = s.iter if isinstance(s, ast.For) else s.test
        self.reads(head, assigned)
        start = assigned | (_stored([s.target]) if isinstance(s, ast.For) else frozenset())
        self.exits.append([])
        self.nexts.append([])
        end = self.block(s.body, start)
        breaks, continues = self.exits.pop(), self.nexts.pop()
        through = end
        for c in continues:
            through = _meet(through, c)
        if isinstance(s, ast.While) and _always_true(s.test):
            through = None  # `while True:` leaves through its breaks only
        after = self.block(s.orelse, through) if s.orelse and through is not None else through
        for b in breaks:
            after = _meet(after, b)
        if self.zero_trip and not (isinstance(s, ast.While) and _always_true(s.test)):
            after = _meet(after, assigned)  # or no iteration at all
        return after


def _stored(nodes) -> frozenset:
    """The names ``nodes`` (targets, or statements) assign."""
    return frozenset(n.id for n in _walk(nodes)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


_OWN_SCOPE = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda,
              ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _walk(nodes):
    """``ast.walk`` of ``nodes``, not entering what has its own scope (a comprehension's
    variables are its own; the typer rejects those constructs with their own message)."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _OWN_SCOPE):
            todo.extend(ast.iter_child_nodes(n))


def _meet(a: frozenset | None, b: frozenset | None) -> frozenset | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _always_true(test) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)
