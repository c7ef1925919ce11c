"""The coarse entry of an elementwise kernel (``kir/coarsen.py``): which kernels get one and
what its PTX does first (every PTX here is also assembled by the ptxas check). The launches
that take it and its results: tests/runtime/test_coarse_launch.py."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.kir.coarsen import FACTOR, coarsenable
from kaiojit.target import coarse_entry

F32x3 = "void(float32[::1], float32[::1], float32[::1], float32, int64)"
F32x2 = "void(float32[::1], float32[::1], int64)"


def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def axpy_in_place(y, x, unused, a, n):
    i = kj.blockIdx.x * kj.blockDim.x + kj.threadIdx.x
    if i < n:
        y[i] = a * x[i] + y[i]


def unguarded(out, x, n):
    i = kj.grid(1)
    out[i] = x[i] * 2.0 + n


def shaped(out, x, n):
    m = x.shape[0]
    i = kj.grid(1)
    if i < m and i < n:
        t = math.sqrt(abs(x[i]))
        out[i] = t if x[i] > 0 else -t


def moved(out, x, n):
    i = kj.grid(1)
    if i < n:
        i = n - 1 - i
        out[i] = x[i] + 1.0


def tid_only(out, x, n):
    i = kj.threadIdx.x
    if i < n:
        out[i] = x[i]


def grid_stride(out, x, n):
    for i in range(kj.grid(1), n, kj.gridsize(1)):
        out[i] = x[i]


def with_else(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i]
    else:
        out[0] = 0.0


def atomic(out, x, n):
    i = kj.grid(1)
    if i < n:
        kj.atomic.add(out, 0, x[i])


def synced(out, x, n):
    i = kj.grid(1)
    kj.syncthreads()
    if i < n:
        out[i] = x[i]


def sees_the_block(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i] + kj.blockIdx.x


def nested_if(out, x, n):
    i = kj.grid(1)
    if i < n:
        if x[i] > 0:
            out[i] = x[i]


@pytest.mark.parametrize("pyfunc, sig, expected", [
    (saxpy, F32x3, True),
    (axpy_in_place, F32x3, True),
    (unguarded, F32x2, True),
    (shaped, F32x2, True),
    (moved, F32x2, True),
    (tid_only, F32x2, False),
    (grid_stride, F32x2, False),
    (with_else, F32x2, False),
    (atomic, F32x2, False),
    (synced, F32x2, False),
    (sees_the_block, F32x2, False),
    (nested_if, F32x2, False),
])
def test_which_kernels_get_a_coarse_entry(pyfunc, sig, expected):
    ck = kj.jit(pyfunc).compile(sig)
    assert coarsenable(ck.kfunc) is expected
    entries = re.findall(r"\.entry (\w+)\(", ck.ptx)
    assert entries == ([ck.name, coarse_entry(ck.name)] if expected else [ck.name])


def coarse_body(ptx: str, name: str) -> str:
    start = ptx.index(f".entry {coarse_entry(name)}(")
    return ptx[start:]


@pytest.mark.parametrize("pyfunc, plain", [(saxpy, 0), (axpy_in_place, FACTOR)])
def test_every_copy_loads_before_the_first_store(pyfunc, plain):
    """Even where a copy's store may alias a later copy's load (``y`` read and written: plain
    ``ld.global``, which ptxas keeps in order), the interleaved copies load first."""
    ck = kj.jit(pyfunc).compile(F32x3)
    body = coarse_body(ck.ptx, ck.name)
    first_store = body.index("st.global")
    issued = re.findall(r"ld\.global(\.nc)?\.b32", body[:first_store])
    assert len(issued) == 2 * FACTOR  # x and y of all four copies
    assert issued.count("") == plain
    # the kernel's own entry: one element, loads then its store
    own = ck.ptx[:ck.ptx.index(f".entry {coarse_entry(ck.name)}(")]
    assert len(re.findall(r"st\.global", own)) == 1


def test_the_option_and_debug_leave_it_out():
    for options in ({"coarsen": False}, {"debug": True}):
        ck = kj.jit(saxpy, **options).compile(F32x3)
        assert coarse_entry(ck.name) not in ck.ptx
    assert "__kaiojit_grid" in kj.jit(saxpy).compile(F32x3).llvm
    with pytest.raises(TypeError, match="unknown option.*coarse"):
        kj.jit(saxpy, coarse=False)
