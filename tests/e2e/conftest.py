"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from kaiojit.runtime import set_backend
from kaiojit.testing import _backend


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def cpu_and_cuda(request):
    """Runs the test on the cpu backend, and on cuda under the gpu marker."""
    previous = set_backend(_backend(request.param))
    try:
        yield request.param
    finally:
        set_backend(previous)
