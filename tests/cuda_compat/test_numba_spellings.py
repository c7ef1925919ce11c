"""Spellings numba's kernels use that kaiojit takes as numba does: a dtype named by a string,
a type class of the user's own naming itself (numba's ``types.Type(name=...)``)."""

import enum

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda, types
from tests.located import assert_located, compile_error

rng = np.random.default_rng()


@cuda.jit
def through_local_and_shared(x, out):
    i = cuda.threadIdx.x
    loc = cuda.local.array(4, dtype="float32")
    sh = cuda.shared.array(64, "int64")
    loc[0] = x[i]
    sh[i] = i * 3
    cuda.syncthreads()
    out[i] = loc[0] + sh[63 - i]


def test_string_dtypes(kj_backend):
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    through_local_and_shared[1, 64](x, out)
    np.testing.assert_allclose(out, x + 3 * (63 - np.arange(64)), rtol=1e-6)


def test_invalid_string_dtype_is_named():
    def bad(x):
        loc = cuda.local.array(4, dtype="int33")
        loc[0] = x[0]

    err = compile_error(bad, "void(int32[:])")
    assert_located(err, bad, '"int33"')
    assert "Invalid NumPy dtype specified: 'int33'" in str(err)


def test_a_type_class_of_the_users_names_itself():
    class Mine(types.Type):
        def __init__(self):
            super().__init__(name="Mine")

    assert Mine().name == "Mine" and isinstance(Mine(), kj.types.Type)
    with pytest.raises(TypeError):
        kj.float32(1, 2, 3)  # kaiojit's own types keep their constructors


class Color(enum.Enum):
    red = 1
    green = 2


class Status(enum.IntEnum):
    ok = 200
    missing = 404


@cuda.jit
def enums(out, code):
    out[0] = Color.red == Color["red"]
    out[1] = Color.red is Color.green
    out[2] = code == Status["missing"]
    out[3] = code + Status.ok


def test_enum_members_in_kernels(kj_backend):
    code = int(rng.choice([200, 404]))
    out = np.full(4, -1, np.int64)
    enums[1, 1](out, code)
    assert out.tolist() == [1, 0, int(code == 404), code + 200]


def test_enum_subscript_needs_a_member_name():
    def bad(out):
        out[0] = Status["gone"] == 1

    err = compile_error(bad, "void(int64[:])")
    assert_located(err, bad, '"gone"')
