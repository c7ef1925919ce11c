"""The verifier of the typed IR: the invariants the frontend promises and the lowering relies
on, checked node by node.

Variables are declared with the type they are read and assigned with; operands of arithmetic
and comparisons agree; loads and stores index arrays with one integer per dimension; ``break``
and ``continue`` are inside loops; returns match the function's type; every intrinsic is
registered and its operands fit its declaration; calls match their callee. A violation is a
bug in kaiojit, not in the user's kernel: :class:`IRError` names the function, the node and
where its source is.
"""

from __future__ import annotations

from .. import types as T
from .intrinsics import find
from .nodes import (
    Assign,
    Break,
    Continue,
    Expr,
    ExprStmt,
    ForRange,
    If,
    KFunction,
    Return,
    Stmt,
    Store,
    While,
)
from .printer import expr_text

_BINOPS = frozenset("+ - * / // % ** << >> & | ^".split())
_CMPOPS = frozenset("< <= > >= == !=".split())


class IRError(AssertionError):
    """The kernel IR breaks an invariant of the IR (a bug in kaiojit)."""


def verify(kfunc: KFunction) -> None:
    """Check one typed function (its callees are checked when they are typed)."""
    _Verifier(kfunc).block(kfunc.body, 0)


class _Verifier:
    def __init__(self, kfunc: KFunction):
        self.f = kfunc
        self.params = dict(kfunc.params)

    def fail(self, what: str, node: Expr | Stmt, text: str) -> None:
        loc = node.loc or self.f.loc
        where = f" at {loc}" if loc else ""
        raise IRError(f"internal error: the kernel IR of {self.f.qualname}{where} is broken: "
                      f"{what}, in: {text}")

    # --- statements ----------------------------------------------------------------------------

    def block(self, body: list[Stmt], loops: int) -> None:
        for s in body:
            self.stmt(s, loops)

    def stmt(self, s: Stmt, loops: int) -> None:
        if isinstance(s, Assign):
            self.expr(s.value)
            declared = self.f.locals.get(s.target)
            if declared != s.value.type:
                self.fail(f"{s.target!r} is declared {declared} and assigned "
                          f"{s.value.type}", s, f"{s.target} = {expr_text(s.value)}")
        elif isinstance(s, Store):
            for e in (s.array, *s.indices, s.value):
                self.expr(e)
            at = s.array.type
            text = f"{expr_text(s.array)}[...] = {expr_text(s.value)}"
            if not isinstance(at, T.ArrayType):
                self.fail(f"a store into {at}", s, text)
            self.indices(at, s.indices, s, text)
            if s.value.type != at.dtype:
                self.fail(f"a store of {s.value.type} into an array of {at.dtype}", s, text)
        elif isinstance(s, (If, While)):
            self.condition(s.cond, s)
            self.block(s.body, loops + (1 if isinstance(s, While) else 0))
            if isinstance(s, If):
                self.block(s.orelse, loops)
        elif isinstance(s, ForRange):
            declared = self.f.locals.get(s.var)
            for e in (s.start, s.stop, s.step):
                self.expr(e)
                if e.type != declared:
                    self.fail(f"loop variable {s.var!r} is declared {declared}, a bound is "
                              f"{e.type}", s, f"for {s.var} in range(..., {expr_text(e)}, ...)")
            self.block(s.body, loops + 1)
        elif isinstance(s, (Break, Continue)):
            if not loops:
                self.fail("outside a loop", s, type(s).__name__.lower())
        elif isinstance(s, Return):
            self.ret(s)
        elif isinstance(s, ExprStmt):
            self.expr(s.expr)
        else:
            self.fail(f"{type(s).__name__} is no statement", s, repr(s))

    def ret(self, s: Return) -> None:
        rt = self.f.return_type
        if s.value is None:
            if rt != T.void:
                self.fail(f"a bare return in a function returning {rt}", s, "return")
            return
        self.expr(s.value)
        if s.value.type != rt:
            self.fail(f"returns {s.value.type} from a function returning {rt}", s,
                      f"return {expr_text(s.value)}")

    def condition(self, e: Expr, s: Stmt) -> None:
        self.expr(e)
        if e.type != T.bool_:
            self.fail(f"a condition of type {e.type}", s, expr_text(e))

    def indices(self, at: T.ArrayType, indices, node, text: str) -> None:
        if len(indices) != at.ndim:
            self.fail(f"{len(indices)} indices for a {at.ndim}-d array", node, text)
        for i in indices:
            if not (isinstance(i.type, T.ScalarType) and i.type.is_int):
                self.fail(f"an index of type {i.type}", node, text)

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, e: Expr) -> None:
        """Check ``e`` and its operands, depth first."""
        for a in e.args:
            self.expr(a)
        if not isinstance(e.type, T.Type):
            self.fail(f"a node typed {e.type!r}", e, expr_text(e))
        check = _CHECKS.get(e.op)
        if check is None:
            self.fail(f"unknown op {e.op!r}", e, expr_text(e))
        why = check(self, e)
        if why:
            self.fail(why, e, expr_text(e))


