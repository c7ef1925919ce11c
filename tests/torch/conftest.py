"""Tests of kaiojit with PyTorch (a test dependency: they skip where it is not installed).

CPU tensors run on the cpu backend, made active for each test by ``cpu``; the CUDA paths run
on the mock backend with stand-in tensors, and on a GPU under the ``gpu`` marker."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kaiojit.runtime.backend import get_backend, set_backend  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    """The examples' kernels are ``cache=True``: their entries go to a folder of the session."""
    import os

    previous = os.environ.get("KAIOJIT_CACHE_DIR")
    os.environ["KAIOJIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("kaiojit-cache"))
    yield
    if previous is None:
        del os.environ["KAIOJIT_CACHE_DIR"]
    else:
        os.environ["KAIOJIT_CACHE_DIR"] = previous


@pytest.fixture
def cpu():
    """The cpu backend made active for one test."""
    previous = set_backend("cpu")
    yield get_backend()
    set_backend(previous)

