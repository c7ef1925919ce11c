"""What an intrinsic declares instead of what its name says: its static parameter is a typed
payload on the node (``Expr.param``, of the class the declaration names, checked by the typer
and the verifier), and the coarsener reads the ``elementwise`` property, not a name prefix."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import kir
from kaiojit import types as T
from kaiojit.kir import IRError, verify
from kaiojit.kir.coarsen import coarsenable
from kaiojit.kir.intrinsics import Intrinsic, Operands, lookup
from tests.kir.lowering import typed


def waiting(out, x):
    kj.cp_async_wait(2)
    i = kj.grid(1)
    if i < out.shape[0]:
        out[i] = x[i]


def intrinsic_nodes(kfunc, name):
    return [e for e in kir.function_exprs(kfunc) if e.op == "intrinsic" and e.attr == name]


def test_a_static_parameter_is_a_typed_payload_checked_by_the_verifier():
    n = int(np.random.default_rng().integers(0, 7))
    kfunc = typed(waiting, "void(float32[::1], float32[::1])")
    (e,) = intrinsic_nodes(kfunc, "tc.cp_async_wait")
    assert e.param == 2 and type(e.param) is int
    assert "tc.cp_async_wait:2()" in str(kfunc)  # printed as the name's text was
    e.param = str(n)  # a parameter of another class than the declaration's
    with pytest.raises(IRError) as info:
        verify(kfunc)
    assert f"intrinsic tc.cp_async_wait: static parameter '{n}', declared int" in str(info.value)
    e.param = None
    with pytest.raises(IRError):
        verify(kfunc)


def test_an_elementwise_intrinsic_must_be_pure():
    with pytest.raises(ValueError, match="elementwise intrinsic is pure"):
        Intrinsic("test.impure_elementwise", Operands(result=T.void), {}, elementwise=True)


def root(out, x):
    i = kj.grid(1)
    if i < out.shape[0]:
        out[i] = math.sqrt(x[i])


def test_the_coarsener_reads_the_elementwise_property(monkeypatch):
    kfunc = typed(root, "void(float32[::1], float32[::1])")
    assert coarsenable(kfunc)
    monkeypatch.setattr(lookup("math.sqrt"), "elementwise", False)
    assert not coarsenable(kfunc)