def _arity(e: Expr, n: int) -> str | None:
    return None if len(e.args) == n else f"{e.op} takes {n} operands, got {len(e.args)}"


def _const(v: _Verifier, e: Expr) -> str | None:
    t, x = e.type, e.attr
    ok = (isinstance(t, T.StringType) and isinstance(x, str)) or (
        isinstance(t, T.ScalarType) and (
            (t.is_bool and isinstance(x, bool))
            or (t.is_int and isinstance(x, int) and not isinstance(x, bool))
            or (t.is_float and isinstance(x, float))
            or (t.is_complex and isinstance(x, complex))))
    return None if ok else f"a {t} constant holding {x!r}"


def _var(v: _Verifier, e: Expr) -> str | None:
    declared = v.f.locals.get(e.attr)
    return None if declared == e.type else f"{e.attr!r} is declared {declared}, read as {e.type}"


def _param(v: _Verifier, e: Expr) -> str | None:
    declared = v.params.get(e.attr)
    return None if declared == e.type else \
        f"parameter {e.attr!r} is {declared}, read as {e.type}"


def _binop(v: _Verifier, e: Expr) -> str | None:
    if e.attr not in _BINOPS:
        return f"unknown operator {e.attr!r}"
    a, b = (x.type for x in e.args)
    if not isinstance(a, T.ScalarType) or a != b or e.type != a:
        return f"{e.attr} of {a} and {b} giving {e.type}"
    return None


def _unop(v: _Verifier, e: Expr) -> str | None:
    a = e.args[0].type
    ok = e.attr in ("-", "+", "~") and isinstance(a, T.ScalarType) and e.type == a
    return None if ok else f"unary {e.attr} of {a} giving {e.type}"


def _cmp(v: _Verifier, e: Expr) -> str | None:
    a, b = (x.type for x in e.args)
    if e.attr not in _CMPOPS or not isinstance(a, T.ScalarType) or a != b or e.type != T.bool_:
        return f"{e.attr} of {a} and {b} giving {e.type}"
    return None


def _logic(v: _Verifier, e: Expr) -> str | None:
    types = [x.type for x in e.args]
    if any(t != T.bool_ for t in types) or e.type != T.bool_:
        return f"{e.op} of {', '.join(map(str, types))} giving {e.type}"
    return None


def _select(v: _Verifier, e: Expr) -> str | None:
    c, a, b = (x.type for x in e.args)
    if c != T.bool_ or a != e.type or b != e.type:
        return f"a select on {c} of {a} and {b} giving {e.type}"
    return None


