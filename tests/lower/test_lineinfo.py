"""lineinfo=True: PTX carries .loc directives naming the kernel's file and its lines."""

from __future__ import annotations

import inspect
import math
import re

import kaiojit as kj

SIG = "void(float32[::1], float32[::1], int32)"


def kernel(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = math.exp(x[i]) * 2.0


def test_lineinfo_maps_ptx_to_source_lines():
    ptx = kj.compile_ptx(kernel, SIG, lineinfo=True)
    files = re.findall(r'\.file\s+(\d+)\s+"([^"]+)"', ptx)
    assert any(path == __file__ for _, path in files)
    lines = {int(m) for m in re.findall(r"\.loc\s+\d+\s+(\d+)", ptx)}
    first = inspect.getsourcelines(kernel)[1]
    store_line = first + 3  # out[i] = math.exp(x[i]) * 2.0
    assert store_line in lines
    assert lines <= set(range(0, first + 4))


def test_no_line_tables_by_default():
    ptx = kj.compile_ptx(kernel, SIG)
    assert ".loc" not in ptx and ".file" not in ptx
