"""A fuzzing worker process: reads seeds from stdin (one JSON object a line), generates, runs
and compares each program (``harness.check``), shrinks a failure and writes it under the output
directory, and answers one JSON line a seed. Run by ``runner.py``, one per core, so a crash or
a hang costs one process (restarted) and names its seed."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from .generator import generate
from .harness import check
from .program import Program, render
from .shrinker import Shrinker, keep_slots


def failure_slots(detail: str) -> set[tuple[str, int]]:
    slots = set()
    for line in detail.splitlines():
        if line.startswith("o_") and "[" in line:
            name, rest = line.split("[", 1)
            try:
                slots.add((name[2:], int(rest.split("]")[0].split(",")[1])))
            except (IndexError, ValueError):
                pass
    return slots


def error_kind(detail: str) -> tuple[str, str]:
    """An internal error's class and message without its location (a shrunk program must
    fail with the same message, not any error of the class)."""
    parts = detail.splitlines()[0].split(": ", 2) if detail else [""]
    return parts[0], parts[-1] if len(parts) == 3 else ""


def shrink_failure(p: Program, outcome, backends, seconds: float,
                   ptxas: str | None = None) -> Program:
    """The smallest program found within ``seconds`` that fails as ``outcome`` did."""
    kind = error_kind(outcome.detail)
    if outcome.detail.startswith("ptxas rejected") and ptxas:
        def still_fails(q: Program) -> bool:
            r = check(q, backends, ptxas=ptxas, seed_inputs=p.seed)
            return r.ptx is not None and r.ptx.result() is not None

        return Shrinker(still_fails, seconds).shrink(p)

    def still_fails(q: Program) -> bool:
        r = check(q, backends, seed_inputs=p.seed)
        if r.status != outcome.status or r.pair != outcome.pair:
            return False
        return outcome.status != "internal" or error_kind(r.detail) == kind

    slots = failure_slots(outcome.detail)
    if slots:
        q = keep_slots(p, slots)
        if still_fails(q):
            p = q
    return Shrinker(still_fails, seconds).shrink(p)


def write_failure(out_dir: str, p: Program, shrunk: Program, outcome, backends) -> str:
    os.makedirs(out_dir, exist_ok=True)
    final = check(shrunk, backends, seed_inputs=p.seed)
    header = [f"# seed {p.seed}: {outcome.status} {outcome.pair}".rstrip(),
              f"# launch [{shrunk.grid}, {shrunk.block}]; inputs from "
              f"harness.make_arguments(program, np.random.default_rng({p.seed}))"]
    header += ["# " + line for line in (final.detail or outcome.detail).splitlines()[:12]]
    path = os.path.join(out_dir, f"seed_{p.seed}.py")
    with open(path, "w") as f:
        f.write("\n".join(header) + "\n\n" + render(shrunk))
    with open(os.path.join(out_dir, f"seed_{p.seed}.orig.py"), "w") as f:
        f.write(render(p))
    with open(os.path.join(out_dir, f"seed_{p.seed}.pkl"), "wb") as f:
        pickle.dump(shrunk, f)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--out", default="")
    ap.add_argument("--ptxas", default="")
    ap.add_argument("--size", default="normal")
    ap.add_argument("--shrink-seconds", type=float, default=60.0)
    args = ap.parse_args()
    backends = tuple(args.backends.split(","))
    warnings.simplefilter("ignore")
    pool = ThreadPoolExecutor(2) if args.ptxas else None
    import kaiojit  # noqa: F401  (loaded before the first seed, so its time is not the seed's)

    for line in sys.stdin:
        job = json.loads(line)
        seed = job["seed"]
        t0 = time.perf_counter()
        p = generate(seed, job.get("size", args.size))
        times = {"generate": time.perf_counter() - t0}
        outcome = check(p, backends, ptxas=args.ptxas or None, pool=pool)
        times.update(outcome.times)
        if outcome.ptx is not None:
            t1 = time.perf_counter()
            complaint = outcome.ptx.result()
            times["ptxas_wait"] = time.perf_counter() - t1
            if complaint and outcome.status == "agree":
                outcome.status, outcome.detail = "internal", f"ptxas rejected the PTX: {complaint}"
        reply = {"seed": seed, "status": outcome.status, "pair": outcome.pair,
                 "detail": outcome.detail[:4000], "times": times}
        context_lost = outcome.status == "internal" and "CUDA_ERROR" in outcome.detail
        if outcome.status in ("disagree", "internal") and args.out and not context_lost:
            t1 = time.perf_counter()
            budget = min(args.shrink_seconds, job.get("shrink_seconds", args.shrink_seconds))
            shrunk = (shrink_failure(p, outcome, backends, budget, args.ptxas or None)
                      if budget > 0 else p)
            reply["file"] = write_failure(args.out, p, shrunk, outcome, backends)
            times["shrink"] = time.perf_counter() - t1
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        if context_lost:  # a fault poisons the CUDA context: a fresh process takes over
            return


if __name__ == "__main__":
    main()
