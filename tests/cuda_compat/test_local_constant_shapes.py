"""A local variable assigned a constant once (``n = 100``) is a constant shape for
``cuda.shared.array`` and ``cuda.local.array``, as numba folds it (issue 28: only a literal or
a module-level constant was); a variable assigned twice is still refused, at its use."""

import numpy as np
import pytest

from kaiojit import cuda, int32
from kaiojit.errors import TypingError

rng = np.random.default_rng()


def shared_of_local_size(out, src):
    n = 64
    sm = cuda.shared.array(n, int32)
    i = cuda.grid(1)
    sm[i] = src[i] * 2
    cuda.syncthreads()
    out[i] = sm[n - 1 - i]


def local_of_local_shape(out, src):
    shape = (2, 3)
    la = cuda.local.array(shape, int32)
    i = cuda.grid(1)
    for r in range(2):
        for c in range(3):
            la[r, c] = src[i] + r * 3 + c
    out[i] = la[1, 2] - la[0, 0]


def size_assigned_twice(out):
    n = 8
    if out[0] > 0:
        n = 16
    sm = cuda.shared.array(n, int32)
    sm[0] = 1
    out[0] = sm[0]


def test_shared_array_sized_by_a_local_constant(kj_backend):
    src = rng.integers(-1000, 1000, 64).astype(np.int32)
    out = cuda.to_device(np.full(64, -99, np.int32))
    cuda.jit(shared_of_local_size)[1, 64](out, cuda.to_device(src))
    np.testing.assert_array_equal(out.copy_to_host(), (src * 2)[::-1])


def test_local_array_shaped_by_a_local_tuple(kj_backend):
    src = rng.integers(-1000, 1000, 32).astype(np.int32)
    out = cuda.to_device(np.full(32, -99, np.int32))
    cuda.jit(local_of_local_shape)[1, 32](out, cuda.to_device(src))
    np.testing.assert_array_equal(out.copy_to_host(), np.full(32, 5, np.int32))


def test_a_size_assigned_twice_is_not_constant():
    with pytest.raises(TypingError, match="the shape must be a constant integer") as info:
        cuda.jit("void(int32[::1])")(size_assigned_twice)
    line = size_assigned_twice.__code__.co_firstlineno + 4
    assert f"test_local_constant_shapes.py:{line}:28" in str(info.value)
