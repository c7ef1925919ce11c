"""A fuzzing campaign: seeds handed to worker processes (``worker.py``), answers counted.

Each worker takes one seed at a time. A worker that dies (a crash in compiled code) or takes
longer than ``seed_timeout`` (a hang) is replaced, and its seed counts as an internal error;
its program is written to the output directory. With a ``budget`` no seed is handed out
after that many seconds, and the campaign reports what it ran.
"""

from __future__ import annotations

import json
import os
import pickle
import selectors
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from .generator import generate
from .program import render

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Report:
    backend: str
    requested: int
    counts: Counter = field(default_factory=Counter)
    times: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)  # (seed, status, pair, detail, file)
    wall: float = 0.0
    stopped_by_budget: bool = False

    @property
    def generated(self) -> int:
        return sum(self.counts.values())

    @property
    def run(self) -> int:
        return self.counts["agree"] + self.counts["disagree"]

    @property
    def internal(self) -> int:
        return self.counts["internal"] + self.counts["crash"] + self.counts["hang"]

    def summary(self) -> str:
        lines = [
            f"fuzz ({self.backend}): {self.generated} generated of {self.requested} asked, "
            f"{self.run} run, {self.counts['agree']} agreeing, {self.counts['disagree']} "
            f"disagreeing, {self.internal} internal errors "
            f"({self.counts['crash']} crashes, {self.counts['hang']} hangs), "
            f"{self.counts['invalid']} invalid programs, in {self.wall:.1f} s"
            + (" (stopped by --budget)" if self.stopped_by_budget else ""),
            "phase times (s, summed over workers): " + ", ".join(
                f"{k} {v:.1f}" for k, v in sorted(self.times.items())),
        ]
        for seed, status, pair, detail, path in self.failures[:20]:
            first = detail.splitlines()[0][:160] if detail else ""
            where = f" -> {path}" if path else ""
            lines.append(f"  seed {seed}: {status} {pair} {first}{where}")
        return "\n".join(lines)


class Worker:
    def __init__(self, args: list[str], env: dict):
        self.args, self.env = args, env
        self.proc = None
        self.seed = None
        self.started = 0.0
        self.buffer = b""
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker", *self.args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd=REPO, env=self.env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer = b""
        self.seed = None

    def give(self, seed: int, extra: dict) -> None:
        self.seed, self.started = seed, time.monotonic()
        self.proc.stdin.write((json.dumps({"seed": seed, **extra}) + "\n").encode())
        self.proc.stdin.flush()

    def read(self) -> list[dict] | None:
        """Finished answers; None when the process has died."""
        try:
            chunk = self.proc.stdout.read()
        except (BlockingIOError, ValueError):
            chunk = b""
        if chunk:
            self.buffer += chunk
        elif chunk == b"" and self.proc.poll() is not None:
            return None
        out = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            out.append(json.loads(line))
        return out

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def campaign(backend: str, n: int, seed: int = 0, jobs: int | None = None, out: str = "",
             budget: float | None = None, size: str = "normal", ptxas: str | None = None,
             shrink_seconds: float = 60.0, seed_timeout: float = 120.0,
             progress=None) -> Report:
    """Run programs ``seed`` .. ``seed + n - 1`` on ``backend`` ("cpu": the cpu backend against
    the reference; "cuda": the GPU against the cpu backend and the reference)."""
    backends = ("cpu",) if backend == "cpu" else ("cuda", "cpu")
    jobs = jobs or os.cpu_count() or 1
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if backend == "cpu":
        env["KAIOJIT_BACKEND"] = "cpu"
    args = ["--backends", ",".join(backends), "--size", size,
            "--shrink-seconds", str(shrink_seconds)]
    if out:
        args += ["--out", out]
    if ptxas:
        args += ["--ptxas", ptxas]
    report = Report(backend, n)
    t0 = time.monotonic()
    deadline = t0 + budget if budget else None
    workers = [Worker(args, env) for _ in range(min(jobs, max(n, 1)))]
    next_seed, end = seed, seed + n
    sel = selectors.DefaultSelector()
    for w in workers:
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)

    def record(answer: dict) -> None:
        report.counts[answer["status"]] += 1
        for k, v in answer.get("times", {}).items():
            report.times[k] += v
        if answer["status"] not in ("agree",):
            report.failures.append((answer["seed"], answer["status"], answer.get("pair", ""),
                                    answer.get("detail", ""), answer.get("file", "")))
        if progress:
            progress(report)

    def lost(w: Worker, status: str) -> None:
        """A worker died or hung on its seed: count it, keep the program, start another."""
        s = w.seed
        detail = f"the worker {'died' if status == 'crash' else 'hung'} (exit {w.proc.poll()})"
        path = ""
        if out:
            os.makedirs(out, exist_ok=True)
            path = os.path.join(out, f"seed_{s}.{status}.py")
            program = generate(s, size)
            with open(path, "w") as f:
                f.write(f"# seed {s}: {status}\n\n" + render(program))
            with open(path[:-3] + ".pkl", "wb") as f:
                pickle.dump(program, f)
        record({"seed": s, "status": status, "detail": detail, "file": path})
        sel.unregister(w.proc.stdout)
        w.proc.kill()
        w.proc.wait()
        w.start()
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)

    def hand_out(w: Worker) -> None:
        nonlocal next_seed
        if next_seed >= end or (deadline and time.monotonic() > deadline):
            report.stopped_by_budget = next_seed < end
            return
        remaining = (deadline - time.monotonic()) if deadline else shrink_seconds
        w.give(next_seed, {"shrink_seconds": max(0.0, min(shrink_seconds, remaining))})
        next_seed += 1

    for w in workers:
        hand_out(w)
    try:
        while any(w.seed is not None for w in workers):
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                answers = w.read()
                if answers is None:
                    if w.seed is not None:
                        lost(w, "crash")
                        hand_out(w)
                    else:
                        sel.unregister(w.proc.stdout)
                        w.start()
                        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
                    continue
                for answer in answers:
                    record(answer)
                    w.seed = None
                    hand_out(w)
            now = time.monotonic()
            for w in workers:
                limit = seed_timeout + shrink_seconds
                if w.seed is not None and now - w.started > limit:
                    lost(w, "hang")
                    hand_out(w)
    finally:
        for w in workers:
            w.stop()
    report.wall = time.monotonic() - t0
    report.failures.sort()
    return report
