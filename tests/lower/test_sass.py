"""inspect_sass: SASS through ptxas and cuobjdump (both pip packages of the test extra), and a
clear error naming what is missing when they are not there."""

from __future__ import annotations

import pytest

import kaiojit as kj
from kaiojit.tools import sass

SIG = "void(float32[::1], float32[::1], float32[::1], float32, int32)"


def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def _tools_present() -> bool:
    return sass.find_tool("ptxas") is not None and (
        sass.find_tool("nvdisasm") or sass.find_tool("cuobjdump")) is not None


def test_sass_of_saxpy():
    if not _tools_present():
        pytest.skip("ptxas and cuobjdump/nvdisasm are not installed")
    k = kj.jit(SIG)(saxpy)
    sass = k.inspect_sass(SIG)
    assert "FFMA" in sass  # a * x + y contracted into one fused multiply-add
    assert "LDG.E.CONSTANT" in sass or "LDG.E" in sass
    assert "EXIT" in sass


def test_sass_without_tools_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(sass, "find_tool", lambda name: None)
    k = kj.jit(SIG)(saxpy)
    with pytest.raises(RuntimeError, match="inspect_sass needs ptxas"):
        k.inspect_sass(SIG)
