"""Run numba-cuda's kernel tests, unedited, against ``kaiojit.cuda`` (cpu backend or a GPU).

    python tools/numba_suite/run.py                      # fetch numba-cuda 0.30.4 into the cache
    python tools/numba_suite/run.py --tests DIR          # DIR: an extracted .../tests/cudapy
    python tools/numba_suite/run.py --tests DIR --data D # D: its tests/data, if not beside DIR
    python tools/numba_suite/run.py test_array test_math # some files only
    python tools/numba_suite/run.py --target kaiojit     # the one-for-one baseline mapping
    python tools/numba_suite/run.py --backend cuda       # on a GPU instead of the cpu backend
    python tools/numba_suite/run.py --checked            # with the cpu backend's checked mode

Each test file runs in its own pytest process (``plugin.py`` installs the mapping of
``shim.py``); the runner prints passed/failed/skipped file by file and the totals, and with
``--json PATH`` writes every test's outcome. A file that does not import counts all of its
tests (counted from its source) as failed. Nothing is downloaded or extracted at import.

The tests run as a numba user's program does: the cpu backend's checked mode (memcheck,
racecheck, initcheck: kaiojit's pytest plugin turns it on for pytest sessions) is off unless
``--checked``; numba's tests were not written for a race checker (several have every thread
store the same value to one element).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VERSION = "0.30.4"
CACHE = Path(tempfile.gettempdir()) / "kaiojit-numba-suite"
WHEEL_DIR = "numba_cuda/numba/cuda/tests/cudapy/"
WHEEL_DATA_DIR = "numba_cuda/numba/cuda/tests/data/"

# numba-cuda's cudapy files that test numba's compiler and its internals, not the kernel
# language or the host API kernels use: left out of the acceptance count.
INTERNALS = {
    "test_analysis": "numba IR analysis",
    "test_byteflow": "numba bytecode flow",
    "test_copy_propagate": "numba IR pass",
    "test_ir": "numba IR",
    "test_ir_utils": "numba IR utilities",
    "test_ssa": "numba SSA pass",
    "test_typeconv": "numba type-conversion tables",
    "test_typeinfer": "numba type inference internals",
    "test_debuginfo": "numba's DWARF layout",
    "test_debuginfo_types": "numba's DWARF layout",
    "test_lineinfo": "numba's line-info layout",
    "test_extending": "numba's extension API (typing/lowering templates)",
    "test_extending_types": "numba's extension API",
    "test_overload": "numba's @overload extension API",
    "test_make_function_to_jit_function": "numba IR (make_function)",
    "test_caching": "numba's cache file layout",
    "test_ipc": "CUDA IPC (a GPU between processes)",
    "test_multigpu": "several GPUs",
    "test_multiprocessing": "numba's fork behaviour",
    "test_cupy_bfloat16_interop": "CuPy on a GPU",
    "test_numba_interop": "numba (CPU) interop",
    "test_tracing": "numba's event tracing",
    "test_gufunc_scheduling": "numba's gufunc scheduler internals",
    "test_fp8_bindings": "numba's fp8 bindings",
}


def fetch(cache: Path) -> Path:
    """numba-cuda's cudapy test directory, from its wheel (pip download), cached, with the
    test data they link (``tests/data``: numba's ``test_data_dir``) beside it."""
    dest = cache / "layout" / "numba" / "cuda" / "tests" / "cudapy"
    data = dest.parent / "data"
    if (dest / "test_array.py").exists() and (data / "jitlink.cu").exists():
        return dest
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if not any(wheels.glob(f"numba_cuda-{VERSION}-*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", f"numba-cuda=={VERSION}",
                        "--no-deps", "-q", "-d", str(wheels)], check=True)
    wheel = next(wheels.glob(f"numba_cuda-{VERSION}-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        for folder, into in ((WHEEL_DIR, dest), (WHEEL_DATA_DIR, data)):
            for name in z.namelist():
                if name.startswith(folder) and not name.endswith("/"):
                    target = into / name[len(folder):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(name))
    return dest


def laid_out(tests: Path, cache: Path, data: Path | None = None) -> Path:
    """A copy of ``tests`` at ``numba/cuda/tests/cudapy`` (so pytest names its modules
    ``numba.cuda.tests.cudapy.*``, as their relative imports need), with ``data`` (numba's
    ``tests/data``: the sources and PTX some tests link) beside it; without ``data``, the
    ``data`` folder beside ``tests`` when there is one (an extracted wheel's layout)."""
    dest = cache / "layout" / "numba" / "cuda" / "tests" / "cudapy"
    if tests.resolve() != dest.resolve():
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(tests, dest)
    data = data or tests.parent / "data"
    if data.is_dir() and data.resolve() != (dest.parent / "data").resolve():
        shutil.rmtree(dest.parent / "data", ignore_errors=True)
        shutil.copytree(data, dest.parent / "data")
    for d in (dest.parent, dest.parent.parent, dest.parent.parent.parent):
        (d / "__init__.py").touch()
    return dest


def count_tests(path: Path) -> int:
    """Tests a file defines (methods ``test*`` of its classes, functions ``test*``)."""
    tree = ast.parse(path.read_text())
    n = 0
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            n += sum(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and f.name.startswith("test") for f in node.body)
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            n += 1
    return n


def run_file(path: Path, target: str, timeout: float, backend: str = "cpu",
             checked: bool = False) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as out:
        out_path = out.name
    env = dict(os.environ, NUMBA_SUITE_TARGET=target, NUMBA_SUITE_CUDAPY=str(path.parent),
               NUMBA_SUITE_OUT=out_path, KAIOJIT_BACKEND=backend,
               KAIOJIT_SANITIZE="1" if checked else "0",
               PYTHONPATH=os.pathsep.join([str(HERE), str(REPO), str(HERE / "importable"),
                                           os.environ.get("PYTHONPATH", "")]))
    ini = path.parent.parent.parent.parent.parent / "pytest.ini"
    ini.write_text("[pytest]\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "plugin", "-p", "no:cacheprovider",
           "--noconftest", "-c", str(ini), "--rootdir", str(ini.parent), str(path)]
    start = time.monotonic()
    timed_out = False
    try:
        subprocess.run(cmd, cwd=REPO, env=env, timeout=timeout, capture_output=True,
                       check=False)
    except subprocess.TimeoutExpired:
        timed_out = True
    entries = [json.loads(line) for line in Path(out_path).read_text().splitlines()]
    os.unlink(out_path)
    result = {"file": path.stem, "seconds": round(time.monotonic() - start, 1),
              "timed_out": timed_out, "tests": entries}
    outcomes: dict[str, str] = {}
    collect_error = None
    for e in entries:
        if e["when"] == "collect":
            collect_error = e["message"]
            continue
        if outcomes.get(e["id"]) in ("failed",):
            continue
        outcomes[e["id"]] = e["outcome"]
    passed = sum(o == "passed" for o in outcomes.values())
    skipped = sum(o == "skipped" for o in outcomes.values())
    failed = sum(o == "failed" for o in outcomes.values())
    total = len(outcomes)
    if collect_error is not None or timed_out:
        total = max(total, count_tests(path))
        failed = total - passed - skipped
    result.update(total=total, passed=passed, failed=failed, skipped=skipped,
                  collect_error=collect_error)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="test file names (default: all but INTERNALS)")
    ap.add_argument("--tests", type=Path, help="an extracted numba_cuda/.../tests/cudapy")
    ap.add_argument("--data", type=Path,
                    help="numba-cuda's tests/data, with --tests (default: the data folder "
                         "beside it, if any)")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--target", default="kaiojit.cuda",
                    help="the module numba.cuda maps to (kaiojit for the baseline)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, help="write every test's outcome here")
    ap.add_argument("--all", action="store_true", help="include the INTERNALS files")
    ap.add_argument("--jobs", type=int, default=1, help="test files run at once")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"),
                    help="the backend kaiojit runs the tests on (cuda: a GPU)")
    ap.add_argument("--checked", action="store_true",
                    help="run with the cpu backend's checked mode (off by default)")
    args = ap.parse_args(argv)
    tests = laid_out(args.tests, args.cache, args.data) if args.tests else fetch(args.cache)
    names = [f.removesuffix(".py") for f in args.files] or sorted(
        p.stem for p in tests.glob("test_*.py") if args.all or p.stem not in INTERNALS)
    results = []
    totals = {"total": 0, "passed": 0, "failed": 0, "skipped": 0}
    print(f"{'file':34} {'tests':>5} {'pass':>5} {'fail':>5} {'skip':>5}  note")
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = pool.map(lambda n: run_file(tests / f"{n}.py", args.target, args.timeout,
                                           args.backend, args.checked), names)
    for name, r in zip(names, runs):
        results.append(r)
        for k in totals:
            totals[k] += r[k]
        note = "timed out" if r["timed_out"] else (
            "does not import: " + _last_line(r["collect_error"]) if r["collect_error"] else "")
        print(f"{name:34} {r['total']:5} {r['passed']:5} {r['failed']:5} {r['skipped']:5}  "
              f"{note[:110]}", flush=True)
    print(f"{'TOTAL':34} {totals['total']:5} {totals['passed']:5} {totals['failed']:5} "
          f"{totals['skipped']:5}")
    if args.json:
        args.json.write_text(json.dumps({"target": args.target, "totals": totals,
                                         "files": results}, indent=1))
    return 0


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("E ")]
    return (errs[-1] if errs else lines[-1] if lines else "")[2:].strip()


if __name__ == "__main__":
    sys.exit(main())
