"""Running one generated program everywhere and comparing: the reference, the cpu backend, the
GPU (when asked), and ptxas on its PTX.

``check(program, backends)`` returns an ``Outcome``: ``agree``, ``disagree`` (with the elements
that differ, first few), ``internal`` (kaiojit raised on a valid program, or ptxas rejected its
PTX) or ``invalid`` (the reference found the program undefined: a generator bug).
"""

from __future__ import annotations

import linecache
import subprocess
import tempfile
import threading
import time
import traceback
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import semantics as S
from .program import N_COUNTERS, N_INPUT, Program, render
from .reference import Reference, ReferenceError_

_serial = [0]
_serial_lock = threading.Lock()


@dataclass
class Outcome:
    status: str  # agree | disagree | internal | invalid
    detail: str = ""
    pair: str = ""  # which executions differ: "cpu/reference", "cuda/cpu", ...
    times: dict = field(default_factory=dict)
    ptx: Future | None = None  # ptxas's verdict, when it runs in the background


# --- inputs --------------------------------------------------------------------------------------

def special_floats(t: str) -> list:
    f = np.finfo(S.NP[t])
    return [0.0, -0.0, np.inf, -np.inf, np.nan, float(f.max), -float(f.max), float(f.tiny),
            float(f.smallest_subnormal), -float(f.smallest_subnormal) * 3, 0.5, 1.5, 2.5, -0.5,
            1.0, -1.0, 3.0, 7.0, 1e-3, 65504.0, 1e10, -1e30]


