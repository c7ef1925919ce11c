"""The coarse entry of an elementwise kernel (``kir/coarsen.py``): which kernels get one and
what its PTX does first (every PTX here is also assembled by the ptxas check). The launches
that take it and its results: tests/runtime/test_coarse_launch.py."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.compiler import compile_kernel
from kaiojit.kir.coarsen import FACTOR, coarsenable
from kaiojit.target import coarse_entry
from tests.coarse import host_entries, launch_coarse

# the compiler's own function, not the ptxas check's wrapper (which compiles the coarse entry)
UNWRAPPED_COMPILE = compile_kernel

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


def loads_first(out, x, n):
    i = kj.grid(1)
    v = x[i] * 2.0  # the first load ends the prefix: no copy loads outside the grid
    out[i] = v + n


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
    (loads_first, F32x2, True),
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
    assert re.findall(r"\.entry (\w+)\(", ck.ptx) == [ck.name]  # the kernel's own, alone
    if not expected:
        assert ck.coarse is None
        return
    coarse = ck.coarse.ptx
    assert re.findall(r"\.entry (\w+)\(", coarse) == [coarse_entry(ck.name)]
    own_params = ck.ptx[:ck.ptx.index(")")].count(".param")
    assert coarse[:coarse.index(")")].count(".param") == own_params + 1  # the grid extent


@pytest.mark.parametrize("pyfunc, plain", [(saxpy, 0), (axpy_in_place, FACTOR)])
def test_every_copy_loads_before_the_first_store(pyfunc, plain):
    """Even where a copy's store may alias a later copy's load (``y`` read and written: plain
    ``ld.global``, which ptxas keeps in order), the interleaved copies load first."""
    ck = kj.jit(pyfunc).compile(F32x3)
    body = ck.coarse.ptx
    first_store = body.index("st.global")
    issued = re.findall(r"ld\.global(\.nc)?\.b32", body[:first_store])
    assert len(issued) == 2 * FACTOR  # x and y of all four copies
    assert issued.count("") == plain
    assert len(re.findall(r"st\.global", ck.ptx)) == 1  # the kernel's own entry: one element


def test_the_option_and_debug_leave_it_out():
    for options in ({"coarsen": False}, {"debug": True}):
        assert kj.jit(saxpy, **options).compile(F32x3).coarse is None
    assert kj.jit(saxpy).compile(F32x3).coarse is not None
    with pytest.raises(TypeError, match="unknown option.*coarse"):
        kj.jit(saxpy, coarse=False)


def test_the_coarse_entry_compiles_when_first_asked():
    from kaiojit.types import parse_signature

    ck = UNWRAPPED_COMPILE(saxpy, parse_signature(F32x3), kj.jit(saxpy).options,
                        kj.target.TargetSpec(), None)
    assert "not compiled yet" in repr(ck.coarse)
    assert coarse_entry(ck.name) in ck.coarse.ptx and "compiled>" in repr(ck.coarse)


def test_a_cached_kernel_keeps_its_coarse_entry_once_compiled(tmp_path, monkeypatch):
    from kaiojit import diskcache
    from kaiojit.types import parse_signature

    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    ck = UNWRAPPED_COMPILE(saxpy, parse_signature(F32x3), kj.jit(saxpy).options,
                           kj.target.TargetSpec(), None)
    diskcache.keep_coarse_entry("k" * 40, ck)
    assert not list(tmp_path.rglob("*.kjc"))  # nothing compiled, nothing kept
    ptx = ck.coarse.ptx
    assert [p.name for p in tmp_path.rglob("*.kjc")] == ["k" * 40 + ".kjc"]
    again = UNWRAPPED_COMPILE(saxpy, parse_signature(F32x3), kj.jit(saxpy).options,
                              kj.target.TargetSpec(), None)
    diskcache.keep_coarse_entry("k" * 40, again)
    again.coarse._compile = None  # the kept PTX answers
    assert again.coarse.ptx == ptx


def test_a_cache_hit_still_has_its_coarse_entry_and_reads_it_from_the_cache(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    first = kj.jit(saxpy, cache=True).compile(F32x3)
    ptx = first.coarse.ptx  # compiled on first use (here by the ptxas check), and kept
    assert len(list(tmp_path.rglob("*-coarse.kjc"))) == 1  # beside the kernel's own file
    hit = kj.jit(saxpy, cache=True).compile(F32x3)
    assert hit.timings.get("cache") and hit.coarse is not None
    hit.coarse._compile = None  # a second compile would fail: the cache must answer
    assert hit.coarse.ptx == ptx


# --- the coarse entry's results on the cpu backend, against the kernel's own entry ----------

def through_and_else(out, x, y, n):
    i = kj.grid(1)
    if i < n:
        t = x[i] * 2.0
        out[i] = t
        y[i] = out[i] + (x[i + 1] if i + 1 < n else 0.0)  # a copy reads back its own store


def chained_and_augmented(out, x, n):
    i = kj.grid(1)
    if 0 <= i < n:  # a chained comparison: its middle operand evaluated once
        out[i] = x[i]
        out[i] *= x[i] if -1.0 < x[i] < 1.0 else 2.0  # an augmented store: its index once


def integers(out, x, n, d):
    i = kj.blockIdx.x * kj.blockDim.x + kj.threadIdx.x
    if i < n and x[i] % 3 != 1:
        out[i] = x[i] // d + (x[i] % d) * i


def complex_math(out, z, n):
    i = kj.grid(1)
    if i < n:
        out[i] = abs(z[i]) + math.exp(-abs(z[i].imag))


def f32(rng, size):
    return rng.standard_normal(size).astype(np.float32)


def nan32(rng, size):
    return np.full(size, np.nan, np.float32)


# each case: kernel, signature, its arguments for n elements in arrays of ``size``, the outputs
CASES = {
    "saxpy": (saxpy, F32x3, lambda rng, n, size: [
        nan32(rng, size), f32(rng, size), f32(rng, size), np.float32(rng.uniform(-2, 2)),
        np.int64(n)], (0,)),
    "in place": (axpy_in_place, F32x3, lambda rng, n, size: [
        f32(rng, size), f32(rng, size), f32(rng, size), np.float32(1.5), np.int64(n)], (0,)),
    "shaped": (shaped, F32x2, lambda rng, n, size: [
        nan32(rng, size), f32(rng, size), np.int64(n - 3)], (0,)),
    "moved": (moved, F32x2, lambda rng, n, size: [
        nan32(rng, size), f32(rng, size), np.int64(n)], (0,)),
    "read back": (through_and_else, "void(float32[::1], float32[::1], float32[::1], int64)",
                  lambda rng, n, size: [nan32(rng, size), f32(rng, size), nan32(rng, size),
                                        np.int64(n)], (0, 2)),
    "integers": (integers, "void(int64[::1], int64[::1], int64, int64)",
                 lambda rng, n, size: [np.full(size, -7, np.int64),
                                       rng.integers(-99, 99, size), np.int64(n),
                                       np.int64(rng.integers(2, 9))], (0,)),
    "complex": (complex_math, "void(float64[::1], complex128[::1], int64)",
                lambda rng, n, size: [np.full(size, np.nan), rng.standard_normal(size)
                                      + 1j * rng.standard_normal(size), np.int64(n)], (0,)),
    "unguarded": (unguarded, F32x2, lambda rng, n, size: [
        nan32(rng, size), f32(rng, size), np.int64(rng.integers(1, 9))], (0,)),
    "chained": (chained_and_augmented, F32x2, lambda rng, n, size: [
        nan32(rng, size), f32(rng, size), np.int64(n)], (0,)),
    "loads first": (loads_first, F32x2, lambda rng, n, size: [
        nan32(rng, size), f32(rng, size), np.int64(rng.integers(1, 9))], (0,)),
}


@pytest.fixture
def cpu():
    from kaiojit.runtime import CpuBackend
    from kaiojit.runtime.backend import set_backend

    # the plain variant: the checked one's instrumentation changes where LLVM fuses a multiply
    # and an add (contract=True), and these tests compare two entries bit for bit
    previous = set_backend(CpuBackend(sanitize=False))
    yield
    set_backend(previous)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_coarse_entry_computes_what_the_own_entry_does_on_the_cpu(cpu, case):
    """Every grid extent modulo four, a last block not full, the interleaved form (all four
    blocks inside) and the per-copy form: the same bits as the kernel's own entry, and
    nothing written past what the user's grid covers (the arrays run a block further)."""
    pyfunc, sig, make, outputs = CASES[case]
    own, coarse = host_entries(kj.jit(pyfunc), sig)
    rng = np.random.default_rng()
    block = int(rng.choice([32, 64]))
    for blocks in (1, 2, 3, 4, 5, 7, 8, int(rng.integers(9, 40))):
        exact = pyfunc in (unguarded, loads_first)  # no bounds test: the grid is the size
        n = blocks * block - (0 if exact else int(rng.integers(0, block // 2)))
        args = make(rng, n, blocks * block + block)
        results = []
        for entry in ("own", "coarse"):
            dev = [kj.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
            if entry == "own":
                own.launch((blocks,), (block,), None, 0, tuple(dev))
            else:
                launch_coarse(coarse, blocks, block, tuple(dev))
            results.append([dev[k].copy_to_host() for k in outputs])
        for got_own, got_coarse in zip(*results):
            np.testing.assert_array_equal(got_coarse, got_own)
        for k, got in zip(outputs, results[1]):  # past the grid: as it was before the launch
            np.testing.assert_array_equal(got[blocks * block:], args[k][blocks * block:])
