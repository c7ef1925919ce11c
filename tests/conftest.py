"""Shared test hooks. The ptxas check (every PTX the tests produce is assembled) lives in
tests/ptxas.py; its fixture and summary hook are imported here so they apply to every test.

Without an installed kaiojit (``PYTHONPATH=.``, as on the GPU machine) the pytest plugin
``kaiojit.testing`` is not registered by its entry point: its hooks and ``kj_backend`` fixture are
taken from it here, for every test directory."""

import importlib.metadata

from tests.ptxas import ptxas_check, pytest_terminal_summary  # noqa: F401

if not any(ep.value == "kaiojit.testing"
           for ep in importlib.metadata.entry_points(group="pytest11")):
    from kaiojit.testing import (  # noqa: F401
        kj_backend, pytest_addoption, pytest_collection_modifyitems, pytest_configure,
        pytest_generate_tests)
