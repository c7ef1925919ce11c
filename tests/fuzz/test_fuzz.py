"""The differential fuzzer in CI: a fixed set of random programs on the cpu backend against the
reference, every program's PTX assembled by ptxas (skipped only where ptxas is missing and
``CI`` is not ``true``), and random programs with one mistake each, which must be rejected with
a kaiojit error at that mistake's line."""

from __future__ import annotations

import os

import pytest

from kaiojit.tools import find_tool
from tests.fuzz.badinput import KINDS, check_bad
from tests.fuzz.runner import campaign
from tests.ptxas import NOT_FOUND, in_ci

PROGRAMS = int(os.environ.get("KAIOJIT_FUZZ_PROGRAMS", "300"))
FIRST_SEED = 20_000  # fixed: CI runs the same programs every time (`python -m tests.fuzz` varies)


def test_random_programs_agree_with_the_reference(tmp_path):
    ptxas = find_tool("ptxas")
    if ptxas is None and in_ci():
        pytest.fail(f"CI=true and {NOT_FOUND}")
    jobs = min(2, os.cpu_count() or 1)
    report = campaign("cpu", PROGRAMS, seed=FIRST_SEED, jobs=jobs, out=str(tmp_path),
                      size="tiny", ptxas=ptxas, shrink_seconds=20)
    print(report.summary())
    assert report.generated == PROGRAMS, report.summary()
    assert report.counts["agree"] == PROGRAMS, report.summary()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bad_programs_are_rejected_at_their_line(kind):
    for seed in range(3):
        problem = check_bad(sorted(KINDS).index(kind) * 10 + seed, kind)
        assert problem is None, problem
