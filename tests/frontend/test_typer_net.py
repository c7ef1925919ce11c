"""The net in the typer's ``visit``: an exception a typing rule did not mean to raise (a bug
of kaiojit or of an intrinsic's rule) reaches the user as a located CompileError naming the
innermost expression being typed, never as a raw traceback out of kaiojit."""

from __future__ import annotations

import math

import pytest

import kaiojit as kj
from kaiojit.frontend.typer import Typer
from kaiojit.kir import intrinsics as registry
from tests.located import assert_located


def kernel(out, x):
    i = kj.grid(1)
    if i < out.shape[0]:
        out[i] = math.sqrt(x[i]) + 1.0


def test_an_internal_exception_in_an_intrinsic_rule_is_located(monkeypatch):
    decl, _ = registry.call_typing(math.sqrt)

    def broken(typer, node):
        raise KeyError("a typing rule's bug")

    monkeypatch.setitem(registry._REG.by_object, math.sqrt, (decl, broken))
    with pytest.raises(kj.CompileError) as info:
        kj.compile_ptx(kernel, "void(float32[::1], float32[::1])")
    err = info.value
    assert "internal error while typing 'math.sqrt(x[i])': KeyError" in str(err)
    assert "a typing rule's bug" in str(err)
    assert_located(err, kernel, "math.sqrt(x[i])")


def test_an_internal_exception_in_the_typer_is_located_at_the_innermost_node(monkeypatch):
    def broken(self, node):
        raise ZeroDivisionError("inside the typer")

    monkeypatch.setattr(Typer, "visit_Subscript", broken)
    with pytest.raises(kj.CompileError) as info:
        kj.compile_ptx(kernel, "void(float32[::1], float32[::1])")
    # the first subscript typed: the one in the bounds test
    assert "internal error while typing 'out.shape[0]': ZeroDivisionError: inside the typer" \
        in str(info.value)
    assert_located(info.value, kernel, "out.shape[0]")


def test_a_compile_error_passes_through_unchanged():
    def bad(out):
        out[0] = undefined_name  # noqa: F821 - the error under test

    with pytest.raises(kj.CompileError) as info:
        kj.compile_ptx(bad, "void(float32[::1])")
    assert "internal error" not in str(info.value)
    assert_located(info.value, bad, "undefined_name")
