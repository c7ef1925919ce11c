"""CUDA graphs of kaiojit launches (``kj.CudaGraph``) on the mock backend's model of stream
capture: recording, replay, update in place or re-instantiation, and the "warm up first" errors
raised before anything a capture forbids (compile, module load, allocation, synchronization),
with the capture still valid after them; the real driver under the ``gpu`` marker."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import graph as graph_module
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend

RNG = np.random.default_rng()


def saxpy_py(out, x, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + out[i]


def scale_py(out, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] *= a


@pytest.fixture(params=["native", "ctypes"])
def mock(request):
    backend = MockBackend(launch_mode=request.param)
    previous = set_backend(backend)
    yield backend
    set_backend(previous)


def _device(n: int) -> kj.DeviceArray:
    return kj.to_device(RNG.standard_normal(n).astype(np.float32))


_nothing = contextlib.nullcontext


def _warm(kernel, *args):
    kernel[2, 64](*args)
    kernel[2, 64](*args)  # builds and takes the fast form


def test_capture_records_and_replay_launches(mock):
    saxpy = kj.jit(saxpy_py)
    n = int(RNG.integers(64, 128))
    out, x = _device(n), _device(n)
    _warm(saxpy, out, x, np.float32(2.0), np.int32(n))
    stream = kj.Stream()
    g = kj.CudaGraph()
    before, fast = len(mock.launches), mock.fast_launches
    with g.capture(stream):
        for _ in range(100):
            saxpy[2, 64, stream](out, x, np.float32(2.0), np.int32(n))
    assert len(mock.launches) == before  # recorded, nothing ran
    assert mock.fast_launches > fast  # the fast form launched into the capture
    assert g.nodes == 100
    g.replay()
    replayed = mock.launches[before:]
    assert len(replayed) == 100 and mock.graph_launches == 1
    assert {launch.stream for launch in replayed} == {stream.handle}
    assert replayed[0].params[0] == out.launch_info[0].to_bytes(8, "little")
    other = kj.Stream()
    g.replay(other)
    assert mock.launches[-1].stream == other.handle


def test_recapture_updates_in_place_or_instantiates_again(mock):
    saxpy, scale = kj.jit(saxpy_py), kj.jit(scale_py)
    n = 64
    out, x, y = _device(n), _device(n), _device(n)
    _warm(saxpy, out, x, np.float32(1.0), np.int32(n))
    _warm(scale, out, np.float32(1.0), np.int32(n))
    stream, g = kj.Stream(), kj.CudaGraph()
    with g.capture(stream):
        saxpy[2, 64, stream](out, x, np.float32(1.0), np.int32(n))
    executable = g.executable
    with g.capture(stream):  # the same topology, other arguments: updated in place
        saxpy[2, 64, stream](out, y, np.float32(3.0), np.int32(n))
    assert g.updates == 1 and g.executable is executable
    g.replay()
    assert mock.launches[-1].params[2] == y.launch_info[0].to_bytes(8, "little")
    with g.capture(stream):  # another kernel: the driver cannot update, instantiated anew
        scale[2, 64, stream](out, np.float32(2.0), np.int32(n))
    assert g.updates == 1 and g.executable is not executable
    g.replay()
    assert mock.launches[-1].kernel != saxpy.compile(saxpy.signatures[0]).name


def test_first_launch_inside_a_capture_says_warm_up_first(mock):
    saxpy = kj.jit(saxpy_py)
    n = 64
    out, x = _device(n), _device(n)
    stream, g = kj.Stream(), kj.CudaGraph()
    with g.capture(stream):
        with pytest.raises(kj.LaunchError, match=r"kernel 'saxpy_py': its first launch with "
                                                 r"argument types .* compiles and loads it, "
                                                 r"which a CUDA graph capture forbids; warm up "
                                                 "first"):
            saxpy[2, 64, stream](out, x, np.float32(1.0), np.int32(n))
        assert not mock.captures[stream.handle].invalidated  # raised before the driver
        with pytest.raises(kj.LaunchError, match=r"allocating \d+ bytes .* warm up first"):
            kj.device_array(16, np.float32)
    assert g.nodes == 0  # the capture ended well: its graph is empty
    host = RNG.standard_normal(n).astype(np.float32)
    for values in (x, host):  # warm-up, outside: a device array and a NumPy one
        with pytest.warns(kj.PerformanceWarning) if values is host else _nothing():
            saxpy[2, 64, stream](out, values, np.float32(1.0), np.int32(n))
    with g.capture(stream):
        saxpy[2, 64, stream](out, x, np.float32(1.0), np.int32(n))
        with pytest.raises(kj.LaunchError, match="allocating"), \
                pytest.warns(kj.PerformanceWarning):  # NumPy is staged: refused
            saxpy[2, 64, stream](out, host, np.float32(1.0), np.int32(n))
    assert g.nodes == 1


def test_debug_sync_and_autotune_are_refused_inside_a_capture():
    backend = MockBackend(debug_sync=True)
    previous = set_backend(backend)
    try:
        saxpy = kj.jit(saxpy_py)
        out, x = _device(64), _device(64)
        saxpy[1, 64](out, x, np.float32(1.0), np.int32(64))
        stream, g = kj.Stream(), kj.CudaGraph()
        with g.capture(stream):
            with pytest.raises(kj.LaunchError, match="KAIOJIT_DEBUG_SYNC synchronizes"):
                saxpy[1, 64, stream](out, x, np.float32(1.0), np.int32(64))
    finally:
        set_backend(previous)


def test_a_pytorch_capture_counts_too(mock, monkeypatch):
    saxpy = kj.jit(saxpy_py)
    monkeypatch.setattr(graph_module, "_torch_capturing", lambda: True)
    with pytest.raises(kj.LaunchError, match="warm up first"):
        saxpy[1, 64](_device(64), _device(64), np.float32(1.0), np.int32(64))


def test_the_public_capture_query_sees_kaiojits_captures_and_pytorchs(mock, monkeypatch):
    """``kj.CudaGraph.is_capturing`` / ``forbid_in_capture``: what a kernel library asks."""
    what = f"made-up work {RNG.integers(1 << 30)}"
    assert not kj.CudaGraph.is_capturing()
    kj.CudaGraph.forbid_in_capture(what)  # no capture open: nothing raised
    stream, g = kj.Stream(), kj.CudaGraph()
    with g.capture(stream):
        assert kj.CudaGraph.is_capturing()
        with pytest.raises(kj.LaunchError, match=f"^{what}, which a CUDA graph capture forbids"):
            kj.CudaGraph.forbid_in_capture(what)
    assert not kj.CudaGraph.is_capturing()
    monkeypatch.setattr(graph_module, "_torch_capturing", lambda: True)
    assert kj.CudaGraph.is_capturing()


def test_capture_needs_a_stream_of_its_own_and_a_capturing_backend(mock):
    with pytest.raises(kj.LaunchError, match="legacy default stream cannot be captured"):
        kj.CudaGraph().capture(0)
    with pytest.raises(kj.LaunchError, match="captured nothing yet"):
        kj.CudaGraph().replay()
    previous = set_backend("cpu")
    try:
        with pytest.raises(kj.LaunchError, match="CUDA graphs need the cuda backend"):
            kj.CudaGraph()
    finally:
        set_backend(previous)


def test_an_error_inside_the_block_ends_the_capture(mock):
    stream, g = kj.Stream(), kj.CudaGraph()
    with pytest.raises(ZeroDivisionError), g.capture(stream):
        raise ZeroDivisionError
    assert not mock.captures and g.executable is None
    assert not graph_module.capturing()


@pytest.mark.gpu
def test_cuda_graph_on_the_driver(cuda):
    saxpy = kj.jit(saxpy_py)
    n = 1 << 16
    x = RNG.standard_normal(n).astype(np.float32)
    out = kj.to_device(np.zeros(n, np.float32))
    dx = kj.to_device(x)
    stream = kj.Stream()
    grid = (n + 255) // 256
    saxpy[grid, 256, stream](out, dx, np.float32(0.0), np.int32(n))  # warm-up
    g = kj.CudaGraph()
    with g.capture(stream):
        for _ in range(100):
            saxpy[grid, 256, stream](out, dx, np.float32(0.5), np.int32(n))
    assert g.nodes == 100
    g.replay()
    stream.synchronize()
    np.testing.assert_allclose(out.copy_to_host(), 50.0 * x, rtol=1e-5)
    with g.capture(stream):  # update in place: the same topology
        for _ in range(100):
            saxpy[grid, 256, stream](out, dx, np.float32(-0.5), np.int32(n))
    assert g.updates == 1
    g.replay()
    stream.synchronize()
    np.testing.assert_allclose(out.copy_to_host(), 0.0 * x, atol=1e-4)


def test_a_stand_in_torch_module_is_not_a_capture(monkeypatch, kj_backend):
    """A module named torch without ``.cuda`` (a stand-in, a namespace package) in sys.modules:
    allocations still work (the capture check asked ``torch.cuda`` and raised AttributeError)."""
    import sys
    import types

    import numpy as np

    import kaiojit as kj

    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    host = np.random.default_rng().standard_normal(17).astype(np.float32)
    np.testing.assert_array_equal(kj.to_device(host).copy_to_host(), host)
