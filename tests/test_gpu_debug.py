"""Debugging on the GPU: ``debug=True`` records the first out-of-bounds index in the module's
``kaiojit_fault`` record, reported after a synchronization as the cpu backend reports it; and
``lineinfo=True`` lets compute-sanitizer name the Python line of a bad access (``gpu``)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import target as H
from kaiojit.runtime.faults import fault_error

RNG = np.random.default_rng()
SIG = "void(float64[::1], float64[::1], int64)"


@kj.jit(debug=True)
def shifted_copy(out, x, offset):
    i = kj.grid(1)
    if i < out.size:
        out[i] = x[i + offset]


def fault_line() -> int:
    return shifted_copy.py_func.__code__.co_firstlineno + 4


def record(site: int, index: int, extent: int, block: tuple, thread: tuple) -> list[int]:
    words = [0] * H.FAULT_WORDS
    words[H.FAULT_KIND], words[H.FAULT_SITE] = H.ERR_BOUNDS, site
    words[H.FAULT_INDEX], words[H.FAULT_EXTENT] = index, extent
    words[H.FAULT_BLOCK:H.FAULT_BLOCK + 3] = block
    words[H.FAULT_THREAD:H.FAULT_THREAD + 3] = thread
    return words


def test_a_gpu_fault_record_reads_as_the_cpu_backend_reports(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("compares with the cpu backend's report")
    x = kj.to_device(RNG.standard_normal(100))
    out = kj.to_device(np.full(100, np.nan))
    offset = int(RNG.integers(1, 20))
    from kaiojit.runtime import CpuBackend, set_backend

    previous = set_backend(CpuBackend(sanitize=False))  # debug=True's report, not the checked
    try:  # mode's (docs/sanitizer.md)
        with pytest.raises(kj.KernelError) as cpu_error:
            shifted_copy[1, 128](out, x, offset)
    finally:
        set_backend(previous)
    first = 100 - offset  # the cpu runs the threads in order: the first to fault is this one
    ck = shifted_copy.compile(SIG)
    (site,) = [i for i, s in enumerate(ck.fault_sites) if s["array"] == "x"]
    words = record(site, first + offset, 100, (0, 0, 0), (first, 0, 0))
    gpu_error = fault_error(ck.py_name, ck.fault_sites, words)
    assert str(gpu_error) == str(cpu_error.value)
    assert f"test_gpu_debug.py:{fault_line()}, block (0, 0, 0), thread ({first}, 0, 0)" in str(
        gpu_error)


def test_fault_sites_survive_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    fresh = kj.jit(debug=True, cache=True)(shifted_copy.py_func).compile(SIG)
    cached = kj.jit(debug=True, cache=True)(shifted_copy.py_func).compile(SIG)
    assert cached.timings == {"cache": True}
    assert cached.fault_sites == fresh.fault_sites and len(fresh.fault_sites) == 2


# --- on the GPU ---------------------------------------------------------------------------------


def cuda_backend():
    import kaiojit.runtime as rt

    backend = rt.get_backend()
    if backend.name != "cuda":
        pytest.skip("needs the cuda backend")
    return backend


@pytest.mark.gpu
def test_debug_out_of_bounds_on_the_gpu_is_a_kernel_error_after_the_wait():
    cuda_backend()
    host = RNG.standard_normal(100)
    x, out = kj.to_device(host), kj.to_device(np.full(100, np.nan))
    offset = int(RNG.integers(1, 20))
    shifted_copy[1, 128](out, x, offset)
    with pytest.raises(kj.KernelError) as err:
        kj.synchronize()
    pattern = (rf"kernel 'shifted_copy': index (\d+) is out of bounds for dimension 0 of array "
               rf"'x' \(size 100\) at {re.escape(__file__)}:{fault_line()}, block \(0, 0, 0\), "
               rf"thread \((\d+), 0, 0\)\n    out\[i\] = x\[i \+ offset\]$")
    m = re.match(pattern, str(err.value))
    assert m, str(err.value)
    index, thread = int(m.group(1)), int(m.group(2))
    assert index == thread + offset and 100 - offset <= thread < 100
    # reported once, and the context still works: an in-bounds launch runs and reports nothing
    out = kj.to_device(np.full(100, np.nan))
    shifted_copy[1, 128](out, x, 0)
    kj.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), host)


@pytest.mark.gpu
def test_a_copy_to_the_host_is_a_wait_that_reports_the_fault():
    cuda_backend()
    x = kj.to_device(RNG.standard_normal((6, 7)))

    @kj.jit(debug=True)
    def column(out, x, j):
        i = kj.grid(1)
        if i < out.size:
            out[i] = x[i, j]

    out = kj.to_device(np.full(6, np.nan))
    column[1, 32](out, x, 7)
    with pytest.raises(kj.KernelError, match=r"index 7 is out of bounds for dimension 1 of "
                                             r"array 'x' \(size 7\)"):
        out.copy_to_host()


# --- compute-sanitizer and lineinfo -------------------------------------------------------------


def find_compute_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    roots += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for root in filter(None, roots):
        for path in (os.path.join(root, "bin", "compute-sanitizer"),
                     os.path.join(root, "compute-sanitizer", "compute-sanitizer")):
            if os.access(path, os.X_OK):
                return path
    return None


PLANTED = textwrap.dedent("""\
    import numpy as np
    import kaiojit as kj

    @kj.jit(lineinfo=True)
    def planted(out, n):
        i = kj.grid(1)
        if i < n:
            out[i + n] = 1.0  # PLANTED: past the end of out

    out = kj.to_device(np.zeros(256, np.float32))
    planted[2, 128](out, 256)
    try:
        kj.synchronize()
    except Exception as e:
        print("after the launch:", type(e).__name__)
    """)


@pytest.mark.gpu
def test_compute_sanitizer_names_the_python_line_of_a_bad_write(tmp_path):
    cuda_backend()
    sanitizer = find_compute_sanitizer()
    if sanitizer is None:
        pytest.skip("compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda*)")
    script = tmp_path / "planted.py"
    script.write_text(PLANTED)
    line = 1 + PLANTED.splitlines().index(
        next(t for t in PLANTED.splitlines() if "PLANTED" in t))
    env = dict(os.environ, PYTHONPATH=os.getcwd(), KAIOJIT_BACKEND="cuda",
               KAIOJIT_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sanitizer, "--tool", "memcheck", sys.executable, str(script)],
                       check=False, capture_output=True, text=True, env=env, timeout=300)
    report = r.stdout + r.stderr
    assert "Invalid __global__ write of size 4 bytes" in report, report[-3000:]
    assert re.search(rf"planted\S*\s+in\s+\S*planted\.py:{line}\b", report), report[-3000:]
