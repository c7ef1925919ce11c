"""The differential fuzzer in CI: a fixed set of random programs on the cpu backend against the
reference, every program's PTX assembled by ptxas (skipped only where ptxas is missing and
``CI`` is not ``true``), and random programs with one mistake each, which must be rejected with
a kaiojit error at that mistake's line."""

from __future__ import annotations

import os

import numpy as np
import pytest

from kaiojit.tools.binutils import find_tool
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


def test_stream_programs_are_prefetched_and_agree(tmp_path):
    """Programs of size "stream" read inputs at the thread's own index in kernels without
    loops: the arrays the NVPTX lowering prefetches into L2. Most have such a stream, their
    PTX carries the prefetches (assembled by ptxas in the campaign), and they agree."""
    from tests.fuzz.generator import generate
    from tests.fuzz.harness import load, make_arguments, signature_of

    n = PROGRAMS // 5
    prefetched = 0
    for seed in range(FIRST_SEED, FIRST_SEED + n):
        p = generate(seed, "stream")
        kernel, _ = load(p)
        ptx = kernel.compile(signature_of(p, make_arguments(p, np.random.default_rng(seed)))).ptx
        prefetched += "prefetch.global.L2" in ptx
    assert prefetched >= n * 3 // 4, f"{prefetched} of {n} programs prefetch"
    ptxas = find_tool("ptxas")
    if ptxas is None and in_ci():
        pytest.fail(f"CI=true and {NOT_FOUND}")
    report = campaign("cpu", n, seed=FIRST_SEED, jobs=min(2, os.cpu_count() or 1),
                      out=str(tmp_path), size="stream", ptxas=ptxas, shrink_seconds=20)
    assert report.generated == n, report.summary()
    assert report.counts["agree"] == n, report.summary()


def test_elementwise_programs_agree_through_their_coarse_entries(tmp_path):
    """Programs of size "elementwise" (straight-line, several blocks, no thread index but
    ``tid``) all have a coarse entry (kaiojit/kir/coarsen.py); the harness runs it on the cpu
    backend as the runtime launches a grid through it, beside the kernel's own entry, and
    ptxas assembles both PTX modules."""
    ptxas = find_tool("ptxas")
    if ptxas is None and in_ci():
        pytest.fail(f"CI=true and {NOT_FOUND}")
    n = PROGRAMS // 6
    report = campaign("cpu", n, seed=FIRST_SEED, jobs=min(2, os.cpu_count() or 1),
                      out=str(tmp_path), size="elementwise", ptxas=ptxas, shrink_seconds=20)
    assert report.generated == n, report.summary()
    assert report.counts["agree"] == n, report.summary()  # "invalid": one without the entry


def test_the_programs_ci_runs_hold_each_new_kind_by_the_hundred():
    """Issue 36's kinds are among the CI programs above (same seeds and size): comparison
    chains (of 3 or more operators too, some with side effects), conversions through the
    narrow types, constant expressions beside their run-time twins, variables assigned on
    every path of an if/elif/else."""
    from tests.fuzz.generator import generate
    from tests.fuzz.program import render

    counts = dict.fromkeys(("chain", "long chain", "effect", "convert", "fold", "paths"), 0)
    for seed in range(FIRST_SEED, FIRST_SEED + PROGRAMS):
        p = generate(seed, "tiny")
        text = render(p)
        counts["chain"] += text.count(" < ") + text.count(" <= ")
        counts["long chain"] += sum(line.count(" <") + line.count(" >") >= 3
                                    for line in text.splitlines())
        counts["effect"] += text.count("kj.atomic.add(o_")
        counts["convert"] += sum(text.count(f"kj.{t}(") for t in ("int8", "int16", "uint8",
                                                                  "uint16", "bool_", "bfloat16"))
        counts["fold"] += sum(len(v) for v in p.constants.values())
        counts["paths"] += text.count("elif ") + text.count("else:")
    assert min(counts.values()) >= 100 * PROGRAMS // 300, counts


def test_bad_launches_run_or_are_refused_clearly():
    """Wrong argument kinds, dtypes, shapes and counts, launch configurations, streams,
    shared memory sizes, options and signatures (tests/fuzz/badlaunch.py): each runs or
    raises a kaiojit error or TypeError/ValueError/OverflowError that is no internal error,
    chains nothing and shows at most the one kaiojit frame that re-raised it."""
    from tests.fuzz.badlaunch import KINDS as LAUNCH_KINDS
    from tests.fuzz.badlaunch import check_launch

    problems = [p for seed in range(PROGRAMS) if (p := check_launch(seed))]
    assert not problems, problems[:5]
    for i, kind in enumerate(LAUNCH_KINDS):  # every kind, whatever the seeds drew
        assert check_launch(10_000 + i, kind) is None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bad_programs_are_rejected_at_their_line(kind):
    for seed in range(3):
        problem = check_bad(sorted(KINDS).index(kind) * 10 + seed, kind)
        assert problem is None, problem


def test_what_the_h200_run_taught_the_comparison():
    """The first 10,000-program run on the H200 (2026-12-04) flagged two things that are no
    compiler's bug: libdevice's hypot rounds up to inf where libm gives the largest finite
    value (one unit in the last place), and copysign took the sign of a NaN, which differs
    between a GPU and x86. The first is within a math function's tolerance; the second is no
    longer generated."""
    from tests.fuzz.generator import generate
    from tests.fuzz.program import render
    from tests.fuzz.semantics import same_value

    big = np.finfo(np.float64).max
    assert same_value(np.inf, big, "float64", 16) and same_value(-big, -np.inf, "float64", 16)
    assert not same_value(np.inf, big, "float64", 0)
    assert not same_value(np.inf, np.nextafter(big, 0), "float64", 16)
    assert not same_value(np.inf, -big, "float64", 16)
    # the programs from the seeds of that run on (the generator has grown since: the same
    # seeds make other programs), until a few call copysign
    calls: list[str] = []
    for seed in range(36905200000, 36905200400):
        calls += [line for line in render(generate(seed, "small")).splitlines()
                  if "math.copysign(" in line]
        if len(calls) >= 3:
            break
    assert len(calls) >= 3 and all(" == " in line for line in calls), calls
