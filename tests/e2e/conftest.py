"""Without an installed kaiojit (``PYTHONPATH=.``) the pytest plugin is not registered: take its
``kj_backend`` fixture and parametrization from ``kaiojit.testing`` here."""

import importlib.metadata

if not any(ep.value == "kaiojit.testing"
           for ep in importlib.metadata.entry_points(group="pytest11")):
    from kaiojit.testing import kj_backend, pytest_generate_tests  # noqa: F401
