"""Fixtures of the export tests."""

from __future__ import annotations

import pytest

from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend


@pytest.fixture
def mock():
    """The mock backend of an sm_90 device, current for the test."""
    backend = MockBackend(compute_capability=(9, 0))
    previous = set_backend(backend)
    yield backend
    set_backend(previous)
