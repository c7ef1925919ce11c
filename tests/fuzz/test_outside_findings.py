"""Compiler bugs an independent fuzzer (written from docs/semantics.md alone) found, issue 36:
chained comparisons over loads and calls, a float16 NaN converted to int16, constant folding
that differed from run time, and variables assigned on one path only."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.target import TargetSpec
from tests.fuzz.harness import exec_source

rng = np.random.default_rng()


def _same_bits(x, y):
    return (x.view(f"u{x.itemsize}") == y.view(f"u{y.itemsize}")) | (np.isnan(x) & np.isnan(y))


# --- chained comparisons ---------------------------------------------------------------------

@kj.jit(device=True)
def bump(counts, i, k, v):
    """v, after counting in ``counts[i, k]`` that it was evaluated."""
    counts[i, k] += 1
    return v


@kj.jit
def chain4(o, counts, a, b, c, d):
    i = kj.grid(1)
    o[i, 0] = a[i] < b[i] < c[i] < d[i]
    o[i, 1] = a[i] < bump(counts, i, 0, b[i]) <= bump(counts, i, 1, c[i]) < \
        bump(counts, i, 2, d[i]) != bump(counts, i, 3, a[i])


@kj.jit(device=True)
def ordered(x, y, z):
    return x < y < z


@kj.jit
def chain_nested(o, counts, a, b, c):
    i = kj.grid(1)
    o[i, 0] = (a[i] < bump(counts, i, 4, b[i]) < c[i]) if b[i] < c[i] < a[i] else \
        (c[i] < a[i] < b[i])
    o[i, 1] = ordered(a[i] < b[i] < c[i], b[i] < bump(counts, i, 5, c[i]) < a[i], True)
    o[i, 2] = a[i] < (1.0 if b[i] < c[i] < a[i] else 0.0) < c[i] < b[i] < a[i] < 2.0


def test_chains_of_any_length_evaluate_each_operand_once_and_short_circuit(kj_backend):
    n = 256
    a, b, c, d = (rng.integers(0, 4, n).astype(np.float64) for _ in range(4))
    o = rng.random((n, 2)) < 0.5
    counts = np.zeros((n, 6), np.int32)
    chain4[n // 64, 64](o, counts, a, b, c, d)
    assert (o[:, 0] == ((a < b) & (b < c) & (c < d))).all()
    for i in range(n):
        x, y, z, w = a[i], b[i], c[i], d[i]
        seen = [0, 0, 0, 0]

        def ev(k, v, seen=seen):
            seen[k] += 1
            return v
        want = x < ev(0, y) <= ev(1, z) < ev(2, w) != ev(3, x)  # (pytest rewrites asserts)
        assert o[i, 1] == want
        assert list(counts[i, :4]) == seen, (i, x, y, z, w)


def test_two_operator_chains_inside_conditional_expressions_and_calls(kj_backend):
    n = 256
    a, b, c = (rng.integers(0, 3, n).astype(np.float64) for _ in range(3))
    o = rng.random((n, 3)) < 0.5
    counts = np.zeros((n, 6), np.int32)
    chain_nested[n // 64, 64](o, counts, a, b, c)
    for i in range(n):
        x, y, z = a[i], b[i], c[i]
        cond = y < z < x
        assert o[i, 0] == ((x < y < z) if cond else (z < x < y))
        assert counts[i, 4] == (1 if cond else 0)
        assert o[i, 1] == ((x < y < z) < (y < z < x) < True)
        assert counts[i, 5] == 1
        assert o[i, 2] == (x < (1.0 if cond else 0.0) < z < y < x < 2.0)


# --- float to integer conversions ------------------------------------------------------------

INT_TARGETS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SPECIAL = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, -1e-40, 6e-8, -6e-8, 0.5,
           -0.5, 1.9, -1.9, 127.5, 128.0, -128.5, -129.0, 255.9, 256.0, 32767.0, 32768.0,
           -32769.0, 65504.0, -65504.0, 1e10, -1e10, 3e38, -3e38, 1.8e19, 1e300, -1e300,
           2.0**31, 2.0**63, 2.0**64]


@kj.jit
def float_to_ints(o8, o16, o32, o64, u8, u16, u32, u64, a):
    i = kj.grid(1)
    o8[i] = kj.int8(a[i])
    o16[i] = kj.int16(a[i])
    o32[i] = kj.int32(a[i])
    o64[i] = kj.int64(a[i])
    u8[i] = kj.uint8(a[i])
    u16[i] = kj.uint16(a[i])
    u32[i] = kj.uint32(a[i])
    u64[i] = kj.uint64(a[i])


def _saturated(v: float, t: str) -> int:
    info = np.iinfo(t)
    return 0 if math.isnan(v) else int(min(max(v, info.min), info.max)) if math.isfinite(v) \
        else (info.max if v > 0 else info.min)


@pytest.mark.parametrize("src", ["float16", "float32", "float64", "bfloat16"])
def test_float_to_int_conversions_saturate_and_nan_is_zero(kj_backend, src):
    """Every float type to every integer width (seed: float16 NaN to int16 gave -32768 on a
    cpu with AVX512-FP16), on NaN of every float16 payload, infinities, zeros, subnormals and
    values past each range."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = ml_dtypes.bfloat16 if src == "bfloat16" else np.dtype(src)
    nans = np.arange(0x7C01, 0x8000, 7).astype(np.uint16).view(np.float16).astype(np.float64)
    with np.errstate(all="ignore"):
        values = np.concatenate([SPECIAL, -nans, nans, rng.standard_normal(40) * 300])
        a = values.astype(dtype)
    a = np.concatenate([a, np.zeros(-len(a) % 64, dtype)])
    outs = [np.full(len(a), 77, t) for t in INT_TARGETS]
    float_to_ints[len(a) // 64, 64](*outs, a)
    for t, o in zip(INT_TARGETS, outs):
        want = [_saturated(float(v), t) for v in a.astype(np.float64)]
        assert o.tolist() == want, (src, t)


def test_float16_converts_to_integers_through_float32_on_the_host():
    """LLVM 22 lowers a half-to-i16 saturating conversion on x86 with AVX512-FP16 without its
    NaN test; the host converts float16 through float32 (exact), where the test is kept."""
    ck = float_to_ints.compile("void(" + ", ".join(f"{t}[::1]" for t in INT_TARGETS)
                               + ", float16[::1])", TargetSpec(kind="host"))
    llvm = ck.stage("llvm")
    calls = [line for line in llvm.splitlines() if "@llvm.fpto" in line and "call" in line]
    assert calls and not any("f16(" in line for line in calls), calls


@pytest.mark.parametrize("src", ["float16", "float32", "float64", "bfloat16"])
def test_float_to_int_ptx_converts_with_saturating_cvt(src):
    """PTX's cvt.rzi from a float to an integer saturates and makes NaN 0 (the PTX ISA's
    conversion rules): each pair is one such cvt (ptxas assembles every PTX the tests make)."""
    ptx = kj.compile_ptx(float_to_ints, "void(" + ", ".join(f"{t}[::1]" for t in INT_TARGETS)
                         + f", {src}[::1])")
    cvts = [line.split()[0] for line in ptx.splitlines() if line.strip().startswith("cvt.rzi")]
    for bits in (8, 16, 32, 64):
        for kind in "su":
            # 8-bit results are computed in 16 bits by PTX's cvt, then clamped by it
            width = max(bits, 16)
            forms = (f"cvt.rzi.{kind}{width}.", f"cvt.rzi.sat.{kind}{width}.")
            assert any(c.startswith(forms) for c in cvts), (src, cvts)


# --- constant folding equals run time ----------------------------------------------------------

FOLD_SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -7.25, 0.5, 2.0, 3.0, -1.0, 1e-3,
                65504.0, 1e30, -1e-30, 5e-324, 1.7]


