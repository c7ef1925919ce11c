"""pytest plugin of the harness: installs the name mapping, records each test's outcome.

Loaded by ``run.py`` in the child pytest it starts (``-p plugin``); the mapping's target and
the tests' directory come in ``NUMBA_SUITE_TARGET`` / ``NUMBA_SUITE_CUDAPY``, and outcomes
go, one JSON line a test, to ``NUMBA_SUITE_OUT``.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import shim

TEST_SECONDS = int(os.environ.get("NUMBA_SUITE_TEST_TIMEOUT", "240"))


def _too_long(signum, frame):
    raise TimeoutError(f"the test ran past {TEST_SECONDS} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    old = signal.signal(signal.SIGALRM, _too_long)
    signal.alarm(TEST_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def pytest_configure(config):
    os.environ.setdefault("KAIOJIT_BACKEND", "cpu")
    shim.install(os.environ.get("NUMBA_SUITE_TARGET", "kaiojit.cuda"),
                 os.environ["NUMBA_SUITE_CUDAPY"])


def _record(entry: dict) -> None:
    with open(os.environ["NUMBA_SUITE_OUT"], "a") as f:
        f.write(json.dumps(entry) + "\n")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        message = ""
        if report.outcome == "failed":
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)[-400:]
        elif report.outcome == "skipped" and isinstance(report.longrepr, tuple):
            message = report.longrepr[2]
        _record({"id": report.nodeid, "when": report.when, "outcome": report.outcome,
                 "message": message[:600]})


def pytest_collectreport(report):
    if report.outcome == "failed":
        _record({"id": report.nodeid, "when": "collect", "outcome": "failed",
                 "message": str(report.longrepr)[-600:]})