def input_array(t: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if S.is_int(t):
        lo, hi = S.int_range(t)
        edge = [lo, hi, 0, 1, -1, 2, 31, 32, 63, 64, lo + 1, hi - 1]
        if S.BITS[t] == 64:  # where float64 rounds (a comparison in float64 would be wrong)
            edge += [2**53, 2**53 + 1, 2**63 - 1, 2**63, -(2**53) - 1]
        small = rng.integers(-40, 40, n)
        wide = rng.integers(lo, hi, n, dtype=np.dtype(t), endpoint=True).astype(object)
        pick = rng.integers(0, 4, n)
        out = [edge[rng.integers(len(edge))] if k == 0 else (int(s) if k < 3 else int(w))
               for k, s, w in zip(pick, small, wide)]
        return np.array([S.wrap(int(v), t) for v in out], dtype=t)
    specials = special_floats(t)
    with np.errstate(all="ignore"):
        normal = rng.standard_normal(n) * np.where(rng.random(n) < 0.5, 4.0, 1e3)
        ints = rng.integers(-20, 20, n).astype(np.float64)
        pick = rng.integers(0, 4, n)
        values = [specials[rng.integers(len(specials))] if k == 0 else (ints[i] if k == 1
                                                                          else normal[i])
                  for i, k in enumerate(pick)]
        return np.array(values, dtype=np.float64).astype(t)


def make_arguments(p: Program, rng: np.random.Generator) -> dict:
    """Every kernel argument: outputs poisoned (finite, so an unwritten element is seen),
    counters, inputs and scalars."""
    args = {}
    for t, slots in sorted(p.slots.items()):
        args[f"o_{t}"] = input_array(t, p.threads * max(slots, 1), rng).reshape(p.threads, -1)
        if S.is_float(t):
            poison = (rng.integers(-1000, 1000, args[f"o_{t}"].shape) * 0.25).astype(t)
            args[f"o_{t}"] = poison
    for t in p.counters:
        args[f"c_{t}"] = (rng.integers(0, 50, N_COUNTERS).astype(t) if S.is_float(t)
                          else input_array(t, N_COUNTERS, rng))
    for t in p.inputs:  # a[tid] reads too: at least one element a thread
        args[f"a_{t}"] = input_array(t, max(N_INPUT, p.threads), rng)
    for t in p.inputs:
        args[f"s_{t}"] = S.NP[t](input_array(t, 1, rng)[0])
    for t, values in p.constants.items():  # a constant expression's twin loads these
        with np.errstate(all="ignore"):
            args[f"z_{t}"] = np.array([S.convert(v, "int64", t) if S.is_int(t) else v
                                       for v in values], dtype=np.float64 if S.is_float(t)
                                      else t).astype(t)
    return args


# --- loading and running -------------------------------------------------------------------------

def load(p: Program):
    """The program's source executed as a module (its text registered with linecache, so
    kaiojit can read it); returns (kernel dispatcher, source)."""
    import kaiojit  # noqa: F401  (the module the source imports)

    source = render(p)
    with _serial_lock:
        _serial[0] += 1
        filename = f"<fuzz-{p.seed}-{_serial[0]}>"
    return exec_source(source, filename, f"fuzz_{p.seed}")[p.name], source


def exec_source(source: str, filename: str, module: str) -> dict:
    """``source`` executed as a module named ``module``, its text registered with linecache
    under ``filename`` (kaiojit reads kernels' source from there); returns its namespace."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": module}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  (generated kernels)
    return namespace


def signature_of(p: Program, args: dict) -> str:
    parts = []
    for name in p.params():
        v = args[name]
        if isinstance(v, np.ndarray):
            parts.append(f"{v.dtype.name}[{', '.join([':'] * (v.ndim - 1) + ['::1'])}]")
        else:
            parts.append(np.asarray(v).dtype.name)
    return f"void({', '.join(parts)})"


def run_backend(kernel, p: Program, args: dict, backend: str) -> dict:
    import kaiojit as kj
    from kaiojit.runtime import set_backend

    previous = set_backend(backend)
    try:
        device = {k: (kj.to_device(v) if isinstance(v, np.ndarray) else v)
                  for k, v in args.items()}
        kernel[p.grid, p.block](*(device[n] for n in p.params()))
        return {k: v.copy_to_host() for k, v in device.items() if k.startswith(("o_", "c_"))}
    finally:
        set_backend(previous)


def run_coarse_cpu(kernel, p: Program, args: dict) -> dict:
    """An elementwise program's coarse entry on the cpu backend (tests/coarse.py), launched
    as the runtime launches the program's grid through it."""
    import kaiojit as kj
    from kaiojit.runtime import set_backend
    from tests.coarse import host_entries, launch_coarse

    previous = set_backend("cpu")
    try:
        _, coarse = host_entries(kernel, signature_of(p, args))
        device = {k: (kj.to_device(v) if isinstance(v, np.ndarray) else v)
                  for k, v in args.items()}
        launch_coarse(coarse, p.grid, p.block, tuple(device[n] for n in p.params()))
        return {k: v.copy_to_host() for k, v in device.items() if k.startswith(("o_", "c_"))}
    finally:
        set_backend(previous)


def ptxas_check(ptx: str, ptxas: str) -> str | None:
    """None when ptxas assembles ``ptx`` for sm_90, else its complaint."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90", str(src), "-o", str(Path(tmp) / "k.cubin")],
                           capture_output=True, text=True)
    return None if r.returncode == 0 else r.stderr[-2000:]


# --- comparing -----------------------------------------------------------------------------------

def differences(p: Program, want: dict, got: dict, limit: int = 6) -> list[str]:
    out = []
    for name in sorted(want):
        t = name[2:]
        w, g = want[name], got[name]
        it = np.ndindex(w.shape)
        for idx in it:
            tol = p.tolerance.get((t, idx[1]), 0) if name.startswith("o_") else 0
            if not S.same_value(g[idx], w[idx], t, tol):
                where = f"{name}[{', '.join(map(str, idx))}]"
                out.append(f"{where}: expected {w[idx]!r}, got {g[idx]!r}")
                if len(out) >= limit:
                    return out
    return out


def check(p: Program, backends: tuple[str, ...] = ("cpu",), ptxas: str | None = None,
          pool: ThreadPoolExecutor | None = None, seed_inputs: int | None = None) -> Outcome:
    """Run ``p`` on the reference and each backend ("cpu", "cuda"), compare them pairwise
    against the reference (and the GPU against the cpu backend), and assemble its PTX."""
    times: dict[str, float] = {}
    rng = np.random.default_rng(p.seed if seed_inputs is None else seed_inputs)
    args = make_arguments(p, rng)
    t0 = time.perf_counter()
    try:
        want = Reference(p, args).run()
    except ReferenceError_ as e:
        return Outcome("invalid", f"reference: {e}", times=times)
    times["reference"] = time.perf_counter() - t0
    results = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            kernel, _ = load(p)
            for backend in backends:
                t1 = time.perf_counter()
                results[backend] = run_backend(kernel, p, args, backend)
                times[f"run_{backend}"] = time.perf_counter() - t1
            if p.elementwise:
                t1 = time.perf_counter()
                try:
                    results["coarse-cpu"] = run_coarse_cpu(kernel, p, args)
                except ValueError as e:  # the generator made a kernel without one
                    return Outcome("invalid", f"elementwise program: {e}", times=times)
                times["run_coarse"] = time.perf_counter() - t1
            outcome_ptx = None
            if ptxas:
                t1 = time.perf_counter()
                import kaiojit as kj

                if "cuda" in backends:  # what the GPU ran (no second compile)
                    ptx = next(ck.ptx for (spec, _), ck in kernel._compiled.items()
                               if spec.kind == "nvptx")
                else:
                    ptx = kj.compile_ptx(kernel, signature_of(p, args))
                ptxs = [ptx]
                if p.elementwise:  # the coarse entry's PTX, assembled with the kernel's
                    coarse = kernel.compile(signature_of(p, args)).coarse
                    ptxs += [coarse.ptx] if coarse is not None else []
                times["compile_ptx"] = time.perf_counter() - t1
                outcome_ptx = (pool.submit(_ptxas_all, ptxs, ptxas) if pool
                               else _done(_ptxas_all(ptxs, ptxas)))
    except Exception as e:  # noqa: BLE001  (any exception on a valid program is kaiojit's bug)
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        return Outcome("internal", detail[-3000:], times=times)
    for backend, got in results.items():
        diff = differences(p, want, got)
        if diff:
            return Outcome("disagree", "\n".join(diff), f"{backend}/reference", times, outcome_ptx)
    if "cuda" in results and "cpu" in results:
        diff = differences(p, results["cpu"], results["cuda"])
        if diff:
            return Outcome("disagree", "\n".join(diff), "cuda/cpu", times, outcome_ptx)
    return Outcome("agree", times=times, ptx=outcome_ptx)


def _ptxas_all(ptxs: list[str], ptxas: str) -> str | None:
    """The first complaint of ptxas about any of ``ptxs``, or None."""
    return next((c for c in (ptxas_check(ptx, ptxas) for ptx in ptxs) if c), None)


def _done(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f
