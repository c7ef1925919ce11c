"""What device arrays report through ``__cuda_array_interface__`` (issue 28): the stream an
array was made on, so consumers synchronize on it, and a null data pointer for no elements;
and numba's host API over them (``is_cuda_array``, ``from_cuda_array_interface``)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend

rng = np.random.default_rng()


@pytest.fixture
def mock():
    """The mock backend, whose arrays stand for CUDA memory (the cpu backend's are host
    memory and export ``__array_interface__`` instead)."""
    previous = set_backend(MockBackend())
    yield
    set_backend(previous)


def test_array_made_on_a_stream_reports_it(mock):
    s = cuda.stream()
    host = rng.standard_normal(int(rng.integers(3, 50)))
    for arr in (cuda.to_device(host, stream=s), cuda.device_array(5, stream=s),
                cuda.device_array_like(host, stream=s)):
        cai = arr.__cuda_array_interface__
        assert cai["stream"] == s.handle != 0
        assert arr.stream is s
    assert cuda.to_device(host).__cuda_array_interface__["stream"] is None


def test_zero_size_array_has_a_null_pointer(mock):
    for shape in ((0,), (int(rng.integers(1, 9)), 0)):
        arr = cuda.device_array(shape, np.float32)
        assert arr.__cuda_array_interface__["data"] == (0, False)
    nonempty = cuda.device_array(int(rng.integers(1, 9)), np.float32)
    assert nonempty.__cuda_array_interface__["data"][0] != 0


def test_foreign_array_round_trip(mock):
    host = rng.standard_normal((4, 6)).astype(np.float32)
    dev = cuda.to_device(host)
    assert cuda.is_cuda_array(dev) and not cuda.is_cuda_array(host)
    view = cuda.from_cuda_array_interface(dev.__cuda_array_interface__, owner=dev)
    np.testing.assert_array_equal(view.copy_to_host(), host)
    np.testing.assert_array_equal(cuda.as_cuda_array(dev).copy_to_host(), host)