def _kernel_from_source(name: str, source: str):
    """A kernel defined by ``source`` (registered with linecache, so kaiojit can read it)."""
    return exec_source(source, f"<test-outside-{name}>", "outside")[name]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_folded_float_arithmetic_is_what_run_time_computes(kj_backend, dtype):
    """Seed: ``(-inf) ** 0.5`` folded to +inf and ``(-0.0) ** 0.5`` to +0.0 where run time
    (sqrt) gives NaN and -0.0. Each operator on constants, folded, against the same operator
    on the same values loaded at run time, bit for bit (NaNs of any sign alike)."""
    ops = ["+", "-", "*", "/", "//", "%", "**"]
    pairs = [(op, float(x), float(y)) for op in ops
             for x, y in zip(rng.choice(FOLD_SPECIAL, 20), rng.choice(FOLD_SPECIAL, 20))]
    pairs += [("**", -math.inf, 0.5), ("**", -0.0, 0.5), ("**", -4.0, 0.5), ("**", 3.0, 2.0)]
    t = f"kj.{dtype}"
    folded = [f"    o[{k}] = {t}({x!r}) {op} {t}({y!r})" for k, (op, x, y) in enumerate(pairs)]
    # a constant exponent stays one: it picks the lowering (x ** 0.5 is sqrt, docs/semantics.md)
    run = [f"    o[{k}] = a[{2 * k}] {op} " + (f"{t}({y!r})" if op == "**" else f"a[{2 * k + 1}]")
           for k, (op, _, y) in enumerate(pairs)]
    src = ("import math\nimport kaiojit as kj\n\n\n@kj.jit\ndef folded(o):\n" + "\n".join(folded)
           + "\n\n\n@kj.jit\ndef run(o, a):\n" + "\n".join(run) + "\n")
    src = src.replace("nan", "math.nan").replace("inf", "math.inf")
    folded_k = _kernel_from_source("folded", src)
    run_k = _kernel_from_source("run", src)
    a = np.array([v for _, x, y in pairs for v in (x, y)]).astype(dtype)
    o1 = np.full(len(pairs), 7, dtype)
    o2 = np.full(len(pairs), 9, dtype)
    folded_k[1, 1](o1)
    run_k[1, 1](o2, a)
    same = _same_bits(o1, o2)
    assert same.all(), [(pairs[k], o1[k], o2[k]) for k in np.nonzero(~same)[0]]


