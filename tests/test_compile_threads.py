"""Compiles in threads at once: kernels that share a device function, typed for the first
time in several threads together, all type (recursion is found per thread, and a device
function's typed form is made once, under a lock)."""

from __future__ import annotations

import threading

import pytest

import kaiojit as kj
from kaiojit import types as T
from kaiojit.compiler import TargetSpec, type_kernel
from kaiojit.dispatcher import _specialize_device
from tests.located import assert_located

SIG = "void(float32[::1], float32[::1])"
ARGS = (T.parse_type("float32[::1]"),) * 2
HOST = TargetSpec("host")


def _kernel_body(shared, k):
    def kernel(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = shared(x[i]) + k
    return kernel


def test_first_compiles_in_threads_share_a_device_function():
    for _ in range(40):
        @kj.jit(device=True)
        def shared(v):
            w = v * 2
            for _ in range(3):
                w = w + v
            return w

        kernels = [kj.jit(_kernel_body(shared, k)) for k in range(4)]
        start = threading.Barrier(len(kernels))
        errors: list[BaseException] = []

        def compile_one(kernel, start=start, errors=errors):
            start.wait()
            try:
                type_kernel(kernel.py_func, ARGS, _specialize_device)  # a compile's typing
            except BaseException as e:  # noqa: BLE001 - collected and reported below
                errors.append(e)

        threads = [threading.Thread(target=compile_one, args=(k,)) for k in kernels]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(shared._device_cache) == 1


def test_recursion_is_still_found():
    @kj.jit(device=True)
    def forever(v):
        return forever(v - 1)

    def kernel(out, x):
        out[0] = forever(x[0])

    with pytest.raises(kj.TypingError, match=r"forever\(\) calls itself before any of its "
                                             r"returns has a type: cannot type infer runaway "
                                             r"recursion") as e:
        kj.jit(kernel).compile(SIG, HOST)
    assert_located(e.value, forever.py_func, "forever(v - 1)")
