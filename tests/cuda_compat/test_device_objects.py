"""Python objects as device-function arguments (issue 28): numba passes a dtype, a function
(an intrinsic such as ``cuda.atomic.add`` or a device function) and literal shapes to device
functions; kaiojit binds them into the callee, one specialization per object."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.cuda import float64, int64, uint32

rng = np.random.default_rng()


@cuda.jit(device=True)
def as_is(x):
    return x


@cuda.jit(device=True)
def negated(x):
    return -x


@cuda.jit(device=True)
def histogram_into(out, keys, n, dt, op, cast):
    tid = cuda.threadIdx.x
    sm = cuda.shared.array(n, dt)  # n and dt: a literal and a dtype passed by the caller
    if tid < n:
        sm[tid] = 0
    cuda.syncthreads()
    op(sm, cast(keys[tid] % n), 1)
    cuda.syncthreads()
    if tid < n:
        out[tid] = sm[tid]


@cuda.jit
def histograms(out_u, out_f, keys):
    histogram_into(out_u, keys, 16, uint32, cuda.atomic.add, as_is)
    histogram_into(out_f, keys, 8, float64, cuda.atomic.add, as_is)  # its own shared array


def test_dtype_function_and_literal_arguments(kj_backend):
    keys = rng.integers(0, 1000, 64).astype(np.int64)
    out_u = cuda.to_device(np.full(16, 12345, np.uint32))
    out_f = cuda.to_device(np.full(8, np.nan))
    histograms[1, 64](out_u, out_f, cuda.to_device(keys))
    np.testing.assert_array_equal(out_u.copy_to_host(), np.bincount(keys % 16, minlength=16))
    np.testing.assert_array_equal(out_f.copy_to_host(), np.bincount(keys % 8, minlength=8))


@cuda.jit(device=True)
def apply(f, x):
    return f(x)


@cuda.jit(device=True)
def tile_sum(a, shape, dt):
    t = cuda.local.array(shape, dt)
    s = dt(0)
    for i in range(shape[0]):
        for j in range(shape[1]):
            t[i, j] = a[i * shape[1] + j]
            s += t[i, j]
    return s


@cuda.jit
def calls(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = apply(as_is, x[i])
        out[i, 1] = apply(negated, x[i])  # another function: another specialization
    if i == 0:
        out[0, 2] = tile_sum(x, (2, 3), int64)


def test_functions_and_shapes_specialize(kj_backend):
    x = rng.integers(-100, 100, 40).astype(np.int64)
    out = cuda.to_device(np.full((40, 3), -999999, np.int64))
    calls[1, 64](cuda.to_device(x), out)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:, 0], x)
    np.testing.assert_array_equal(got[:, 1], -x)
    assert got[0, 2] == x[:6].sum()


def test_each_specialization_has_its_own_shared_array():
    ir = histograms.inspect_llvm("void(uint32[:], float64[:], int64[:])")
    shared = [line for line in ir.splitlines() if "addrspace(3) global" in line]
    assert len(shared) == 2 and any("[16 x i32]" in s for s in shared), shared


def test_bound_arguments_ptx():
    ptx, _ = cuda.compile_ptx(histograms.py_func, "void(uint32[:], float64[:], int64[:])")
    assert "atom.shared.add.u32" in ptx or "red.shared.add.u32" in ptx


@cuda.jit(device=True)
def needs_value(x):
    return x + 1


@cuda.jit
def passes_module(out):
    out[0] = needs_value(np)


def test_object_used_as_a_value_is_located():
    with pytest.raises(Exception) as info:
        passes_module[1, 1](np.zeros(1))
    line = needs_value.py_func.__code__.co_firstlineno + 2
    assert f"test_device_objects.py:{line}:" in str(info.value)
    assert "module 'numpy' is not a value a kernel can use" in str(info.value)
