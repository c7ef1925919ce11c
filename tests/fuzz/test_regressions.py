"""Regression tests from the differential fuzzer (``python -m tests.fuzz``): each is a shrunk
program that once disagreed with the reference (or crashed), with the seed that found it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()


# seed 18: float64 -> float16 on the host called __truncdfhf2, which MCJIT could not resolve
# (a jump to address 0). Now it rounds to odd in float32, then to float16: one rounding.
@kj.jit(contract=False)
def f64_to_f16(o, a, s):
    tid = kj.grid(1)
    if math.isinf(kj.float16(s)):
        o[tid] = kj.float16(-1.0)
    else:
        o[tid] = kj.float16(a[tid])


def test_float64_to_float16_rounds_once(kj_backend):
    h = rng.integers(0, 0x7C00, 256).astype(np.uint16).view(np.float16)
    up = np.nextafter(h, np.float16(np.inf))
    mid = (h.astype(np.float64) + up.astype(np.float64)) / 2  # ties, and one float64 off them
    a = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), -mid,
                        [np.nan, np.inf, -1e300, 1e-300, 65520.0, 65519.99, 0.0, -0.0]])
    a = np.concatenate([a, np.zeros(-len(a) % 64)])
    o = np.full(len(a), 7, np.float16)
    f64_to_f16[len(a) // 64, 64](o, a, 1.0)
    np.testing.assert_array_equal(o, a.astype(np.float16))
    f64_to_f16[len(a) // 64, 64](o, a, math.inf)
    assert (o == -1).all()


# seeds 21, 26, 32: float // was floor(a / b) (inf // 1 gave inf, 1 // 0.1 gave 10) and a zero
# float % kept the dividend's sign; both now follow NumPy's npy_divmod (Python's rule)
@kj.jit(contract=False)
def float_divmod(q, r, a, b):
    i = kj.grid(1)
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]


DIVMOD_VALUES = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 3.0, -4.0, 2.0, np.inf, -np.inf, np.nan, 1e308,
                 5e-324, 7.5, -7.5, 1e16, 3.3, 65504.0]


def _same_bits(x, y):
    return (x.view(f"u{x.itemsize}") == y.view(f"u{y.itemsize}")) | (np.isnan(x) & np.isnan(y))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=lambda d: d.__name__)
def test_float_floor_division_and_remainder_follow_numpy(kj_backend, dtype):
    extra = list(rng.standard_normal(20) * 50)
    values = DIVMOD_VALUES + extra
    a = np.array([x for x in values for _ in values]).astype(dtype)
    b = np.array([y for _ in values for y in values]).astype(dtype)
    pad = -len(a) % 64
    a, b = np.concatenate([a, np.ones(pad, dtype)]), np.concatenate([b, np.ones(pad, dtype)])
    q, r = np.full_like(a, 9), np.full_like(a, 9)
    float_divmod[len(a) // 64, 64](q, r, a, b)
    with np.errstate(all="ignore"):
        assert _same_bits(q, np.floor_divide(a, b)).all()
        assert _same_bits(r, np.remainder(a, b)).all()


# seeds 112, 145, 154: a constant float converted to an unsigned (or out-of-range) integer was
# folded by wrapping; conversions saturate (NaN is 0), folded or not
@kj.jit(contract=False)
def folded_casts(o):
    tid = kj.grid(1)
    o[tid, 0] = kj.uint64(kj.float64(-65504.0))
    o[tid, 1] = np.uint64(kj.float16(-1.5))
    o[tid, 2] = kj.uint32(np.float64(-1.5))
    o[tid, 3] = kj.int32(kj.float64(1e30))
    o[tid, 4] = kj.int64(kj.float32(-1e30))
    o[tid, 5] = kj.uint64(kj.float32(1e30))


def test_folded_float_to_int_casts_saturate(kj_backend):
    o = np.full((32, 6), 5, np.int64)
    folded_casts[1, 32](o)
    expected = [0, 0, 0, 2**31 - 1, -(2**63), -1]  # the last: 2**64 - 1 read as int64
    assert (o == expected).all(), o[0]


# seed 130: a device function whose returns have different types returned the first one's
# type from the earlier return statements (an internal IR error); they all take the unified type
@kj.jit(device=True)
def two_return_types(x):
    if x > 0:
        return kj.uint32(7)
    return kj.int64(-3)


@kj.jit
def call_two_return_types(o, a):
    i = kj.grid(1)
    o[i] = two_return_types(a[i])


def test_returns_of_several_types_unify(kj_backend):
    a = rng.standard_normal(64)
    o = np.zeros(64, np.int64)
    call_two_return_types[2, 32](o, a)
    np.testing.assert_array_equal(o, np.where(a > 0, 7, -3))


@kj.jit(contract=False)
def int_to_float32(o, a):
    tid = kj.grid(1)
    o[tid, 0] = kj.float32(kj.int64(1152921573326323713))  # 2**60 + 2**36 + 1, folded
    o[tid, 1] = kj.float32(a[tid])  # the same, converted at run time


def test_folded_int_to_float_rounds_once(kj_backend):
    o = np.zeros((32, 2), np.float32)
    int_to_float32[1, 32](o, np.full(32, 2**60 + 2**36 + 1, np.int64))
    assert (o == np.float32(2**60 + 2**37)).all()  # one rounding (float(int) would round twice)


# integers past float16's range convert to inf (through float32, one rounding), as NumPy
@kj.jit(contract=False)
def int_to_half(o, a, b):
    i = kj.grid(1)
    o[i, 0] = kj.float16(a[i])
    o[i, 1] = kj.float16(b[i])


def test_integer_to_float16_overflows_to_inf(kj_backend):
    a = np.array([65504, 65519, 65520, 70000, -65520, 2**31 - 1, -(2**31), 2049, 2051] * 4
                 + [7] * 28, np.int32)
    b = np.array([65504, 65520, 2**64 - 1, 2**40, 3, 0, 2**63, 4097] * 8, np.uint64)
    o = np.zeros((64, 2), np.float16)
    int_to_half[2, 32](o, a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(o[:, 0], a.astype(np.float16))
        np.testing.assert_array_equal(o[:, 1], b.astype(np.float16))


# bad-input fuzzing: two device functions of the same code in two files shared one parse (code
# objects compare equal across files), so an error in the second was located in the first file
def test_same_code_in_two_files_is_located_in_its_own(tmp_path):
    import linecache

    source = ("import kaiojit as kj\n\n\n@kj.jit(device=True)\ndef helper(q):\n"
              "    v = kj.float32(1.0, 2.0)\n    return q\n\n\n"
              "def kern(o):\n    o[0] = helper(o[0])\n")
    for name in ("<first-file>", "<second-file>"):
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        namespace: dict = {}
        exec(compile(source, name, "exec"), namespace)
        with pytest.raises(kj.CompileError) as info:
            kj.compile_ptx(namespace["kern"], "void(float32[::1])")
        assert str(info.value).startswith(f"{name}:6:9: "), str(info.value)
        linecache.cache.pop(name)


# found by reading the reference against kaiojit (NumPy 2 rule): uint64 against a signed integer
# compared in float64, so 2**53 + 1 == 2**53 and 2**63 > 2**63 - 1 was False
@kj.jit
def mixed_sign_compare(o, u, s, t):
    i = kj.grid(1)
    o[i, 0] = u[i] > s[i]
    o[i, 1] = u[i] == s[i]
    o[i, 2] = s[i] < u[i]
    o[i, 3] = t[i] >= u[i]
    o[i, 4] = s[i] < u[i] <= t[i]
    o[i, 5] = u[i] != t[i]


def test_uint64_and_signed_integers_compare_exactly(kj_backend):
    edge_u = [2**53 + 1, 2**64 - 1, 5, 2**63, 0, 2**63 - 1, 2**53, 7]
    edge_s = [2**53, -1, 5, 2**63 - 1, -(2**63), 2**63 - 1, 2**53 + 1, -7]
    u = np.array(edge_u * 4, np.uint64)
    s = np.array(edge_s * 4, np.int64)
    t = np.array(list(rng.integers(-(2**31), 2**31, 32)), np.int32)
    t[:8] = [-1, 5, 2**31 - 1, 0, -5, 7, 1, 6]
    o = np.zeros((32, 6), np.bool_)
    mixed_sign_compare[1, 32](o, u, s, t)
    want = np.stack([u > s, u == s, s < u, t >= u, (s < u) & (u <= t), u != t], axis=1)
    np.testing.assert_array_equal(o, want)


# kj.fma of float16 (also found by seed 105653) computed in float32 rounded twice (once to float32, once to float16); in
# float64 the sum is exact wherever the float16 result is finite, so it rounds once
@kj.jit
def fma16(o, a, b, c):
    i = kj.grid(1)
    o[i] = kj.fma(a[i], b[i], c[i])


def test_float16_fma_rounds_once(kj_backend):
    from tests.fuzz.semantics import fma

    a = np.array([-3.805, 3.707, -2.35] + list(rng.uniform(-4, 4, 61)), np.float16)
    b = np.array([1.25, 3.21, 1.5] + list(rng.uniform(-4, 4, 61)), np.float16)
    c = np.array([2e-07, -0.0007024, -6e-08] + list(rng.uniform(-1, 1, 61) * 2.0**-12),
                 np.float16)
    o = np.zeros(64, np.float16)
    fma16[2, 32](o, a, b, c)
    want = np.array([fma(x, y, z, "float16") for x, y, z in zip(a, b, c)], np.float16)
    np.testing.assert_array_equal(o, want)


# bad-input fuzzing: a constant zero range() step compiled to an empty loop (Python raises),
# integer constants past 64 bits wrapped silently (NumPy 2 raises), and folding 3 ** 10 ** 10
# computed the exact power (hours); a typed one wraps through a modular power
def zero_step(o):
    for i in range(0, 4, 0):
        o[0] = i


def huge_power(o):
    o[0] = 3 ** 10 ** 10


def huge_literal(o):
    o[0] = 36893488147419103232


def typed_power(o):
    o[0] = kj.int64(3) ** 10 ** 10


@pytest.mark.parametrize("pyfunc, snippet", [(zero_step, "0):"), (huge_power, "3 ** 10 ** 10"),
                                             (huge_literal, "36893488147419103232")],
                         ids=["zero step", "huge power", "huge literal"])
def test_constants_python_rejects_are_located_errors(pyfunc, snippet):
    from tests.located import assert_located, compile_error

    assert_located(compile_error(pyfunc, "void(int64[::1])"), pyfunc, snippet)


def test_typed_integer_power_folds_by_wrapping(kj_backend):
    o = np.zeros(1, np.int64)
    kj.jit(typed_power)[1, 1](o)
    assert o[0] == np.int64(pow(3, 10**10, 2**64) - 2**64 * (pow(3, 10**10, 2**64) >= 2**63))


# bad-input fuzzing: a 16 MB local array crashed the cpu backend (the stack of the thread that
# ran it); a thread has at most 512 KB of local memory in CUDA, so more is a located error
def big_local(o, s):
    v = kj.local.array(4000000, kj.float32)
    v[s] = 1.0
    o[0] = v[s]


def test_local_array_past_512_kb_is_a_located_error():
    from tests.located import assert_located, compile_error

    err = compile_error(big_local, "void(float32[::1], int64)")
    assert_located(err, big_local, "kj.local.array(4000000, kj.float32)")


# seeds 36905215184, 36905217232 (cpu backend): `0 / (a - s)` of uint32s, then `% -76`, gave
# -0.0 where the divisor was zero. LLVM rewrote the call to libm's fmod into `frem nnan`, and
# the NaN of 0 / 0 became poison; the host target now emits frem itself
@kj.jit(contract=False)
def zero_over_unsigned_mod(o, a, s):
    tid = kj.grid(1)
    o[tid, 0] = kj.uint32(0) / (a[tid] - s)
    o[tid, 0] %= (-76)
    o[tid, 1] = math.fmod(kj.float32(0) / kj.float32(a[tid] - s), kj.float32(3.0))


def test_mod_of_zero_over_zero_is_nan(kj_backend):
    s = np.uint32(rng.integers(1, 2**31))
    a = (s + rng.integers(-2, 3, 64)).astype(np.uint32)  # some equal to s: a zero divisor
    a[:2] = s
    o = np.full((64, 2), 7.0)
    zero_over_unsigned_mod[2, 32](o, a, s)
    with np.errstate(all="ignore"):
        d = (a - s).astype(np.float64)
        expected = np.remainder(0.0 / d, -76.0)
        expected32 = np.fmod(np.float32(0) / (a - s).astype(np.float32), np.float32(3))
    assert _same_bits(o[:, 0], expected).all(), o[:, 0]
    assert _same_bits(o[:, 1], expected32.astype(np.float64)).all(), o[:, 1]
    assert np.isnan(o[:2]).all()


# seed 37203000301 (H200): max(a, -s, tx) gave max(a, s, tx). ptxas 13.0 fuses the two max
# into one three-input VIMNMX3 and drops the negation; a negation feeding an integer min or max
# is now written in the PTX as not-and-add one, which ptxas keeps
@kj.jit
def max_of_negation(o, a, s):
    tid = kj.grid(1)
    tx = kj.threadIdx.x
    o[tid, 0] = max(a[0], -s, tx)
    o[tid, 1] = min(a[tid], -a[0], tx)
    o[tid, 2] = max(kj.uint32(a[tid]), kj.uint32(-s), kj.uint32(tx))


def test_negation_inside_a_three_way_max_keeps_its_sign(kj_backend):
    a = rng.integers(-40, 40, 64).astype(np.int32)
    a[0] = -abs(a[0]) - 50  # below every -s and tx
    s = np.int32(rng.integers(5, 30))
    o = np.full((64, 3), 777, np.int32)
    max_of_negation[2, 32](o, a, s)
    tx = np.arange(64) % 32
    np.testing.assert_array_equal(o[:, 0], np.maximum(np.maximum(a[0], -s), tx))
    np.testing.assert_array_equal(o[:, 1], np.minimum(np.minimum(a, -a[0]), tx))
    neg_s = np.array([-s], np.int32).view(np.uint32)[0]
    u = np.maximum(np.maximum(a.view(np.uint32), neg_s), tx.astype(np.uint32))
    np.testing.assert_array_equal(o[:, 2].view(np.uint32), u)


@kj.jit
def max_of_negation16(o, a, s):
    tid = kj.grid(1)
    o[tid] = max(a[0], -s, kj.int16(kj.threadIdx.x))  # ptxas: VIMNMX3.S16x2, the same bug


def test_negation_inside_a_three_way_int16_max_keeps_its_sign(kj_backend):
    a = rng.integers(-300, 300, 64).astype(np.int16)
    a[0] = -abs(a[0]) - 100
    s = np.int16(rng.integers(5, 30))
    o = np.full(64, 777, np.int16)
    max_of_negation16[2, 32](o, a, s)
    np.testing.assert_array_equal(o, np.maximum(np.maximum(a[0], -s), np.arange(64) % 32))


@pytest.mark.parametrize("kernel, sig, bits", [
    (max_of_negation, "void(int32[:, ::1], int32[::1], int32)", 32),
    (max_of_negation16, "void(int16[::1], int16[::1], int16)", 16)])
def test_ptx_has_no_negation_feeding_an_integer_max(kernel, sig, bits):
    ptx = kj.compile_ptx(kernel, sig)
    assert f"neg.s{bits}" not in ptx
    assert f"not.b{bits}" in ptx and f"max.s{bits}" in ptx


# seed 37203005904 (H200): `if not (0.0 > a[0] == s): v = t // s` (v unused) `else: store`
# stored when it should not. LLVM kept the unused fmod loop (it could not prove it ends); ptxas
# deleted it and inverted the branch around it wrongly. Loops now must make progress (as in
# CUDA C++), so LLVM deletes the loop first
@kj.jit(contract=False)
def dead_loop_in_branch(o, a, s, t):
    tid = kj.grid(1)
    if not (kj.float32(0.0) > a[0] == s):
        v = t // s  # noqa: F841 (unused: its loop is dead code)
    else:
        o[tid] = kj.float64(0.0)


@pytest.mark.parametrize("a0, s, stores", [(625.5, 65504.0, False), (-2.5, -2.5, True),
                                           (-2.5, 3.0, False), (7.0, 7.0, False)])
def test_branch_around_a_dead_loop_is_taken_right(kj_backend, a0, s, stores):
    a = rng.standard_normal(64).astype(np.float32)
    a[0] = a0
    poison = rng.standard_normal(32) + 10
    o = poison.copy()
    dead_loop_in_branch[1, 32](o, a, np.float32(s), np.float32(rng.standard_normal()))
    np.testing.assert_array_equal(o, np.zeros(32) if stores else poison)


def test_dead_loop_is_deleted_before_ptxas():
    ptx = kj.compile_ptx(dead_loop_in_branch, "void(float64[::1], float32[::1], float32, float32)")
    assert "fma.rz" not in ptx  # the body of libdevice's fmod loop
    body = ptx[ptx.index("{"):]
    labels = [ln.rstrip(":") for ln in body.splitlines() if ln.startswith("$L")]
    for i, label in enumerate(labels):  # no branch goes back to an earlier label: no loop
        assert f"bra \t{label};" not in body.split(label + ":", 1)[1], label


# seed 37203007481 (H200): the reference computed kj.fma(2.5, DBL_MAX, -inf) as NaN, through
# a float64 product that overflowed; the exact product is finite, so the sum is -inf (the GPU
# and the cpu backend agreed on it)
@kj.jit(contract=False)
def fma_past_the_top(o, a, c):
    i = kj.grid(1)
    o[i] = kj.fma(kj.float64(2.5), a[i], c[i])


def test_fma_of_a_finite_overflowing_product_and_an_infinity(kj_backend):
    from tests.fuzz import semantics as S

    big = np.finfo(np.float64).max
    a = np.array([big, -big, big, 1.5, np.inf, 0.0] + list(rng.standard_normal(26)))
    c = np.array([-np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf] + list(rng.standard_normal(26)))
    o = np.full(32, 3.25)
    fma_past_the_top[1, 32](o, a, c)
    assert list(o[:4]) == [-np.inf, np.inf, np.inf, -np.inf]
    assert np.isnan(o[4]) and o[5] == np.inf
    for x, z, got in zip(a, c, o):
        want = S.fma(np.float64(2.5), x, z, "float64")
        assert _same_bits(np.array([got]), np.array([want])).all(), (x, z, got, want)


# seeds 38539905569, 38539907010, 38539913111 (H200, size "stream"): abs of the most negative
# int32 is itself (it wraps, as NumPy's does), but ptxas 13.0 takes an abs.s32 result as never
# negative: `abs(x) > 0` stored for x = -2**31, a floor division and a modulo by abs(x) lost
# their negative-divisor fix-up. abs is now written as shift, xor and subtract in the PTX
@kj.jit
def abs_of_the_most_negative(o, a, s):
    tid = kj.grid(1)
    if abs(a[tid]) > kj.uint64(0):
        o[tid, 0] = kj.int32(-1)
    o[tid, 1] = (7 & a[tid]) // abs(s << 29)
    o[tid, 2] = abs(a[tid]) % max(kj.int32(kj.threadIdx.x), a[tid])


@kj.jit
def abs_of_the_most_negative64(o, a):
    tid = kj.grid(1)
    o[tid] = abs(a[tid]) < 0


def test_abs_of_the_most_negative_integer_stays_negative(kj_backend):
    a = rng.integers(-1000, 1000, 64).astype(np.int32)
    a[rng.choice(64, 8, replace=False)] = np.iinfo(np.int32).min
    a[rng.choice(64, 4, replace=False)] = 0
    s = np.int32(rng.choice([4, 12, -4]))  # s << 29 is -2**31
    o = np.full((64, 3), 777, np.int32)
    abs_of_the_most_negative[2, 32](o, a, s)
    with np.errstate(over="ignore", divide="ignore"):
        absa = np.abs(a)  # wraps for -2**31
        # int32 against uint64 compares exactly (docs/semantics.md): -2**31 is not above 0
        np.testing.assert_array_equal(o[:, 0], np.where(absa.astype(np.int64) > 0, -1, 777))
        div = np.abs(np.int32(s) << np.int32(29))
        np.testing.assert_array_equal(o[:, 1], (7 & a) // div)
        m = np.maximum(np.arange(64, dtype=np.int32) % 32, a)
        np.testing.assert_array_equal(o[:, 2], np.where(m == 0, 0, absa % np.where(m == 0, 1, m)))
    a64 = rng.integers(-1000, 1000, 64).astype(np.int64)
    a64[rng.choice(64, 8, replace=False)] = np.iinfo(np.int64).min
    o64 = np.full(64, True)
    abs_of_the_most_negative64[2, 32](o64, a64)
    np.testing.assert_array_equal(o64, a64 == np.iinfo(np.int64).min)


@pytest.mark.parametrize("kernel, sig, bits", [
    (abs_of_the_most_negative, "void(int32[:, ::1], int32[::1], int32)", 32),
    (abs_of_the_most_negative64, "void(bool[::1], int64[::1])", 64)])
def test_ptx_has_no_integer_abs(kernel, sig, bits):
    ptx = kj.compile_ptx(kernel, sig)
    assert "abs.s" not in ptx
    assert f"shr.s{bits}" in ptx and f"xor.b{bits}" in ptx


# seed 38539905713 (H200, size "stream"): min(0.0, 2, a[tid]) gave -0.0 for a[tid] = -0.0,
# where Python's min keeps its first argument among equals (0.0). LLVM 22's NVPTX instruction
# selection made `a < 0.0 ? a : 0.0` a min.f64, which takes -0.0 as the smaller zero; a float
# min with +0.0 (max with -0.0) is now written as setp and selp
@kj.jit
def min_max_with_a_signed_zero(o, a):
    tid = kj.grid(1)
    o[tid, 0] = min(kj.float64(0.0), 2, a[tid])
    o[tid, 1] = max(-0.0, a[tid])
    o[tid, 2] = min(0.0, a[tid])
    o[tid, 3] = max(0.0, a[tid])  # max.f64 with +0.0 is right: it stays one


def test_min_and_max_with_a_zero_keep_pythons_zero(kj_backend):
    for dtype in (np.float64, np.float32):
        a = rng.standard_normal(64).astype(dtype)
        a[rng.choice(64, 8, replace=False)] = -0.0
        a[rng.choice(64, 8, replace=False)] = 0.0
        o = np.full((64, 4), np.nan, dtype)
        min_max_with_a_signed_zero[2, 32](o, a)
        want = np.array([[min(0.0, 2, x), max(-0.0, x), min(0.0, x), max(0.0, x)] for x in a],
                        dtype)
        assert _same_bits(o, want).all(), (o[~_same_bits(o, want)], a)


@pytest.mark.parametrize("dtype, zero", [("float64", "0d0000000000000000"),
                                         ("float32", "0f00000000")])
def test_ptx_has_no_float_min_with_plus_zero(dtype, zero):
    ptx = kj.compile_ptx(min_max_with_a_signed_zero, f"void({dtype}[:, ::1], {dtype}[::1])")
    assert not re.search(rf"\tmin\.f(32|64) .*{zero};", ptx)
    assert f"setp.lt.f{dtype[-2:]}" in ptx
    assert f"max.f{dtype[-2:]}" in ptx  # max(0.0, a) keeps its one instruction


# seed 41200000695 (cpu backend, a segfault): LLVM 22's loop vectorizer, over the per-thread
# loop of a block-mode kernel, computed `s // s` (loop-invariant, and a division may trap)
# only when the vector's first thread was active, then gathered through that address for
# all; lane 0 of each warp skips the `if`, so the address was poison. Block-mode kernels are
# now optimized without the loop vectorizer
@kj.jit
def collective_over_an_invariant_division(o, a, s):
    tid = kj.grid(1)
    if kj.laneid >= 1:
        o[tid] = kj.any_sync(0xfffffffe, a[tid % 8] > a[s // s])


def test_a_collective_over_an_invariant_division_under_a_lane_test(kj_backend):
    a = rng.permutation(8).astype(np.uint32)
    top, to = int(np.argmax(a)), int(rng.integers(2, 8))
    a[[top, to]] = a[[to, top]]  # the largest not at 0 or 1, which s // s reads
    for s in (np.uint32(0), np.uint32(rng.integers(1, 100))):
        o = np.full(128, 7, np.int32)
        collective_over_an_invariant_division[2, 64](o, a, s)
        pivot = a[0 if s == 0 else 1]  # s // s is 0 for s = 0 (docs/semantics.md)
        lanes = np.arange(128) % 32
        want = np.full(128, 7, np.int32)
        for warp in range(4):
            ids = np.arange(warp * 32 + 1, warp * 32 + 32)
            want[ids] = int((a[ids % 8] > pivot).any())
        assert want[lanes >= 1].any()  # the vote has something to find
        np.testing.assert_array_equal(o, want)


# seed 40884802674 (H200, size "elementwise", through the coarse entry): `s << 31` of a
# 64-bit kernel parameter gave -(s << 31). ptxas 13.0 made the shift a UIMAD.WIDE.U32 by
# 0x80000000 and subtracted the low half from the high word, as for a multiply by -2**31;
# shl.b64 by 31 is now written as two 32-bit shifts of the halves
@kj.jit
def shift_left_by_31(o, a, s):
    tid = kj.grid(1)
    o[tid, 0] = s << 31
    o[tid, 1] = a[tid] << 31
    o[tid, 2] = (s << 31) + a[tid]


@pytest.mark.parametrize("coarse", [False, True], ids=["own", "coarse"])
@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_shift_left_by_31_of_a_parameter(kj_backend, monkeypatch, dtype, coarse):
    from kaiojit.runtime import launch as launch_module

    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", 0 if coarse else 1 << 62)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 256, dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        big = dtype(info.max) - dtype(rng.integers(0, 1 << 20))
        for s in (dtype(rng.integers(1, 1 << 20)), big):
            o = rng.integers(0, 1 << 40, (256, 3)).astype(dtype)
            shift_left_by_31[8, 32](o, a, s)
            want = np.stack([np.full(256, s << dtype(31)), a << dtype(31),
                             (s << dtype(31)) + a], axis=1)
            np.testing.assert_array_equal(o, want)


def test_ptx_has_no_64_bit_shift_left_by_31():
    ck = shift_left_by_31.compile("void(uint64[:, ::1], uint64[::1], uint64)")
    for ptx in (ck.ptx, ck.coarse.ptx):
        assert not re.search(r"\tshl\.b64 .*, 31;", ptx)
        assert "shf.l.wrap.b32" in ptx


# seed 40884802958 (H200, size "elementwise"): min(kj.float16(0.0), a[tid]) gave -0.0 for
# a[tid] = -0.0, as seed 38539905713 did for float64: LLVM made the select a min.f16, whose
# +0.0 the PTX holds in a register. float16 and bfloat16 min with +0.0 (max with -0.0) are now
# written as setp and selp too
@kj.jit
def half_min_max_with_a_signed_zero(o, a):
    tid = kj.grid(1)
    o[tid, 0] = min(0.0, a[tid])
    o[tid, 1] = max(-0.0, a[tid])
    o[tid, 2] = min(a[tid], 0.0)
    o[tid, 3] = max(0.0, a[tid])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_min_and_max_with_a_zero_keep_pythons_zero(kj_backend, dtype):
    np_dtype = kj.types.SCALARS[dtype].np_dtype
    a64 = rng.standard_normal(64)
    a64[rng.choice(64, 8, replace=False)] = -0.0
    a64[rng.choice(64, 8, replace=False)] = 0.0
    a = a64.astype(np_dtype)
    o = np.full((64, 4), np.nan, np_dtype)
    half_min_max_with_a_signed_zero[2, 32](o, a)
    want = np.array([[min(0.0, x), max(-0.0, x), min(x, 0.0), max(0.0, x)]
                     for x in a.astype(np.float64)], np.float64)
    got = o.astype(np.float64)
    assert _same_bits(got, want).all(), (got[~_same_bits(got, want)], a)


@pytest.mark.parametrize("dtype, ty", [("float16", "f16"), ("bfloat16", "bf16")])
def test_ptx_has_no_half_min_with_a_plus_zero(dtype, ty):
    ptx = kj.compile_ptx(half_min_max_with_a_signed_zero, f"void({dtype}[:, ::1], {dtype}[::1])")
    assert not re.search(rf"\tmin\.{ty} ", ptx)
    assert f"setp.lt.{ty}" in ptx


# seeds 36003013, 36003975, 36005504, 36006272, 36006417: a uint64 compared with a signed
# integer (compared by value, NumPy 2's rule) evaluated the signed right operand before the
# left one; with atomics (or any effect) on both sides the chain saw the wrong values.
@kj.jit
def mixed_sign_order(o, c):
    i = kj.grid(1)
    if i < o.shape[0]:
        c[i, 0] = 1 if kj.atomic.add(o, (i, 0), 3) <= kj.int64(kj.atomic.add(o, (i, 0), 1)) else 0
        c[i, 1] = 1 if kj.int64(kj.atomic.add(o, (i, 1), 3)) > kj.atomic.add(o, (i, 1), 1) else 0


def test_a_mixed_sign_comparison_evaluates_left_to_right(kj_backend):
    n = int(rng.integers(1, 40))
    start = rng.integers(0, 2**40, (n, 2)).astype(np.uint64)
    o = kj.to_device(start)
    c = kj.to_device(np.full((n, 2), -1, np.int32))
    mixed_sign_order[1, 64](o, c)
    # left first: the left atomic sees start, the right one start + 3
    np.testing.assert_array_equal(c.copy_to_host(), np.tile([1, 0], (n, 1)))
    np.testing.assert_array_equal(o.copy_to_host(), start + np.uint64(4))
