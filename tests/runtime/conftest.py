"""Fixtures of the runtime tests: a fresh mock backend, and the skip of ``gpu`` tests on
machines where CUDA is not usable (independent of any plugin)."""

from __future__ import annotations

import pytest

from kaiojit.runtime.backend import get_backend, is_cuda_available, set_backend
from kaiojit.runtime.mock import MockBackend


@pytest.fixture(autouse=True)
def _skip_gpu_without_cuda(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("gpu") is not None and not is_cuda_available():
        pytest.skip("needs a CUDA device")


@pytest.fixture
def mock() -> MockBackend:
    """A fresh MockBackend made the active backend for one test."""
    backend = MockBackend()
    previous = set_backend(backend)
    yield backend
    set_backend(previous)


@pytest.fixture
def mock2() -> MockBackend:
    """A fresh MockBackend of two devices made the active backend for one test."""
    backend = MockBackend(device_count=2)
    previous = set_backend(backend)
    yield backend
    set_backend(previous)


@pytest.fixture
def cuda():
    """The cuda backend made active for one test."""
    previous = set_backend("cuda")
    yield get_backend()
    set_backend(previous)
