"""The one walker of the IR: statements in order, a statement's own expressions, expressions
depth first, and a function with its callees, each once (a diamond of calls included)."""

from __future__ import annotations

import kaiojit as kj
from kaiojit import kir
from tests.kir.lowering import typed


@kj.jit(device=True)
def leaf(v):
    return v * 2


@kj.jit(device=True)
def left(v):
    return leaf(v) + 1


@kj.jit(device=True)
def right(v):
    return leaf(v) - 1


def diamond(out, x):
    i = kj.grid(1)
    out[i] = left(x[i]) + right(x[i])


def nested(out, n):
    i = kj.grid(1)
    if i < n:
        for j in range(n):
            while j > 0:
                j -= 1
                if j == 2:
                    break
            out[j] = i
    else:
        out[0] = -1


def test_statements_come_in_order_nested_ones_included():
    kfunc = typed(nested, "void(int64[::1], int32)")
    kinds = [type(s).__name__ for s in kir.walk_stmts(kfunc.body)]
    assert kinds == ["Assign", "If", "ForRange", "While", "Assign", "If", "Break", "Store",
                     "Store"]


def test_a_statement_gives_only_its_own_expressions():
    kfunc = typed(nested, "void(int64[::1], int32)")
    by_kind = {type(s).__name__: s for s in kir.walk_stmts(kfunc.body)}
    loop = by_kind["ForRange"]
    assert kir.stmt_exprs(loop) == (loop.start, loop.stop, loop.step)
    store = by_kind["Store"]
    assert kir.stmt_exprs(store) == (store.array, *store.indices, store.value)
    assert kir.stmt_exprs(by_kind["Break"]) == ()
    if_stmt = by_kind["If"]
    assert kir.stmt_exprs(if_stmt) == (if_stmt.cond,)


def test_expressions_are_depth_first():
    kfunc = typed(nested, "void(int64[::1], int32)")
    cond = kfunc.body[1].cond  # (i < int64(n))
    assert [e.op for e in kir.walk_expr(cond)] == ["cmp", "var", "cast", "var"]
    ops = [e.op for e in kir.function_exprs(kfunc)]
    assert ops.count("cmp") == 3 and ops[0] == "intrinsic"
    assert len(ops) == len(list(kir.body_exprs(kfunc.body)))


def test_a_function_and_its_callees_each_once():
    kfunc = typed(diamond, "void(float32[::1], float32[::1])")
    names = [f.name for f in kir.walk_functions(kfunc)]
    assert names == ["diamond", "left", "leaf", "right"]
    calls = [e.attr.name for f in kir.walk_functions(kfunc) for e in kir.function_exprs(f)
             if e.op == "call"]
    assert calls == ["left", "right", "leaf", "leaf"]