def _cast(v: _Verifier, e: Expr) -> str | None:
    src, dst = e.args[0].type, e.type
    if isinstance(src, T.ScalarType) and isinstance(dst, T.ScalarType):
        return None
    if (isinstance(src, T.ArrayType) and isinstance(dst, T.ArrayType)
            and (src.dtype, src.ndim) == (dst.dtype, dst.ndim)):
        return None
    return f"a cast of {src} to {dst}"


def _load(v: _Verifier, e: Expr) -> str | None:
    at = e.args[0].type if e.args else None
    if not isinstance(at, T.ArrayType):
        return f"a load from {at}"
    v.indices(at, e.args[1:], e, expr_text(e))
    return None if e.type == at.dtype else f"a load of {e.type} from an array of {at.dtype}"


def _shape(v: _Verifier, e: Expr) -> str | None:
    at = e.args[0].type
    if not isinstance(at, T.ArrayType) or not 0 <= e.attr < at.ndim or e.type != T.int64:
        return f"shape[{e.attr}] of {at} giving {e.type}"
    return None


def _tuple(v: _Verifier, e: Expr) -> str | None:
    want = T.TupleType(tuple(a.type for a in e.args))
    return None if e.type == want else f"a tuple of {want} typed {e.type}"


def _getitem(v: _Verifier, e: Expr) -> str | None:
    tt = e.args[0].type
    if not isinstance(tt, T.TupleType) or not 0 <= e.attr < len(tt.elements) \
            or tt.elements[e.attr] != e.type:
        return f"item {e.attr} of {tt} typed {e.type}"
    return None


def _intrinsic(v: _Verifier, e: Expr) -> str | None:
    decl = find(e.attr)
    if decl is None:
        return f"intrinsic {e.attr!r} is not registered"
    if decl.param is None and e.param is not None or (
            decl.param is not None and not isinstance(e.param, decl.param)):
        return (f"intrinsic {decl.name}: static parameter {e.param!r}, declared "
                f"{decl.param.__name__ if decl.param else 'none'}")
    why = decl.operands(e)
    return f"intrinsic {decl.name}: {why}" if why else None


def _call(v: _Verifier, e: Expr) -> str | None:
    callee = e.attr
    if not isinstance(callee, KFunction):
        return f"a call of {callee!r}"
    got = tuple(a.type for a in e.args)
    want = tuple(t for _, t in callee.params)
    if got != want or e.type != callee.return_type:
        return (f"a call of {callee.qualname}, {callee.signature}, with "
                f"({', '.join(map(str, got))}) giving {e.type}")
    return None


def _memory(v: _Verifier, e: Expr) -> str | None:
    return None if isinstance(e.type, T.ArrayType) else f"{e.op} typed {e.type}"


def _reuse(v: _Verifier, e: Expr) -> str | None:
    return None if e.type == e.args[0].type else f"reuse of {e.args[0].type} typed {e.type}"


def _with_arity(n: int, check):
    def checked(v: _Verifier, e: Expr) -> str | None:
        return _arity(e, n) or check(v, e)
    return checked


_CHECKS = {
    "const": _with_arity(0, _const), "var": _with_arity(0, _var),
    "param": _with_arity(0, _param), "binop": _with_arity(2, _binop),
    "unop": _with_arity(1, _unop), "not": _with_arity(1, _logic),
    "cmp": _with_arity(2, _cmp), "and": _with_arity(2, _logic), "or": _with_arity(2, _logic),
    "select": _with_arity(3, _select), "cast": _with_arity(1, _cast), "load": _load,
    "shape": _with_arity(1, _shape), "tuple": _tuple, "getitem": _with_arity(1, _getitem),
    "intrinsic": _intrinsic, "call": _call, "shared": _with_arity(0, _memory),
    "local": _with_arity(0, _memory), "constarray": _with_arity(0, _memory),
    "globalarray": _with_arity(0, _memory),
    "reuse": _with_arity(1, _reuse),
}

__all__ = ["IRError", "verify"]
