"""The numba-suite harness (tools/numba_suite) runs a numba-style test file unedited against
kaiojit.cuda and counts its outcomes. numba-cuda's own files are fetched with pip at run
time, which CI cannot do, so this runs a small file written in numba's style instead."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

NUMBA_STYLE = textwrap.dedent('''
    import numpy as np
    from numba import cuda
    from numba.cuda import float32, int32, void
    from numba.cuda.testing import CUDATestCase, skip_on_cudasim, unittest


    @cuda.jit(void(float32[:], float32[:], int32))
    def scale(out, x, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = 2 * x[i]


    class TestScale(CUDATestCase):
        def test_scale(self):
            x = np.random.default_rng().standard_normal(SIZE).astype(np.float32)
            out = cuda.to_device(np.full(SIZE, np.nan, np.float32))
            scale[1, 64](out, cuda.to_device(x), SIZE)
            self.assertPreciseEqual(out.copy_to_host(), 2 * x)

        def test_wrong(self):
            self.assertPreciseEqual(np.float32(1.0), np.float32(1.5))

        @skip_on_cudasim("runs on kaiojit")
        def test_internals(self):
            from numba.cuda.core import ir  # numba's compiler: not mapped

        @unittest.skip("skipped by the file itself")
        def test_skipped(self):
            pass
''')


def test_harness_counts_a_numba_style_file(tmp_path):
    import random

    tests = tmp_path / "cudapy"
    tests.mkdir()
    size = random.randint(10, 60)
    (tests / "__init__.py").write_text("")
    (tests / "test_numba_style.py").write_text(NUMBA_STYLE.replace("SIZE", str(size)))
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools/numba_suite/run.py"), "--tests", str(tests),
         "--cache", str(tmp_path / "cache"), "--json", str(out), "test_numba_style"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["totals"] == {"total": 4, "passed": 1, "failed": 2, "skipped": 1}
    outcomes = {t["id"].split("::")[-1]: t for t in result["files"][0]["tests"]}
    assert outcomes["test_scale"]["outcome"] == "passed"
    assert "cannot import name 'ir'" in outcomes["test_internals"]["message"]
    assert "TOTAL" in proc.stdout and "test_numba_style" in proc.stdout
