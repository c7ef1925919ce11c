"""Reducing a failing program: greedy passes that keep a change while the failure persists.

Passes, repeated until none helps (or the time runs out): a smaller launch; removing device
functions nobody calls; removing statements (runs of them first, then one at a time);
replacing an if, for or while by its body; replacing an expression by one of its operands of
the same type, or by a constant 0 or 1 of its type. Only the output slots that differ are
kept. ``still_fails(program) -> bool`` decides; a change that makes the program invalid (an
undefined name, a type clash) simply does not fail the same way and is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from .program import DeviceFunction, Expr, Program, Stmt


def statement_lists(p: Program) -> Iterator[list]:
    def walk(stmts: list):
        yield stmts
        for s in stmts:
            if s.body:
                yield from walk(s.body)
            if s.orelse:
                yield from walk(s.orelse)
    yield from walk(p.kernel)
    for f in p.functions:
        yield from walk(f.body)


def expression_slots(p: Program) -> Iterator[tuple[object, str, int]]:
    """(holder, attribute, index) of every expression: ``getattr(holder, attribute)[index]``."""
    def in_expr(e: Expr):
        for i, a in enumerate(e.args):
            if isinstance(a, Expr):
                yield e, "args", i
                yield from in_expr(a)

    def in_stmts(stmts: list):
        for s in stmts:
            for i, e in enumerate(s.exprs):
                yield s, "exprs", i
                yield from in_expr(e)
            yield from in_stmts(s.body)
            yield from in_stmts(s.orelse)

    yield from in_stmts(p.kernel)
    for f in p.functions:
        yield from in_stmts(f.body)
        for i, e in enumerate(f.returns):
            yield f, "returns", i
            yield from in_expr(e)


def _replace(holder, attr: str, index: int, new) -> None:
    items = list(getattr(holder, attr))
    items[index] = new
    setattr(holder, attr, tuple(items))


def simpler_expressions(e: Expr) -> list[Expr]:
    """Smaller expressions of ``e``'s type to try in its place."""
    out = [a for a in e.children() if a.type == e.type and not a.weak and a.exact]
    if e.kind == "const" or e.type in ("tuple",):
        return out
    if e.type == "bool":
        return out + [Expr("const", "bool", attr=v, weak=True) for v in (False, True)]
    if e.kind != "var":
        out += [Expr("const", e.type, ("kj",), attr=v) for v in (0, 1)]
    return out


def _calls(p: Program) -> set[str]:
    names = set()
    for holder, attr, i in expression_slots(p):
        e = getattr(holder, attr)[i]
        if e.kind == "call":
            names.add(e.attr)
    return names


class Shrinker:
    def __init__(self, still_fails: Callable[[Program], bool], seconds: float = 120.0):
        self.still_fails = still_fails
        self.deadline = time.monotonic() + seconds
        self.tries = 0

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def attempt(self, candidate: Program) -> bool:
        self.tries += 1
        try:
            return bool(self.still_fails(candidate))
        except Exception:  # noqa: BLE001  (a candidate the tools cannot even run: drop it)
            return False

    def shrink(self, p: Program) -> Program:
        changed = True
        while changed and not self.out_of_time():
            changed = False
            for shrink_pass in (self.launch, self.functions, self.statements, self.inline,
                                self.expressions):
                q = shrink_pass(p)
                if q is not None:
                    p, changed = q, True
        return p

    # --- passes: each returns a smaller failing program, or None --------------------------------

    def launch(self, p: Program) -> Program | None:
        best = None
        for grid, block in ((1, 32), (1, p.block), (p.grid, 32)):
            if (grid, block) == (p.grid, p.block) or block > p.block:
                continue
            q = p.copy()
            q.grid, q.block = grid, block  # shared arrays keep their size
            if self.attempt(q):
                p = best = q
        return best

    def functions(self, p: Program) -> Program | None:
        used = _calls(p)
        if all(f.name in used for f in p.functions):
            return None
        q = p.copy()
        q.functions = [f for f in q.functions if f.name in used]
        return q if self.attempt(q) else None

    def statements(self, p: Program) -> Program | None:
        progress = None
        n_lists = len(list(statement_lists(p)))
        for li in range(n_lists):
            lists = list(statement_lists(p))
            if li >= len(lists):
                break
            chunk = max(len(lists[li]) // 2, 1)
            while chunk >= 1 and not self.out_of_time():
                start = 0
                while True:
                    lists = list(statement_lists(p))
                    if li >= len(lists) or start >= len(lists[li]):
                        break
                    q = p.copy()
                    target = list(statement_lists(q))[li]
                    # barriers and shared arrays stay: without them a program has races
                    target[start:start + chunk] = [s for s in target[start:start + chunk]
                                                   if s.kind in ("sync", "shared")]
                    if len(target) == len(list(statement_lists(p))[li]):
                        start += chunk
                        continue
                    if self.attempt(q):
                        p = progress = q
                    else:
                        start += chunk
                chunk //= 2
        return progress

    def inline(self, p: Program) -> Program | None:
        progress = None
        li = 0
        while not self.out_of_time():
            lists = list(statement_lists(p))
            if li >= len(lists):
                break
            i = 0
            while i < len(list(statement_lists(p))[li]):
                q = p.copy()
                target = list(statement_lists(q))[li]
                s: Stmt = target[i]
                if s.kind in ("if", "for", "while") and (s.body or s.orelse):
                    for body in (s.body, s.orelse):
                        q2 = q.copy()
                        target2 = list(statement_lists(q2))[li]
                        chosen = body if body is s.body else s.orelse
                        idx = 0 if chosen is s.body else 1
                        target2[i:i + 1] = _body_of(target2[i], idx)
                        if self.attempt(q2):
                            p = progress = q2
                            break
                i += 1
            li += 1
        return progress

    def expressions(self, p: Program) -> Program | None:
        progress = None
        k = 0
        while not self.out_of_time():
            slots = list(expression_slots(p))
            if k >= len(slots):
                break
            holder, attr, i = slots[k]
            current = getattr(holder, attr)[i]
            for n in range(len(simpler_expressions(current))):
                q = p.copy()
                h2, a2, i2 = list(expression_slots(q))[k]
                _replace(h2, a2, i2, simpler_expressions(getattr(h2, a2)[i2])[n])
                if self.attempt(q):
                    p = progress = q
                    break
            k += 1
        return progress


def _body_of(s: Stmt, which: int) -> list:
    if which == 0:
        # keep the counter defined, weak (a Python int) where the loop's was
        if s.kind == "while":
            return [Stmt("assign", s.attr, (Expr("const", "int64", attr=1, weak=True),)), *s.body]
        if s.kind == "for":
            weak = all(e.weak for e in s.exprs)
            first = s.exprs[0] if len(s.exprs) > 1 else Expr("const", "int64", attr=0, weak=True)
            if not weak and first.weak:
                first = Expr("cast", "int64", (first,), attr="kj.int64")
            return [Stmt("assign", s.attr, (first,)), *s.body]
        return list(s.body)
    return list(s.orelse)


def keep_slots(p: Program, slots: set[tuple[str, int]]) -> Program:
    """``p`` without the stores to output slots outside ``slots`` (those that differ)."""
    q = p.copy()
    for stmts in statement_lists(q):
        stmts[:] = [s for s in stmts if not (s.kind in ("store", "augstore")
                                            and (s.attr[0][2:], s.attr[1]) not in slots)]
    return q


__all__ = ["DeviceFunction", "Shrinker", "keep_slots"]