def test_a_float64_power_of_constants_is_the_targets_pow():
    """Seen on an H100: ``65504.0 ** 1.7`` folded with the host's pow was one ulp from what the
    GPU's libdevice pow computes at run time; only exponents the lowering computes itself (2, 1,
    0.5) fold, the others are left to the target's pow."""
    x, y = float(rng.uniform(2.0, 70000.0)), float(rng.uniform(1.1, 1.9))
    src = (f"import kaiojit as kj\n\n\n@kj.jit\ndef power(o):\n"
           f"    o[0] = kj.float64({x!r}) ** kj.float64({y!r})\n"
           f"    o[1] = kj.float64({x!r}) ** kj.float64(2.0)\n")
    ptx = kj.compile_ptx(_kernel_from_source("power", src), "void(float64[::1])")

    def spelled(v: float) -> tuple[str, str]:  # a float64 constant in PTX: 0d hex, or its bits
        bits = int(np.float64(v).view(np.uint64))
        return f"0d{bits:016X}", f" {bits};"

    assert not any(f in ptx.upper() for f in spelled(x ** y)), ptx
    assert any(f in ptx.upper() for f in spelled(x * x)), ptx


# --- variables assigned on some paths only -----------------------------------------------------

@kj.jit
def one_path(o, a):
    i = kj.grid(1)
    if a[i] > 0.5:
        y = 1.0
    o[i] = y


@kj.jit
def returns_early_else(o, a):
    i = kj.grid(1)
    if a[i] > 0.5:
        y = 1.0  # noqa: F841
    elif a[i] > 0.25:
        return
    else:
        z = 2.0
    o[i] = z


@kj.jit
def breaks_before(o, a):
    i = kj.grid(1)
    for j in range(4):
        if a[j] > 0.5:
            break
        w = a[j]
    o[i] = w


@kj.jit
def augments_unassigned(o, a):
    i = kj.grid(1)
    if a[i] > 0.5:
        acc = 0.0
    acc += a[i]
    o[i] = acc


@kj.jit(device=True)
def half_assigned(x):
    if x > 0.0:
        res = x
    return res


@kj.jit
def calls_half_assigned(o, a):
    i = kj.grid(1)
    o[i] = half_assigned(a[i])


@pytest.mark.parametrize("kernel,name,occurrence", [
    (one_path, "y", 1), (returns_early_else, "z", 1), (breaks_before, "w", 1),
    (augments_unassigned, "acc", 1), (calls_half_assigned, "res", 1),
])
def test_a_variable_assigned_on_some_paths_is_a_located_error(kernel, name, occurrence):
    """Python raises UnboundLocalError and numba names the variable: kaiojit names it, the
    line of the read and the lines that assign it (it read an undefined value)."""
    from tests.located import assert_located

    with pytest.raises(kj.TypingError) as info:
        kernel.compile("void(float64[::1], float64[::1])")
    fn = half_assigned.py_func if kernel is calls_half_assigned else kernel.py_func
    assert_located(info.value, fn, name, occurrence)
    assert f"local variable {name!r} may be read here before it is assigned" in str(info.value)
    assert "UnboundLocalError" in str(info.value)


@kj.jit
def assigned_in_loops(o, a, n):
    i = kj.grid(1)
    o[i] = 0.0
    w = 0
    while True:
        last = a[w]
        w += 1
        if w >= 3:
            break
    o[i] += last
    for j in range(n):
        v = a[j]
    o[i] += v  # a loop that ran no iteration leaves it zero


@kj.jit
def assigned_in_a_loop_with_barriers(o, a, n):
    i = kj.grid(1)
    for j in range(n):
        v = a[j] + 1.0
        kj.syncthreads()
    o[i] = v  # the cpu backend runs this kernel block-synchronously


def test_loops_count_as_running_and_a_zero_trip_loop_leaves_zero(kj_backend):
    a = rng.random(8)
    for n in (0, 1, 5):
        o = np.full(64, math.nan)
        assigned_in_loops[1, 64](o, a, n)
        want = a[2] + (a[n - 1] if n else 0.0)
        np.testing.assert_allclose(o, want, rtol=1e-12)
        o = np.full(64, math.nan)
        assigned_in_a_loop_with_barriers[1, 64](o, a, n)
        np.testing.assert_array_equal(o, a[n - 1] + 1.0 if n else 0.0)
