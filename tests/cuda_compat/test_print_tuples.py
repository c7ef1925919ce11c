"""``print`` of tuples of numbers (nested, of one item, mixed with strings) and of the dim3
registers (``print(cuda.threadIdx)`` writes ``(x, y, z)``), as Python and numba write them
(issue 28: print took scalars and strings only); more than 32 items print the raw format on
both backends, with numba's warning (CUDA's printf takes 32 arguments: the cpu backend
printed them all, a GPU some)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.errors import TypingError

rng = np.random.default_rng()


@cuda.jit
def print_tuples(x, k):
    i = cuda.grid(1)
    if i < x.size:
        print("t", (i, ((k, x[i]), x[i] > 0), (k,)), (i,))


@cuda.jit
def print_dim3():
    print(cuda.threadIdx, cuda.blockIdx)


def print_array_in_tuple(a):
    print((1, a))


def test_print_nested_tuples(kj_backend, capfd):
    x = rng.uniform(0.5, 2, 3) * np.array([1, -1, 1])
    k = int(rng.integers(-50, 50))
    print_tuples[1, 8](cuda.to_device(x), k)
    cuda.synchronize()
    out = sorted(capfd.readouterr().out.splitlines())
    assert out == sorted(f"t ({i}, (({k}, {x[i]:f}), {x[i] > 0}), ({k},)) ({i},)"
                         for i in range(3))


def test_print_dim3_registers(kj_backend, capfd):
    bx, by = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    print_dim3[(1, 2), (bx, by, 1)]()
    cuda.synchronize()
    out = sorted(capfd.readouterr().out.splitlines())
    assert out == sorted(f"({x}, {y}, 0) (0, {g}, 0)"
                         for x in range(bx) for y in range(by) for g in range(2))


def test_print_of_a_tuple_holding_an_array_is_refused():
    with pytest.raises(TypingError, match=r"print\(\) takes scalars, string literals and "
                                          r"tuples of numbers") as info:
        cuda.jit("void(float32[::1])")(print_array_in_tuple)
    line = print_array_in_tuple.__code__.co_firstlineno + 1
    assert f"test_print_tuples.py:{line}:11:" in str(info.value)


def test_print_of_tuples_in_ptx():
    ptx, _ = cuda.compile_ptx(print_tuples, "void(float64[::1], int64)")
    assert "vprintf" in ptx
    strings = [bytes(int(b) for b in line.split("{")[1].split("}")[0].split(","))
               for line in ptx.splitlines() if ".global .align 1 .b8 str_" in line]
    assert b"t (%lld, ((%lld, %f), %s), (%lld,)) (%lld,)\n" in strings


@cuda.jit
def print_33(x):
    v = x[0]
    print(v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v,
          v, v, v, v, v)


@cuda.jit
def print_32(x):
    v = x[0]
    print(v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v,
          v, v, v, v)


def test_more_than_32_items_print_the_raw_format(kj_backend, capfd):
    v = int(rng.integers(100, 1000))
    with pytest.warns(UserWarning, match=r"test_print_tuples.py:\d+:5: CUDA print\(\) cannot "
                                         r"print more than 32 items"):
        print_33[1, 1](cuda.to_device(np.array([v])))
    cuda.synchronize()
    assert capfd.readouterr().out == " ".join(["%lld"] * 33) + "\n"
    print_32[1, 1](cuda.to_device(np.array([v])))
    cuda.synchronize()
    assert capfd.readouterr().out == " ".join([str(v)] * 32) + "\n"
