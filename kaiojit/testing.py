"""kaiojit's pytest plugin, registered on install (``pytest11`` entry point).

* marker ``gpu``: the test needs a CUDA device; it is skipped where none is usable.
* fixture ``kj_backend``: runs the test on a kaiojit backend made active for its duration and
  yields the backend's name. Which backends: ``--kaiojit-backend=cuda|cpu|all`` (``all`` runs
  each test on both; cuda is skipped without a device). The default is cuda when a CUDA device
  is usable, else cpu.
* the cpu backend's checked mode (docs/sanitizer.md) is on for the test session:
  ``--kaiojit-sanitize=off`` turns it off; without the option, ``KAIOJIT_SANITIZE`` set in the
  environment decides, else it is on.
"""

from __future__ import annotations

import os

import pytest

BACKEND_CHOICES = ("cuda", "cpu", "all")
SANITIZE_ENV = "KAIOJIT_SANITIZE"  # kaiojit.runtime.sanitizer.ENV (not imported: it is heavy)
_instances: dict[str, object] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kaiojit")
    group.addoption(
        "--kaiojit-backend", choices=BACKEND_CHOICES, default=None,
        help="kaiojit backend(s) for tests using the kj_backend fixture: cuda, cpu or all "
             "(default: cuda when a CUDA device is usable, else cpu)")


    group.addoption(
        "--kaiojit-sanitize", choices=("on", "off"), default=None,
        help="the cpu backend's checked mode (memcheck, racecheck, initcheck, synccheck) for "
             "the session (default: KAIOJIT_SANITIZE if set, else on)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    choice = config.getoption("--kaiojit-backend", default=None)
    if choice in ("cuda", "all") and not _cuda_available():
        raise pytest.UsageError(f"--kaiojit-backend={choice}: no usable CUDA device on this "
                                f"machine ({_why_no_cuda()}); use --kaiojit-backend=cpu")
    _configure_sanitizer(config)


def _configure_sanitizer(config: pytest.Config) -> None:
    """Backends made from here on read ``KAIOJIT_SANITIZE``: set it as the option asks."""
    choice = config.getoption("--kaiojit-sanitize", default=None)
    if choice is not None:
        os.environ[SANITIZE_ENV] = "1" if choice == "on" else "0"
    else:
        os.environ.setdefault(SANITIZE_ENV, "1")


def _why_no_cuda() -> str:
    from kaiojit.runtime import driver

    try:
        n = driver.probe_device_count()
    except Exception as e:  # noqa: BLE001 - no driver library, no device: the reason is shown
        return f"{type(e).__name__}: {e}".split("\n")[0]
    return f"the driver reports {n} devices"


def _cuda_available() -> bool:
    from kaiojit.runtime import is_cuda_available

    return is_cuda_available()


def selected_backends(config: pytest.Config) -> list[str]:
    choice = config.getoption("--kaiojit-backend", default=None)
    if choice == "all":
        return ["cpu", "cuda"]
    if choice:
        return [choice]
    return ["cuda" if _cuda_available() else "cpu"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kj_backend" in metafunc.fixturenames:
        metafunc.parametrize("kj_backend", selected_backends(metafunc.config), indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, at the test's own location, what needs CUDA where no device is usable."""
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_cuda = callspec is not None and callspec.params.get("kj_backend") == "cuda"
        if (on_cuda or item.get_closest_marker("gpu") is not None) and not _cuda_available():
            item.add_marker(skip)


def _backend(name: str):
    """One instance per backend for the whole session, so compiled kernels stay loaded."""
    from kaiojit.runtime import get_backend, set_backend

    backend = _instances.get(name)
    if backend is None:
        previous = set_backend(name)
        backend = _instances[name] = get_backend()
        set_backend(previous)
    return backend


@pytest.fixture
def kj_backend(request: pytest.FixtureRequest):
    """The name of the kaiojit backend this test runs on (made active for the test)."""
    from kaiojit.runtime import set_backend

    name = getattr(request, "param", None) or selected_backends(request.config)[0]
    if name == "cuda" and not _cuda_available():
        pytest.skip("needs a CUDA device")
    previous = set_backend(_backend(name))
    try:
        yield name
    finally:
        set_backend(previous)
