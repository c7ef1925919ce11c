"""The launch fast path (kaiojit.runtime.native.fastlaunch) on the mock backend: it packs exactly
the bytes the general path packs, and any change of argument kind, thread or device falls
back."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import launch as launch_module
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend


@pytest.fixture
def mock():
    backend = MockBackend(device_count=2)
    previous = set_backend(backend)
    yield backend
    set_backend(previous)


@pytest.fixture
def below_coarse_threshold(monkeypatch):
    """These launches check the user's grid: below the threshold at which a kernel's coarse
    entry takes a quarter of the blocks, whatever KAIOJIT_COARSE_MIN_THREADS says."""
    monkeypatch.setattr(launch_module, "COARSE_MIN_THREADS", 1 << 22)


def make_kernel():
    @kj.jit
    def k(out, x, m, a, n, flag, big):
        i = kj.grid(1)
        if i < n and flag:
            out[i] = a * x[i] + m[i % m.shape[0], 0] + big
    return k


def args_for(rng, layout_a=False):
    n = int(rng.integers(10, 500))
    out = kj.to_device(rng.standard_normal(n).astype(np.float32))
    x = kj.to_device(rng.standard_normal(n).astype(np.float32))
    m_host = rng.standard_normal((7, 6)).astype(np.float64)
    m = kj.to_device(m_host)[:, ::2] if layout_a else kj.to_device(m_host)
    return [out, x, m, np.float32(rng.uniform(-9, 9)), np.int32(n), bool(rng.integers(0, 2)),
            int(rng.integers(-2**62, 2**62))]


def general_bytes(mock, kernel, grid, block, args):
    """What the general path packs for these arguments (LoadedKernel.launch directly)."""
    loaded = next(v for v in kernel._launch_cache.values() if v.backend is mock)
    loaded.launch(grid, block, None, 0, tuple(args))
    return mock.launches[-1].params


@pytest.mark.parametrize("layout_a", [False, True])
def test_fast_path_packs_what_the_general_path_packs(mock, below_coarse_threshold, layout_a):
    rng = np.random.default_rng()
    k = make_kernel()
    launcher = k[3, 128]
    launcher(*args_for(rng, layout_a))
    assert launcher.fast is not None and mock.fast_launches == 0
    for _ in range(5):
        args = args_for(rng, layout_a)
        launcher(*args)
        fast = mock.launches[-1]
        assert mock.fast_launches > 0
        assert fast.grid == (3, 1, 1) and fast.block == (128, 1, 1)
        assert fast.params == general_bytes(mock, k, 3, 128, args)


def test_other_kinds_fall_back_and_still_launch(mock):
    rng = np.random.default_rng()
    k = make_kernel()
    launcher = k[1, 64]
    args = args_for(rng)
    launcher(*args)
    launcher(*args)
    count = mock.fast_launches
    assert count == 1
    changed = list(args)
    changed[3] = 2.5  # a Python float where a numpy float32 was: another specialization
    launcher(*changed)
    assert mock.fast_launches == count
    assert len(k.signatures) == 2
    changed[1] = kj.to_device(rng.standard_normal(4).astype(np.float64))  # another dtype
    launcher(*changed)
    assert len(k.signatures) == 3
    with pytest.raises(TypeError, match="takes 7 arguments"):
        launcher(*changed[:3])


def test_other_thread_and_other_device_take_the_general_path(mock):
    rng = np.random.default_rng()
    k = make_kernel()
    launcher = k[1, 64]
    args = args_for(rng)
    launcher(*args)
    launcher(*args)
    before = mock.fast_launches
    errors = []

    def other_thread():
        try:
            launcher(*args)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert not errors
    assert mock.fast_launches == before  # the fast form belongs to the thread that built it
    assert len(mock.launches) == 3
    with kj.device(1):
        with pytest.raises(TypeError, match="device 0"):
            launcher(*args)  # arrays of device 0 in a launch on device 1


def test_float_overflow_goes_through_the_general_path(mock):
    rng = np.random.default_rng()

    @kj.jit("void(float32[::1], float32)")
    def k(out, a):
        out[0] = a
    out = kj.to_device(rng.standard_normal(4).astype(np.float32))
    launcher = k[1, 1]
    launcher(out, 1.5)
    launcher(out, 1e300)  # beyond float32: written as inf by the general path
    assert mock.launches[-1].params[2] == np.float32(np.inf).tobytes()


def test_another_active_backend_takes_the_general_path(mock):
    """Arrays of every backend say device 0: the fast form of one backend must not launch the
    arrays of another (a cpu array in a GPU launch is an illegal address)."""
    rng = np.random.default_rng()
    k = make_kernel()
    launcher = k[1, 64]
    launcher(*args_for(rng))
    launcher(*args_for(rng))
    assert mock.fast_launches == 1
    other = MockBackend(device_count=1)
    set_backend(other)
    args = args_for(rng)  # arrays of the other backend, same kinds
    launcher(*args)
    assert mock.fast_launches == 1 and len(mock.launches) == 2
    assert len(other.launches) == 1
    assert other.launches[-1].params == general_bytes(other, k, 1, 64, args)
