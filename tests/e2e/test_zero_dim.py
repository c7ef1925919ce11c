"""0-d array arguments, as numba takes them: ``a[()]`` is the one element (read, written,
updated in place), ``a.size`` is 1, ``a[0]`` is too many indices. They crashed the compiler
(an IndexError spelling the type)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kaiojit as kj
import kaiojit.runtime as rt
from kaiojit import types as T
from tests.located import assert_located

RNG = np.random.default_rng()
SCALAR_0D = T.ArrayType(T.float64, 0, "C")


@kj.jit
def scale_into(out, x, v):
    out[()] = x[()] * 2.0 + x.size + v[1]
    x[()] += 1.0


def test_a_zero_d_array_is_read_written_and_updated(kj_backend):
    value = float(RNG.standard_normal())
    v = RNG.standard_normal(3)
    x = rt.to_device(np.array(value))
    out = rt.to_device(np.array(np.nan))
    scale_into[1, 1](out, x, rt.to_device(v))
    assert out.copy_to_host()[()] == value * 2.0 + 1 + v[1]
    assert x.copy_to_host()[()] == value + 1.0
    assert str(scale_into.signatures[0].args[0]) == "array(float64, 0d, C, align=16)"


def test_zero_d_numpy_arguments_are_staged_and_copied_back(kj_backend):
    value = float(RNG.standard_normal())
    out = np.array(np.nan, np.float32)
    x = np.array(value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kj.PerformanceWarning)
        scale_into[1, 1](out, x, rt.to_device(np.zeros(3)))
    assert out[()] == np.float32(value * 2.0 + 1)
    assert x[()] == value + 1.0


def test_zero_d_arrays_compile_to_ptx():
    ptx = kj.compile_ptx(scale_into, (SCALAR_0D, SCALAR_0D, T.float64[::1]))
    assert ".entry scale_into" in ptx and ptx.count("st.global.b64") == 2


def test_indexing_a_zero_d_array_with_an_int_is_a_located_error(kj_backend):
    def first(out, x):
        out[()] = x[0]

    kernel = kj.jit(first)
    x = rt.to_device(np.array(1.0))
    with pytest.raises(kj.TypingError) as info:
        kernel[1, 1](rt.to_device(np.array(np.nan)), x)
    assert_located(info.value, first, "x[0]")
    assert "too many indices for a 0-d array: 1" in str(info.value)
