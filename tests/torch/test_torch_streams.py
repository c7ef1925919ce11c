"""Which stream a launch runs on: PyTorch's current stream for CUDA tensors when the launch
names none (``kaiojit.runtime.torchstream``), on the general path and on the fast form, on the
mock backend with stand-in tensors; and on a GPU with real ones (side streams, ordering,
``torch.cuda.graph``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kaiojit as kj
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend
from kaiojit.runtime.torchstream import StreamChoice
from tests.runtime.fake_arrays import Tensor

RNG = np.random.default_rng()


def saxpy_py(out, x, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + out[i]


@pytest.fixture
def mock(monkeypatch):
    """A mock backend whose stand-in PyTorch reports ``current[0]`` as its current stream."""
    backend = MockBackend()
    previous = set_backend(backend)
    current = [0x5000]
    monkeypatch.setattr(StreamChoice, "current", lambda device: current[0] + device)
    yield backend, current
    set_backend(previous)


def _tensor(n: int) -> Tensor:
    return Tensor(kj.to_device(RNG.standard_normal(n).astype(np.float32)))


def test_cuda_tensors_launch_on_torch_current_stream(mock):
    backend, current = mock
    saxpy = kj.jit(saxpy_py)
    n = int(RNG.integers(64, 512))
    out, x = _tensor(n), _tensor(n)
    saxpy[1, 64](out, x, np.float32(2.0), np.int32(n))  # general path
    assert backend.launches[-1].stream == 0x5000
    fast_before = backend.fast_launches
    saxpy[1, 64](out, x, np.float32(2.0), np.int32(n))  # the fast form, built for 0x5000
    assert backend.fast_launches == fast_before + 1
    assert backend.launches[-1].stream == 0x5000
    current[0] = 0x7000  # `with torch.cuda.stream(s):` elsewhere: the fast form's test misses
    saxpy[1, 64](out, x, np.float32(2.0), np.int32(n))
    assert backend.fast_launches == fast_before + 1
    assert backend.launches[-1].stream == 0x7000
    named = kj.Stream()
    saxpy[1, 64, named](out, x, np.float32(2.0), np.int32(n))  # a named stream wins
    assert backend.launches[-1].stream == named.handle
    saxpy.launch(out, x, np.float32(2.0), np.int32(n), grid=1, block=64, stream=named)
    assert backend.launches[-1].stream == named.handle


def test_launches_without_torch_tensors_stay_on_the_default_stream(mock):
    backend, _ = mock
    saxpy = kj.jit(saxpy_py)
    n = 100
    out = kj.to_device(RNG.standard_normal(n).astype(np.float32))
    x = kj.to_device(RNG.standard_normal(n).astype(np.float32))
    for _ in range(2):
        saxpy[1, 128](out, x, np.float32(1.5), np.int32(n))
        assert backend.launches[-1].stream == 0


# --- on a GPU, with PyTorch's CUDA tensors -------------------------------------------------


@pytest.mark.gpu
def test_side_stream_orders_the_kernel_after_torch_work(kj_backend):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA build of PyTorch")
    saxpy = kj.jit(saxpy_py)
    n = 1 << 22
    side = torch.cuda.Stream()
    x = torch.randn(n, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy: an unordered launch races
        out = torch.full((n,), 3.0, device="cuda")
        saxpy[(n + 255) // 256, 256](out, x, np.float32(2.0), np.int32(n))
        result = out.clone()
    side.synchronize()
    torch.testing.assert_close(result, 2.0 * x + 3.0)


@pytest.mark.gpu
def test_torch_cuda_graph_captures_kaiojit_launches(kj_backend):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA build of PyTorch")
    saxpy = kj.jit(saxpy_py)
    n = 4096
    x = torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    saxpy[n // 256, 256](out, x, np.float32(1.0), np.int32(n))  # warm-up: compile and load
    fresh = kj.jit(saxpy_py)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(10):
            saxpy[n // 256, 256](out, x, np.float32(1.0), np.int32(n))
        with pytest.raises(kj.LaunchError, match="warm up first"):
            fresh[n // 256, 256](out, x, np.float32(1.0), np.int32(n))
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 10.0 * x)
