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


# A finder as numba-cuda's wheel installs one (a .pth adds it to sys.meta_path at start-up): it
# asks for numba's spec and redirects every ``numba.cuda`` name to the installed numba-cuda.
FOREIGN_FINDER = textwrap.dedent('''
    import importlib.abc
    import importlib.util
    import sys


    class InstalledNumbaCuda(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if "numba.cuda" not in name:
                return None
            importlib.util.find_spec("numba")  # raises where numba has no spec
            return importlib.util.spec_from_loader(name, self)

        def create_module(self, spec):
            raise ImportError(f"the installed numba-cuda's {spec.name} was imported")

        def exec_module(self, module):
            pass


    sys.meta_path.insert(0, InstalledNumbaCuda())
''')


def test_harness_maps_names_past_an_installed_numba_cuda(tmp_path):
    """numba-cuda installed beside kaiojit (its redirecting finder first on sys.meta_path)
    does not take the tests' ``numba`` names: the test file imports and runs on kaiojit."""
    import os
    import random

    tests = tmp_path / "cudapy"
    tests.mkdir()
    size = random.randint(10, 60)
    (tests / "__init__.py").write_text("")
    # the kernels in a module beside the test file, imported by its package name (the import
    # that met the redirecting finder: numba's test files import their usecases so)
    (tests / "scale_usecases.py").write_text(NUMBA_STYLE.split("class TestScale")[0])
    (tests / "test_numba_style.py").write_text(
        "from numba.cuda.tests.cudapy.scale_usecases import *  # noqa: F403\n"
        + NUMBA_STYLE.replace("SIZE", str(size)))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FOREIGN_FINDER)
    out = tmp_path / "result.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools/numba_suite/run.py"), "--tests", str(tests),
         "--cache", str(tmp_path / "cache"), "--json", str(out), "test_numba_style"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["files"][0]["collect_error"] is None
    assert result["totals"] == {"total": 4, "passed": 1, "failed": 2, "skipped": 1}


DATA_READER = textwrap.dedent('''
    from numba.cuda.testing import CUDATestCase, test_data_dir


    class TestData(CUDATestCase):
        def test_reads_data(self):
            self.assertEqual((test_data_dir / "kernel.cu").read_text(), "TOKEN")
''')


def test_harness_lays_numba_s_test_data_beside_the_tests(tmp_path):
    """numba's ``test_data_dir`` (the .cu and .ptx files some tests link) is the ``--data``
    folder, or without it the ``data`` folder beside ``--tests`` (an extracted wheel's
    layout)."""
    import random

    token = f"// {random.random()}"
    tests = tmp_path / "cudapy"
    tests.mkdir()
    (tests / "__init__.py").write_text("")
    (tests / "test_data.py").write_text(DATA_READER.replace("TOKEN", token))
    elsewhere = tmp_path / "elsewhere"
    for data in (elsewhere, tmp_path / "data"):  # --data, then the folder beside the tests
        data.mkdir()
        (data / "kernel.cu").write_text(token)
        out = tmp_path / "result.json"
        flags = ["--data", str(data)] if data == elsewhere else []
        proc = subprocess.run(
            [sys.executable, str(REPO / "tools/numba_suite/run.py"), "--tests", str(tests),
             *flags, "--cache", str(tmp_path / "cache"), "--json", str(out), "test_data"],
            cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(out.read_text())["totals"]["passed"] == 1, data
        (data / "kernel.cu").unlink()
