"""Shared test hooks. The ptxas check (every PTX the tests produce is assembled) lives in
tests/ptxas.py; its fixture and summary hook are imported here so they apply to every test."""

from tests.ptxas import ptxas_check, pytest_terminal_summary  # noqa: F401
