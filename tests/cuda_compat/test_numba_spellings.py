"""Spellings numba's kernels use that kaiojit takes as numba does: a dtype named by a string,
a type class of the user's own naming itself (numba's ``types.Type(name=...)``)."""

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
