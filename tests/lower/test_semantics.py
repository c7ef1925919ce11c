"""Python's semantics in the lowering, checked through LLVM's constant folding: a kernel that
computes on variables holding constants (not folded by the frontend) optimizes to a store of
the result, which must equal what Python computes (integers wrapped to their width)."""

from __future__ import annotations

import linecache
import math
import re
import struct

import numpy as np
import pytest

import kaiojit as kj

_counter = [0]


def folded_store(expr: str, setup: dict[str, str], out_dtype: str):
    """The constant a kernel ``out[0] = <expr>`` stores, with variables assigned from ``setup``
    (name -> typed constant source, e.g. 'kj.int32(-7)')."""
    _counter[0] += 1
    filename = f"<semantics-cell-{_counter[0]}>"
    body = "".join(f"    {name} = {value}\n" for name, value in setup.items())
    source = f"import math\nimport kaiojit as kj\n\ndef probe(out):\n{body}    out[0] = {expr}\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    llvm = kj.compile_llvm(namespace["probe"], f"void({out_dtype}[::1])")
    linecache.cache.pop(filename, None)
    m = re.search(r"store (i\d+|float|double|half) ([^,]+), ptr %out", llvm)
    assert m, llvm
    ty, text = m.groups()
    if ty.startswith("i"):
        return int(text)
    if text.startswith("0xH"):
        return struct.unpack(">e", bytes.fromhex(text[3:]))[0]
    if text.startswith("0x"):
        return struct.unpack(">d", bytes.fromhex(text[2:]))[0]
    return float(text)


def wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


INT_PAIRS = [(-7, 2), (7, -2), (-7, -2), (7, 2), (-8, 2), (0, -3), (-(2**31), -1), (-1, 7)]


@pytest.mark.parametrize("a, b", INT_PAIRS)
@pytest.mark.parametrize("op", ["//", "%"])
def test_int32_floor_division_and_modulo_follow_python(a, b, op):
    got = folded_store(f"a {op} b", {"a": f"kj.int32({a})", "b": f"kj.int32({b})"}, "int32")
    expected = a // b if op == "//" else a % b
    assert got == wrap(expected, 32, True)


@pytest.mark.parametrize("op", ["//", "%"])
def test_division_by_zero_gives_zero_as_numpy(op):
    got = folded_store(f"a {op} b", {"a": "kj.int32(7)", "b": "kj.int32(0)"}, "int32")
    with np.errstate(all="ignore"):
        expected = np.int32(7) // np.int32(0) if op == "//" else np.int32(7) % np.int32(0)
    assert got == int(expected)


@pytest.mark.parametrize("a, b", [(7, 2), (2**32 - 7, 2), (5, 3)])
def test_uint32_division(a, b):
    assert folded_store("a // b", {"a": f"kj.uint32({a})", "b": f"kj.uint32({b})"},
                        "uint32") & 0xFFFFFFFF == a // b
    assert folded_store("a % b", {"a": f"kj.uint32({a})", "b": f"kj.uint32({b})"},
                        "uint32") & 0xFFFFFFFF == a % b


# float // and % call libdevice's fmod on the GPU (a loop LLVM does not fold): they are
# checked by running them, against NumPy, in tests/fuzz/test_regressions.py


@pytest.mark.parametrize("a, b", [(1, 1), (1, 31), (1, 32), (1, 40), (-5, 3), (3, 63)])
def test_int32_left_shift_wraps_and_past_width_is_zero(a, b):
    got = folded_store("a << b", {"a": f"kj.int32({a})", "b": f"kj.int32({b})"}, "int32")
    assert got == wrap(a << b, 32, True)


@pytest.mark.parametrize("a, b", [(-5, 1), (-5, 31), (-5, 40), (5, 40), (1 << 30, 30)])
def test_int32_right_shift_is_arithmetic_and_past_width_keeps_the_sign(a, b):
    got = folded_store("a >> b", {"a": f"kj.int32({a})", "b": f"kj.int32({b})"}, "int32")
    assert got == a >> b


def test_uint32_right_shift_past_width_is_zero():
    got = folded_store("a >> b", {"a": "kj.uint32(4000000000)", "b": "kj.uint32(33)"}, "uint32")
    assert got == 0


@pytest.mark.parametrize("a, b", [(3, 4), (-2, 3), (2, 31), (7, 0), (2, -1), (-1, 5)])
def test_int32_power_wraps_and_negative_exponent_is_zero(a, b):
    got = folded_store("a ** b", {"a": f"kj.int32({a})", "b": f"kj.int32({b})"}, "int32")
    expected = 0 if b < 0 else wrap(a ** b, 32, True)
    assert got == expected


@pytest.mark.parametrize("a, exponent", [(2.0, "0.5"), (1.5, "2.0"), (3.0, "1.0"), (1.5, "2")])
def test_float_power_by_a_constant(a, exponent):
    got = folded_store(f"a ** {exponent}", {"a": f"kj.float64({a!r})"}, "float64")
    assert got == a ** float(exponent)


@pytest.mark.parametrize("x", [2.5, 3.5, -2.5, 0.4999, -0.6, 1e9 + 0.5])
def test_round_is_python_round_half_even(x):
    got = folded_store("round(x)", {"x": f"kj.float64({x!r})"}, "int64")
    assert got == round(x)


def test_min_max_of_several_arguments():
    setup = {"a": "kj.int32(3)", "b": "kj.int32(-4)", "c": "kj.int32(9)", "d": "kj.int32(0)"}
    assert folded_store("min(a, b, c, d)", setup, "int32") == min(3, -4, 9, 0)
    assert folded_store("max(a, b, c, d)", setup, "int32") == max(3, -4, 9, 0)
    mixed = {"a": "kj.int32(3)", "f": "kj.float32(2.5)"}
    assert folded_store("max(a, f, 1)", mixed, "float64") == 3.0


def test_integer_overflow_wraps():
    got = folded_store("a * b + c", {"a": "kj.int32(65536)", "b": "kj.int32(65536)",
                                     "c": "kj.int32(5)"}, "int32")
    assert got == wrap(65536 * 65536 + 5, 32, True)
    got = folded_store("a + b", {"a": "kj.uint8(250)", "b": "kj.uint8(10)"}, "uint8")
    assert got & 0xFF == (250 + 10) % 256


def test_true_division_of_integers_is_float64():
    assert folded_store("a / b", {"a": "kj.int32(7)", "b": "kj.int32(2)"}, "float64") == 3.5


def test_float16_conversions_round_to_half():
    got = folded_store("kj.float32(h)", {"h": "kj.float16(0.1)"}, "float32")
    assert got == float(np.float16(0.1))
    got = folded_store("h * h", {"h": "kj.float16(300.0)"}, "float16")
    with np.errstate(over="ignore"):
        assert got == float(np.float16(300.0) * np.float16(300.0))  # 90000 overflows half


def test_math_on_integers_promotes_to_float64():
    got = folded_store("math.sqrt(n)", {"n": "kj.int32(2)"}, "float64")
    assert got == math.sqrt(2)


def test_chained_comparison_short_circuits():
    setup = {"a": "kj.int32(5)", "b": "kj.int32(3)", "c": "kj.int32(9)"}
    assert folded_store("1 if a < b < c else 2", setup, "int32") == 2
    assert folded_store("1 if b < a < c else 2", setup, "int32") == 1
    assert folded_store("1 if b < a < c != b else 2", setup, "int32") == 1
