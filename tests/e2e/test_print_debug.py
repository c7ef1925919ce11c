"""End to end: print output, debug=True bounds checks, streams and events on the backend."""

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()


@kj.jit
def say(x, k):
    i = kj.grid(1)
    if i < 3:
        print("thread", i, "value", x[i], "k", k, "ok", x[i] > 0)


def test_print_output(kj_backend, capfd):
    x = rng.uniform(1, 2, 3) * rng.choice([-1, 1], 3)
    x[:2] = abs(x[:2]) * [1, -1]  # a bool prints as Python prints it: True and False both
    say[1, 32](kj.to_device(x), np.int32(-7))
    kj.synchronize()
    out = capfd.readouterr().out.splitlines()
    assert sorted(out) == sorted(f"thread {i} value {x[i]:f} k -7 ok {x[i] > 0}"
                                 for i in range(3))


@kj.jit(debug=True)
def read_past_end(out, x, offset):
    i = kj.grid(1)
    if i < out.size:
        out[i] = x[i + offset]


def test_debug_out_of_bounds_raises(kj_backend):
    x = kj.to_device(rng.standard_normal(100))
    out = kj.to_device(np.full(100, np.nan))
    read_past_end[1, 128](out, x, 0)   # in bounds: fine
    kj.synchronize()
    # one thread (99) reads past the end: with more, threads of two warps race for the GPU's
    # one fault record, and which index it names is not fixed
    with pytest.raises(kj.KernelError) as err:  # the cpu raises at the launch, a GPU at the wait
        read_past_end[1, 128](out, x, 1)
        kj.synchronize()
    msg = str(err.value)
    assert "'read_past_end'" in msg
    assert "array 'x'" in msg
    assert "index 100" in msg and "size 100" in msg
    assert "test_print_debug.py:" in msg and "out[i] = x[i + offset]" in msg


@kj.jit(debug=True)
def write_2d(out, i, j):
    out[i, j] = 1.0


def test_debug_out_of_bounds_2d_and_negative(kj_backend):
    out = kj.to_device(np.zeros((4, 5)))
    write_2d[1, 1](out, -1, -5)        # Python's negative indices: fine
    assert out.copy_to_host()[3, 0] == 1.0
    with pytest.raises(kj.KernelError, match=r"dimension 1 of array 'out' \(size 5\)"):
        write_2d[1, 1](out, 0, 5)
        kj.synchronize()
    with pytest.raises(kj.KernelError, match=r"index -2 .*dimension 0"):
        write_2d[1, 1](out, -6, 0)
        kj.synchronize()


@kj.jit
def add_one(x):
    i = kj.grid(1)
    if i < x.size:
        x[i] += 1


def test_streams_and_events(kj_backend):
    x = rng.standard_normal(1000)
    d = kj.to_device(x)
    s = kj.Stream()
    start, end = kj.Event(), kj.Event()
    start.record(s)
    for _ in range(3):
        add_one[8, 128, s](d)
    end.record(s)
    end.synchronize()
    s.synchronize()
    assert start.elapsed_time(end) >= 0
    host = d.copy_to_host(stream=s)
    s.synchronize()
    np.testing.assert_allclose(host, x + 3)
    assert kj.backend() == kj_backend
