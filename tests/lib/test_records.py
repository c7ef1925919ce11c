"""Records (NumPy structured dtypes) in kernels: fields read and written by attribute and by
name, element references, NumPy's layouts aligned and packed, on both backends."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as kt
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()
FIELDS = [("x", "f4"), ("n", "i2"), ("y", "f8"), ("b", "?"), ("z", "c8"), ("u", "u1")]


@kj.jit
def update(a, out):
    i = kj.grid(1)
    if i < a.size:
        r = a[i]
        out[i] = r.x * 2 + a[i]["y"] + r.n + (1.0 if r.b else 0.0) + r.z.imag + r["u"]
        a[i].x = r.y
        a[i]["n"] += 3
        r.b = not r.b
        r["z"] = r.z * 1j
        r.u -= 1


def records(n: int, aligned: bool) -> np.ndarray:
    a = np.empty(n, np.dtype(FIELDS, align=aligned))
    a["x"], a["y"] = rng.standard_normal(n), rng.standard_normal(n)
    a["n"], a["b"] = rng.integers(-100, 100, n), rng.random(n) > 0.5
    a["z"] = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    a["u"] = rng.integers(1, 255, n)
    return a


@pytest.mark.parametrize("aligned", [True, False])
def test_fields_read_and_write_in_numpy_layout(backend, aligned):
    n = int(rng.integers(40, 200))
    a = records(n, aligned)
    assert kt.from_dtype(a.dtype).align == (8 if aligned else 1)
    d = kj.to_device(a)
    out = kj.to_device(np.full(n, np.nan))
    update[(n + 63) // 64, 64](d, out)
    got = d.copy_to_host()
    want = (a["x"].astype(np.float64) * 2 + a["y"] + a["n"] + a["b"] + a["z"].imag.astype(
        np.float64) + a["u"])
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-6)
    np.testing.assert_array_equal(got["x"], a["y"].astype(np.float32))
    np.testing.assert_array_equal(got["n"], a["n"] + 3)
    np.testing.assert_array_equal(got["b"], ~a["b"])
    np.testing.assert_allclose(got["z"], a["z"] * 1j, rtol=1e-6)
    np.testing.assert_array_equal(got["u"], a["u"] - 1)
    np.testing.assert_array_equal(got["y"], a["y"])  # untouched bytes stay
    for ptx in compile_for_gpu(update):
        assert not bytes_of_float_results_stored(ptx), ptx


def bytes_of_float_results_stored(ptx: str) -> list[str]:
    """Byte stores of a register a float instruction wrote: ptxas reads those as conversions
    to u8 (F2I), not as the value's low byte, so a packed float field must pass through a mov."""
    float_regs = set(re.findall(r"^\s*(?:fma|add|sub|mul|neg|cvt)\.\S*f(?:16|32|64)\S*\s+(%\w+),",
                                ptx, re.M))
    return [r for r in re.findall(r"st\.\S*\.b8\s+\[[^]]*\],\s*(%\w+);", ptx)
            if r in float_regs]


def test_record_types_follow_numpy_offsets():
    for aligned in (True, False):
        dt = np.dtype(FIELDS, align=aligned)
        rt = kt.from_dtype(dt)
        assert [(n, str(t), o) for n, t, o in rt.fields] == [
            (n, str(dt.fields[n][0]), dt.fields[n][1]) for n, _ in FIELDS]
        assert rt.itemsize == dt.itemsize and rt.np_dtype == dt
    with pytest.raises(TypeError, match=r"field 'p' is a record \(records of numbers and "
                                        r"arrays of numbers only\)"):
        kt.from_dtype(np.dtype([("p", [("a", "f4")])]))
    with pytest.raises(TypeError, match=r"field 's' is \|S4"):
        kt.from_dtype(np.dtype([("s", "S4")]))


def missing_field(a):
    a[0].w = 1.0


def name_not_literal(a, k):
    a[0][k] = 1.0


def store_record(a):
    a[0] = 1.0


@pytest.mark.parametrize("fn, snippet, message", [
    (missing_field, "a[0].w = 1.0", r"the record has no field 'w' \(its fields: 'x', 'n'"),
    (name_not_literal, "k]", r"a record is indexed by a field name, a string literal"),
    (store_record, "a[0] = 1.0", r"cannot convert float64 to Record\(x: float32@0"),
])
def test_record_errors_name_the_line(fn, snippet, message):
    at = kt.ArrayType(kt.from_dtype(np.dtype(FIELDS, align=True)), 1, "C")
    sig = kt.Signature((at, kt.int64) if fn is name_not_literal else (at,))
    with pytest.raises(kj.TypingError, match=message) as info:
        kj.jit(fn).compile(sig)
    assert_located(info.value, fn, snippet)


@kj.jit(device=True)
def bump(r, by):
    r.x += by
    return r.n


@kj.jit
def bump_all(a, out):
    i = kj.grid(1)
    if i < a.size:
        out[i] = bump(a[i], 0.5)


def test_a_device_function_writes_through_a_record(backend):
    n = int(rng.integers(20, 100))
    a = records(n, True)
    d = kj.to_device(a)
    out = kj.to_device(np.full(n, -1, np.int16))
    bump_all[1, 128](d, out)
    np.testing.assert_array_equal(d.copy_to_host()["x"], a["x"] + np.float32(0.5))
    np.testing.assert_array_equal(out.copy_to_host(), a["n"])
    ptx = compile_for_gpu(bump_all)[0]
    assert "ld.global.nc" not in ptx  # a is written (through the device function): no .nc
