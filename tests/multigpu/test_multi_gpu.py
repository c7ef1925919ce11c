"""Several GPUs of one host: per-device caches (mock backend, always), and on two or more
real GPUs a split saxpy, a peer copy and the wrong-device error (gpu marker)."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def _cuda_devices() -> int:
    if not kj.runtime.is_cuda_available():
        return 0
    return kj.device_count()


two_gpus = pytest.mark.skipif("_cuda_devices() < 2", reason="needs two CUDA devices")


def test_mock_kernel_loads_once_per_device():
    backend = MockBackend(device_count=2)
    previous = set_backend(backend)
    try:
        rng = np.random.default_rng()
        n = int(rng.integers(100, 1000))
        arrays = {}
        for dev in (0, 1):
            with kj.device(dev):
                arrays[dev] = [kj.to_device(rng.standard_normal(n).astype(np.float32))
                               for _ in range(3)]
        for dev in (1, 0, 1):
            with kj.device(dev):
                out, x, y = arrays[dev]
                saxpy[(n + 127) // 128, 128](out, x, y, np.float32(2), np.int32(n))
        assert [launch.device for launch in backend.launches] == [1, 0, 1]
        loaded = {id(v): v for v in saxpy._launch_cache.values() if v.backend is backend}
        (kernel,) = loaded.values()
        assert sorted(kernel._devices) == [0, 1]
        # an array of device 0 in a launch on device 1 is refused, naming the parameter
        with kj.device(1), pytest.raises(TypeError, match="'x'"):
            out, _, y = arrays[1]
            saxpy[1, 128](out, arrays[0][1], y, np.float32(2), np.int32(n))
        # a copy between the two devices' arrays
        with kj.device(1):
            dst = kj.device_array(n, np.float32)
        kj.copy_peer(dst, arrays[0][1])
        np.testing.assert_array_equal(dst.copy_to_host(), arrays[0][1].copy_to_host())
    finally:
        set_backend(previous)


@pytest.mark.gpu
@two_gpus
def test_split_saxpy_across_two_gpus():
    rng = np.random.default_rng()
    n = (1 << 22) + int(rng.integers(0, 1000))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-3, 3))
    half = n // 2
    parts = [(0, slice(0, half)), (1, slice(half, n))]
    outs = []
    for dev, part in parts:
        with kj.device(dev):
            m = part.stop - part.start
            out = kj.to_device(np.full(m, np.nan, np.float32))
            saxpy[(m + 255) // 256, 256](out, kj.to_device(x[part]), kj.to_device(y[part]), a,
                                         np.int32(m))
            outs.append(out)
    result = np.concatenate([o.copy_to_host() for o in outs])
    np.testing.assert_allclose(result, a * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@two_gpus
def test_peer_copy_between_devices():
    rng = np.random.default_rng()
    host = rng.standard_normal(1 << 20).astype(np.float32)
    with kj.device(0):
        src = kj.to_device(host)
    with kj.device(1):
        dst = kj.to_device(np.full_like(host, np.nan))
    kj.enable_peer_access(1, 0)
    kj.copy_peer(dst, src)
    kj.synchronize()
    np.testing.assert_array_equal(dst.copy_to_host(), host)


@pytest.mark.gpu
@two_gpus
def test_array_of_other_device_rejected():
    n = 1024
    with kj.device(0):
        x0 = kj.to_device(np.ones(n, np.float32))
    with kj.device(1):
        out = kj.device_array(n, np.float32)
        with pytest.raises(TypeError, match="'x'.*device 0"):
            saxpy[4, 256](out, x0, out, np.float32(1), np.int32(n))


@pytest.mark.gpu
def test_device_context_manager_on_one_gpu():
    """What one GPU can show of the multi-device code: device(0) and its caches."""
    rng = np.random.default_rng()
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    with kj.device(0):
        dx = kj.to_device(x)
        out = kj.to_device(np.full(n, np.nan, np.float32))
        saxpy[n // 256, 256](out, dx, dx, np.float32(0.5), np.int32(n))
        np.testing.assert_allclose(out.copy_to_host(), 1.5 * x, rtol=1e-6)
    assert kj.device_count() >= 1
