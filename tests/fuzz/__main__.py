"""``python -m tests.fuzz --backend cpu|cuda --n 10000 --seed S --out DIR --budget SECONDS``

Differential testing of kaiojit: random kernels (``generator.py``) run on the cpu backend
against the reference (``--backend cpu``), or on the GPU against the cpu backend and the
reference (``--backend cuda``); every program's PTX is assembled by ptxas. Prints the counts
(generated, run, agreeing, disagreeing, internal errors) and the time of each phase, and writes
each failing program, shrunk, under ``--out``. Exits 1 when anything disagreed or failed.
``--replay FILE.pkl`` runs one saved program again and prints what differs.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time

from kaiojit.tools.binutils import find_tool

from .runner import campaign


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[1])
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--n", type=int, default=1000, help="programs to generate")
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: from the clock)")
    ap.add_argument("--out", default="fuzz-failures", help="where shrunk failing programs go")
    ap.add_argument("--budget", type=float, default=None,
                    help="stop handing out programs after this many seconds")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")
    ap.add_argument("--size", choices=("tiny", "small", "normal", "stream", "elementwise"),
                    default="normal")
    ap.add_argument("--shrink-seconds", type=float, default=60.0)
    ap.add_argument("--no-ptxas", action="store_true", help="skip assembling the PTX")
    ap.add_argument("--replay", default=None, help="a saved program (.pkl) to run again")
    ap.add_argument("--bad", action="store_true",
                    help="programs with one mistake each, which must be rejected at its line")
    ap.add_argument("--bad-launches", action="store_true",
                    help="launches with one mistake each (arguments, configuration, options), "
                         "which must run or be refused with a clear error")
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.backend)
    if args.bad:
        return bad_programs(args.n, args.seed or 0)
    if args.bad_launches:
        return bad_launches(args.n, args.seed or 0)
    ptxas = None if args.no_ptxas else find_tool("ptxas")
    if ptxas is None and not args.no_ptxas:
        print("ptxas not found: the PTX is not assembled", file=sys.stderr)
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000 * 100_000
    print(f"fuzz: backend {args.backend}, seeds {seed}..{seed + args.n - 1}, "
          f"{args.jobs or os.cpu_count()} workers, budget {args.budget or 'none'}", flush=True)
    last = [time.monotonic()]

    def progress(report):
        if time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            print(f"  ... {report.generated} done, {report.counts['agree']} agreeing", flush=True)

    report = campaign(args.backend, args.n, seed=seed, jobs=args.jobs, out=args.out,
                      budget=args.budget, size=args.size, ptxas=ptxas,
                      shrink_seconds=args.shrink_seconds, progress=progress)
    print(report.summary(), flush=True)
    return 0 if report.run and report.counts["agree"] == report.generated else 1


def bad_programs(n: int, seed: int) -> int:
    import warnings

    from .badinput import check_bad

    warnings.simplefilter("ignore")
    return _count_problems(check_bad, n, seed, "bad programs", "generated",
                           "rejected at their line")


def bad_launches(n: int, seed: int) -> int:
    from .badlaunch import check_launch

    return _count_problems(check_launch, n, seed, "bad launches", "made",
                           "run or refused clearly")


def _count_problems(check, n: int, seed: int, what: str, made: str, right: str) -> int:
    """Run ``check(seed)`` over ``n`` seeds; print the count of right answers and the first
    problems; 1 when there were any."""
    t0 = time.monotonic()
    problems = [p for p in (check(s) for s in range(seed, seed + n)) if p]
    print(f"{what}: {n} {made}, {n - len(problems)} {right}, {len(problems)} not, in "
          f"{time.monotonic() - t0:.1f} s")
    for p in problems[:10]:
        print("  " + p.split("\n")[0])
    return 1 if problems else 0


def replay(path: str, backend: str) -> int:
    from .harness import check
    from .program import render

    with open(path, "rb") as f:
        program = pickle.load(f)
    print(render(program))
    outcome = check(program, ("cpu",) if backend == "cpu" else ("cuda", "cpu"))
    print(outcome.status, outcome.pair)
    print(outcome.detail)
    return 0 if outcome.status == "agree" else 1


if __name__ == "__main__":
    sys.exit(main())
