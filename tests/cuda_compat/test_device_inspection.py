"""numba inspects a device function's own PTX (``inspect_asm`` of a ``device=True``
dispatcher); fastmath tanh of float32 is PTX's ``tanh.approx.f32`` from sm_75 on."""

import math

import kaiojit as kj
from kaiojit import cuda, float32, float64


def scaled_tanh(x):
    return math.tanh(x) * 2


def test_device_function_inspect_asm_is_its_func():
    dev = cuda.jit((float32,), device=True, fastmath=True)(scaled_tanh)
    ptx = dev.inspect_asm((float32,))
    assert ".visible .func" in ptx and "scaled_tanh" in ptx
    assert "tanh.approx.f32 " in ptx
    both = cuda.jit([(float32,), (float64,)], device=True)(scaled_tanh).inspect_asm()
    assert set(both) == {(float32,), (float64,)}
    assert "tanh.approx.f32 " not in both[(float32,)]  # not without fastmath


def test_fast_tanh_needs_sm_75():
    def kernel(r, x):
        r[0] = math.tanh(x)

    fast = kj.compile_ptx(kernel, "void(float32[:], float32)", fastmath=True)
    assert "tanh.approx.f32 " in fast
    old = kj.compile_ptx(kernel, "void(float32[:], float32)", arch="sm_70", fastmath=True)
    assert "tanh.approx.f32 " not in old
    double = kj.compile_ptx(kernel, "void(float64[:], float64)", fastmath=True)
    assert "tanh.approx" not in double
