"""The verifier of the typed IR catches broken IR, naming the function, the node and where its
source is; the typer runs it on every function it types."""

from __future__ import annotations

import pytest

import kaiojit as kj
from kaiojit import kir
from kaiojit import types as T
from kaiojit.kir import Expr, IRError, verify
from tests.kir.lowering import typed
from tests.located import position_of

SIG = "void(float32[::1], float32[::1], int32)"


@kj.jit(device=True)
def scale(v, k):
    return v * k


def kernel(out, x, n):
    i = kj.grid(1)
    if i < n:
        c = kj.syncthreads_count(x[i] > 0)
        out[i] = scale(x[i], 2.0) + c


def fresh():
    return typed(kernel, SIG)


def nodes(kfunc, op, attr=None):
    return [e for e in kir.function_exprs(kfunc) if e.op == op
            and (attr is None or e.attr == attr)]


def broken(kfunc, *words):
    with pytest.raises(IRError) as info:
        verify(kfunc)
    text = str(info.value)
    assert text.startswith("internal error: the kernel IR of kernel at "), text
    for w in words:
        assert w in text, text
    return text


def test_typed_ir_verifies():
    verify(fresh())


def test_the_typer_runs_the_verifier(monkeypatch):
    from kaiojit.frontend import typer

    seen = []
    monkeypatch.setattr(typer, "verify", lambda f: seen.append(f.qualname))
    typed(kernel, SIG)
    assert seen == ["scale", "kernel"]


def test_a_variable_read_with_another_type():
    kfunc = fresh()
    var = nodes(kfunc, "var", "i")[0]
    var.type = T.int32
    text = broken(kfunc, "'i' is declared int64, read as int32")
    filename, line, col = position_of(kernel, "i < n")
    assert f"{filename}:{line}:{col}" in text


def test_an_assignment_of_another_type():
    kfunc = fresh()
    kfunc.locals["c"] = T.float64
    broken(kfunc, "'c' is declared float64 and assigned int32", "c = sync.syncthreads_count(")


def test_operands_of_an_operation_that_disagree():
    kfunc = fresh()
    add = nodes(kfunc, "binop", "+")[0]
    add.args = (add.args[0], Expr("const", T.int32, attr=1))
    broken(kfunc, "+ of float64 and int32 giving float64")


def test_a_load_with_too_few_indices():
    kfunc = fresh()
    load = nodes(kfunc, "load")[0]
    load.args = load.args[:1]
    broken(kfunc, "0 indices for a 1-d array", "x[]")


def test_a_store_of_another_type():
    kfunc = fresh()
    store = next(s for s in kir.walk_stmts(kfunc.body) if isinstance(s, kir.Store))
    store.value = Expr("const", T.float64, attr=1.0)
    broken(kfunc, "a store of float64 into an array of float32")


def test_a_condition_that_is_not_bool():
    kfunc = fresh()
    cond = next(s for s in kir.walk_stmts(kfunc.body) if isinstance(s, kir.If))
    cond.cond = Expr("var", T.int64, attr="i")
    broken(kfunc, "a condition of type int64")


def test_break_and_continue_outside_a_loop():
    kfunc = fresh()
    kfunc.body.append(kir.Break())
    broken(kfunc, "outside a loop", "break")
    kfunc.body[-1] = kir.Continue()
    broken(kfunc, "outside a loop", "continue")


def test_a_return_of_the_wrong_type():
    kfunc = fresh()
    kfunc.body.append(kir.Return(Expr("const", T.int32, attr=0)))
    broken(kfunc, "returns int32 from a function returning void")


def test_an_intrinsic_that_is_not_registered():
    kfunc = fresh()
    nodes(kfunc, "intrinsic", "grid.x")[0].attr = "grid.w"
    broken(kfunc, "intrinsic 'grid.w' is not registered")


def test_an_intrinsic_whose_operands_do_not_fit_its_declaration():
    kfunc = fresh()
    count = nodes(kfunc, "intrinsic", "sync.syncthreads_count")[0]
    pred = count.args[0]
    count.args = ()
    broken(kfunc, "intrinsic sync.syncthreads_count: takes 1 operands, got 0")
    count.args = (Expr("cast", T.int32, (pred,)),)
    broken(kfunc, "operand 0 is int32, expected bool")
    count.args = (pred,)
    count.type = T.int64
    broken(kfunc, "result is int64, expected int32")


def test_a_call_that_does_not_match_its_callee():
    kfunc = fresh()
    call = nodes(kfunc, "call")[0]
    call.args = call.args[:1]
    broken(kfunc, "a call of scale, float64(float32, float64), with (float32) giving float64")
