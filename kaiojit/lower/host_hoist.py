"""Hoisting for the host's block-synchronous lowering: barriers, warp operations and calls of
block-mode functions (the *split points*) become statements of their own.

After this pass a split point is only ever the whole value of an ``Assign`` or ``ExprStmt``, so
the lowering can end one loop over the block's threads before it and start another after it. A
``while`` whose condition has a split point becomes ``while True:`` with the condition at the
top of the body. A split inside ``and``/``or``/``x if c else y`` is evaluated unconditionally.
"""

from __future__ import annotations

from .. import kir
from .. import types as T
from ..kir import Expr
from ..kir.analysis import is_split_point


class Hoister:
    """Rewrites a body (without touching the original) so that every split point is the whole
    value of an ``Assign`` or ``ExprStmt``; new temporaries go to ``temps``."""

    def __init__(self, needs_block):
        self.needs_block = needs_block
        self.temps: dict[str, T.Type] = {}

    def has_split(self, e: Expr) -> bool:
        return any(is_split_point(x, self.needs_block) for x in kir.walk_expr(e))

    def block(self, stmts: list) -> list:
        out = []
        for s in stmts:
            out.extend(self.stmt(s))
        return out

    def stmt(self, s) -> list:
        pre: list = []
        if isinstance(s, kir.Assign):
            if not self.has_split(s.value):
                return [s]
            value = self.expr(s.value, pre, True)
            return [*pre, kir.Assign(s.target, value, s.loc)]
        if isinstance(s, kir.ExprStmt):
            if not self.has_split(s.expr):
                return [s]
            value = self.expr(s.expr, pre, True)
            return [*pre, kir.ExprStmt(value, s.loc)]
        if isinstance(s, kir.Store):
            array = self.expr(s.array, pre)
            indices = tuple(self.expr(i, pre) for i in s.indices)
            value = self.expr(s.value, pre)
            return [*pre, kir.Store(array, indices, value, s.loc)]
        if isinstance(s, kir.Return):
            value = self.expr(s.value, pre) if s.value is not None else None
            return [*pre, kir.Return(value, s.loc)]
        if isinstance(s, kir.If):
            cond = self.expr(s.cond, pre)
            return [*pre, kir.If(cond, self.block(s.body), self.block(s.orelse), s.loc)]
        if isinstance(s, kir.While):
            cond = self.expr(s.cond, pre)
            body = self.block(s.body)
            if not pre:
                return [kir.While(cond, body, s.loc)]
            # the condition has a split point: evaluate it at the top of every iteration
            leave = kir.If(Expr("not", T.bool_, (cond,), loc=s.loc), [kir.Break(s.loc)], [],
                           s.loc)
            return [kir.While(Expr("const", T.bool_, attr=True), [*pre, leave, *body], s.loc)]
        if isinstance(s, kir.ForRange):
            start, stop, step = (self.expr(x, pre) for x in (s.start, s.stop, s.step))
            return [*pre, kir.ForRange(s.var, start, stop, step, self.block(s.body), s.loc,
                                       s.unrolled)]
        return [s]

    def expr(self, e: Expr, pre: list, top: bool = False) -> Expr:
        if not self.has_split(e):
            return e
        args = tuple(self.expr(a, pre) for a in e.args)
        new = Expr(e.op, e.type, args, e.attr, e.loc, e.weak, e.param)
        if top or not is_split_point(e, self.needs_block):
            return new
        name = f"$split{len(self.temps)}"
        self.temps[name] = e.type
        pre.append(kir.Assign(name, new, e.loc))
        return Expr("var", e.type, (), name, e.loc)
