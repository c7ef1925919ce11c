"""Lifetimes of loaded code: a dropped kernel's code is released (the cpu backend's native
code, the CUDA path's modules, tested on the mock backend), and per-kernel caches of launch
configurations are bounded."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import kaiojit as kj
import kaiojit.runtime as rt
from kaiojit.runtime import launch
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend
from kaiojit.testing import _backend

RNG = np.random.default_rng()
KERNELS = 24


def make_kernel(scale: float):
    """A fresh kernel (a new dispatcher, and new code: the scale is folded in)."""
    @kj.jit
    def scaled(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = x[i] * scale
    return scaled


def _run_and_drop(backend, count: int) -> list[weakref.ref]:
    """Create, launch and drop ``count`` kernels; weak references to their loaded forms."""
    x = rt.to_device(RNG.standard_normal(16))
    out = rt.to_device(np.full(16, np.nan))
    refs = []
    for i in range(count):
        scale = float(i + 1)
        k = make_kernel(scale)
        k[1, 16](out, x)
        sig = k.signatures[0]
        refs.append(weakref.ref(backend.load_kernel(k.compile(sig, backend.target_spec()))))
        if backend.name == "cpu":
            np.testing.assert_array_equal(out.copy_to_host(), x.copy_to_host() * scale)
    del k
    gc.collect()
    return refs


def test_the_cpu_backend_releases_a_dropped_kernels_code():
    backend = _backend("cpu")
    previous = set_backend(backend)
    try:
        _check_released(backend)
    finally:
        set_backend(previous)


def _check_released(backend) -> None:
    gc.collect()  # earlier tests' dropped kernels go now, not during this one
    before = len(backend._kernels)
    refs = _run_and_drop(backend, KERNELS)
    assert [r for r in refs if r() is not None] == []
    assert len(backend._kernels) == before


def test_a_kernel_in_use_stays_loaded(kj_backend):
    backend = rt.get_backend()
    k = make_kernel(3.0)
    x = rt.to_device(RNG.standard_normal(8))
    out = rt.to_device(np.full(8, np.nan))
    k[1, 8](out, x)
    loaded = weakref.ref(backend.load_kernel(k.compile(k.signatures[0], backend.target_spec())))
    gc.collect()
    assert loaded() is not None
    assert backend.load_kernel(k.compile(k.signatures[0], backend.target_spec())) is loaded()
    k[1, 8](out, x)
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * x.copy_to_host())


def test_the_cuda_path_unloads_a_dropped_kernels_modules():
    backend = MockBackend()
    modules = []
    load_module = backend.load_module

    def recording(image, device):
        modules.append(load_module(image, device))
        return modules[-1]
    backend.load_module = recording
    previous = set_backend(backend)
    try:
        refs = _run_and_drop(backend, KERNELS)
    finally:
        set_backend(previous)
    assert [r for r in refs if r() is not None] == []
    assert launch.loaded_kernels(backend) == 0
    assert len(modules) == KERNELS and all(m.unloaded for m in modules)


@pytest.mark.parametrize("vary", ["shared", "grid"])
def test_launch_configurations_kept_per_kernel_are_bounded(kj_backend, vary):
    """A sweep over dynamic shared sizes (or grids) keeps at most CONFIG_CACHE_LIMIT checked
    configurations, the most recent ones."""
    k = make_kernel(2.0)
    x = rt.to_device(RNG.standard_normal(4))
    out = rt.to_device(np.full(4, np.nan))
    backend = rt.get_backend()
    limit = launch.CONFIG_CACHE_LIMIT
    for n in range(1, limit + 100):
        if vary == "shared":
            k[1, 4, 0, 16 * n](out, x)
        else:
            k[n, 4](out, x)
    loaded = backend.load_kernel(k.compile(k.signatures[0], backend.target_spec()))
    assert len(loaded._configs) == limit
    last = (1, 4, 16 * (limit + 99), None) if vary == "shared" else (limit + 99, 4, 0, None)
    if backend.name != "cpu":  # a module-loading backend keys configurations by device too
        last += (backend.current_device(),)
    assert loaded._configs.get(last) is not None
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * x.copy_to_host())


def test_the_config_cache_drops_the_least_recently_used():
    cache = launch.ConfigCache(limit=3)
    for key in "abc":
        cache.put(key, key.upper())
    assert cache.get("a") == "A"  # a is now the most recent
    cache.put("d", "D")
    assert [cache.get(k) for k in "abcd"] == ["A", None, "C", "D"]
    with pytest.raises(TypeError):
        cache.get(["unhashable"])
