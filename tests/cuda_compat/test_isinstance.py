"""``isinstance(x, cls)`` in a kernel is a constant of the kernel's types, as numba folds it:
kaiojit types (``cuda.bf16.nv_bfloat16``), ``int``, ``float``, ``complex``, ``bool``,
``tuple``, ``np.ndarray``, NumPy scalar types, and tuples of them (issue 28: isinstance could
not be called from a kernel)."""

import numpy as np
import pytest

from kaiojit import cuda, float32
from kaiojit.cuda.bf16 import nv_bfloat16
from kaiojit.errors import TypingError

rng = np.random.default_rng()


@cuda.jit
def classify(out, v, a):
    x = nv_bfloat16(v)
    out[0] = 1 if isinstance(x, nv_bfloat16) else 0
    out[1] = 1 if isinstance(v, int) else 0
    out[2] = 1 if isinstance(v, (float, complex)) else 0
    out[3] = 1 if isinstance(a, np.ndarray) else 0
    out[4] = 1 if isinstance(v, np.int64) else 0
    out[5] = 1 if isinstance((v, v), tuple) else 0
    out[6] = 1 if isinstance(v, float32) else 0


def by_a_value(out, v):
    out[0] = 1 if isinstance(v, v) else 0


# named ids, not the random values: pytest-xdist's workers must collect the same test names
@pytest.mark.parametrize("value, want", [
    (int(rng.integers(1, 100)), [1, 1, 0, 1, 1, 1, 0]),
    (float(rng.uniform(1, 2)), [1, 0, 1, 1, 0, 1, 0]),
    (np.float32(rng.uniform(1, 2)), [1, 0, 1, 1, 0, 1, 1]),
], ids=["int", "float", "float32"])
def test_isinstance_folds_by_type(kj_backend, value, want):
    out = cuda.to_device(np.full(7, -1, np.int32))
    classify[1, 1](out, value, cuda.to_device(np.zeros(3)))
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_isinstance_needs_a_type():
    with pytest.raises(TypingError, match="isinstance.* must be a type") as info:
        cuda.jit("void(int32[::1], int64)")(by_a_value)
    line = by_a_value.__code__.co_firstlineno + 1
    assert f"test_isinstance.py:{line}:33:" in str(info.value)
