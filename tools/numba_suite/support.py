"""Small stand-ins for numba's test helpers (``numba.cuda.testing``, ``numba.cuda.tests.support``).

numba-cuda's test files import their base class, skip decorators and a few context managers
from these two modules; the harness serves them from here so that the test files themselves
run unedited. Each helper does what numba's does, as far as a test observes it; the helpers
that only make sense on numba's own compiler (NRT leak checks, FileCheck of numba's IR) are
left out, so the tests that use them fail by name rather than pass by accident.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import subprocess
import sys
import unittest
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np

ENABLE_CUDASIM = False  # kaiojit's cpu backend is not numba's simulator: sim-only skips apply


# numba's tests/data, which run.py extracts beside the cudapy files (the .cu and .ptx files
# some tests link)
test_data_dir = Path(os.environ.get("NUMBA_SUITE_CUDAPY", Path(__file__).parent / "cudapy")
                     ).parent / "data"


class _Config:
    """numba's ``config`` module: the settings the tests read or override."""

    ENABLE_CUDASIM = 0
    CUDA_WARN_ON_IMPLICIT_COPY = 0
    CUDA_DEFAULT_PTX_CC = (7, 5)
    DISABLE_PERFORMANCE_WARNINGS = 0
    CUDA_ENABLE_PYNVJITLINK = 0
    CUDA_PER_THREAD_DEFAULT_STREAM = 0
    CUDA_USE_NVIDIA_BINDING = 1
    CUDA_MEMORY_MANAGER = "default"
    CUDA_DEBUGINFO_DEFAULT = 0
    CUDA_ENABLE_MINOR_VERSION_COMPATIBILITY = 0
    CUDA_LOG_LEVEL = ""
    DEBUGINFO_DEFAULT = 0
    OPT = 3
    DUMP_ASSEMBLY = 0
    CACHE_DIR = ""
    COMPATIBILITY_MODE = 0


def _unset_setting(name: str):
    if name.isupper():
        return 0  # a setting numba has and kaiojit ignores: numba's default is off
    raise AttributeError(name)


def _kaiojit_setting(module: str, holder: str, name: str) -> property:
    """A numba config attribute that reads and writes kaiojit's setting ``holder.name`` of
    ``module`` (imported at first use)."""
    def where():
        return getattr(importlib.import_module(module), holder)

    return property(lambda self: getattr(where(), name),
                    lambda self, value: setattr(where(), name, bool(value)))


class _ConfigModule(ModuleType):
    """numba's config module; ``CUDA_ARRAY_INTERFACE_SYNC`` and ``CUDA_LOW_OCCUPANCY_WARNINGS``
    are kaiojit's settings of the same meaning (``kaiojit.runtime.interop.cai_consumer.sync``,
    ``kaiojit.cuda.dispatcher.launch_warnings.low_occupancy``), so ``override_config`` of
    them reaches kaiojit."""

    CUDA_ARRAY_INTERFACE_SYNC = _kaiojit_setting("kaiojit.runtime.interop", "cai_consumer",
                                                 "sync")
    CUDA_LOW_OCCUPANCY_WARNINGS = _kaiojit_setting("kaiojit.cuda.dispatcher",
                                                   "launch_warnings", "low_occupancy")


config = _ConfigModule("numba.cuda.core.config")
config.__dict__.update({k: v for k, v in vars(_Config).items() if k.isupper()})
config.__getattr__ = _unset_setting


class TestCase(unittest.TestCase):
    """numba's ``TestCase``: unittest's, plus ``assertPreciseEqual``."""

    longMessage = True

    def reset_module_warnings(self, module):
        """Forget the warnings ``module`` has shown, so a test sees them again."""
        registry = getattr(sys.modules.get(getattr(module, "__name__", module)),
                           "__warningregistry__", None)
        if registry is not None:
            registry.clear()

    @staticmethod
    def _family(value) -> str:
        if isinstance(value, (bool, np.bool_)):
            return "bool"
        if isinstance(value, (int, np.integer)):
            return "int"
        if isinstance(value, (float, np.floating)):
            return "float"
        if isinstance(value, (complex, np.complexfloating)):
            return "complex"
        if isinstance(value, np.ndarray):
            return "ndarray"
        if isinstance(value, (tuple, list)):
            return "sequence"
        return type(value).__name__

    def assertPreciseEqual(self, first, second, prec="exact", ulps=1, msg=None,
                           ignore_sign_on_zero=False, abs_tol=None):
        """Equal in kind and value: arrays by dtype, shape and every element; floats within
        ``ulps`` units of ``prec`` ('exact', 'single' or 'double'), NaN equal to NaN, and
        zeros of different signs unequal unless ``ignore_sign_on_zero``."""
        fam = self._family(first)
        self.assertEqual(fam, self._family(second), msg or f"kinds differ: {first!r} vs {second!r}")
        if fam == "ndarray":
            self.assertEqual(first.dtype, second.dtype, msg)
            self.assertEqual(first.shape, second.shape, msg)
            for a, b in zip(first.flat, second.flat):
                self._scalar_equal(a, b, prec, ulps, msg, ignore_sign_on_zero, abs_tol)
        elif fam == "sequence":
            self.assertEqual(len(first), len(second), msg)
            for a, b in zip(first, second):
                self.assertPreciseEqual(a, b, prec, ulps, msg, ignore_sign_on_zero, abs_tol)
        else:
            self._scalar_equal(first, second, prec, ulps, msg, ignore_sign_on_zero, abs_tol)

    def _scalar_equal(self, a, b, prec, ulps, msg, ignore_sign_on_zero, abs_tol):
        if isinstance(a, (complex, np.complexfloating)) or isinstance(
                b, (complex, np.complexfloating)):
            a, b = complex(a), complex(b)
            self._scalar_equal(a.real, b.real, prec, ulps, msg, ignore_sign_on_zero, abs_tol)
            self._scalar_equal(a.imag, b.imag, prec, ulps, msg, ignore_sign_on_zero, abs_tol)
            return
        if not isinstance(a, (float, np.floating)) and not isinstance(b, (float, np.floating)):
            self.assertEqual(a, b, msg)
            return
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            self.assertEqual(math.isnan(a), math.isnan(b), msg or f"{a!r} != {b!r}")
            return
        if math.isinf(a) or math.isinf(b) or prec == "exact":
            self.assertEqual(a, b, msg)
            if a == 0 and not ignore_sign_on_zero:
                self.assertEqual(math.copysign(1, a), math.copysign(1, b),
                                 msg or f"signs of zero differ: {a!r} vs {b!r}")
            return
        bits = {"single": 24, "double": 53}[prec]
        rel = 2.0 ** (1 - bits) * ulps
        tol = max(rel * max(abs(a), abs(b)), abs_tol or 0.0)
        self.assertLessEqual(abs(a - b), tol, msg or f"{a!r} != {b!r} within {ulps} ulps")


class CUDATestCase(TestCase):
    """numba's base class for tests on a device."""

    FLOAT16_RTOL = np.finfo(np.float16).eps


def _skip_if(condition: bool):
    def decorate(reason):
        assert isinstance(reason, str)
        return unittest.skipIf(condition, reason)
    return decorate


skip_on_cudasim = _skip_if(False)
skip_unless_cudasim = _skip_if(True)
skip_unless_conda_cudatoolkit = _skip_if(True)
skip_if_external_memmgr = _skip_if(False)
skip_under_cuda_memcheck = _skip_if(False)
skip_on_arm = _skip_if(False)
skip_on_wsl2 = _skip_if(False)
skip_if_nvjitlink_missing = _skip_if(False)
skip_on_nvjitlink_13_1_sm_120 = _skip_if(False)
skip_without_nvdisasm = _skip_if(False)
skip_with_nvdisasm = _skip_if(True)
skip_on_standalone_numba_cuda = unittest.skip("requires base numba install")
skip_unless_cffi = unittest.skipUnless(
    __import__("importlib").util.find_spec("cffi") is not None, "needs cffi")
linux_only = unittest.skipUnless(sys.platform.startswith("linux"), "linux only")
windows_only = unittest.skipUnless(sys.platform.startswith("win"), "windows only")


def _identity(fn):
    return fn


skip_if_cuda_includes_missing = skip_if_curand_kernel_missing = _identity
skip_if_cudadevrt_missing = _identity
skip_unless_cc_50 = skip_unless_cc_53 = skip_unless_cc_60 = _identity
skip_unless_cc_75 = skip_unless_cc_90 = _identity


def cc_X_or_above(major: int, minor: int) -> bool:
    return (major, minor) <= (9, 0)  # kaiojit compiles for sm_90 by default


def xfail_unless_cudasim(fn):
    return unittest.expectedFailure(fn)


def cudadevrt_missing() -> bool:
    return False


class ForeignArray:
    """An object that only has a device array's ``__cuda_array_interface__``."""

    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


@contextlib.contextmanager
def override_config(name: str, value):
    old = getattr(config, name, None)
    setattr(config, name, value)
    try:
        yield
    finally:
        setattr(config, name, old)


@contextlib.contextmanager
def _captured(stream_name: str):
    old = getattr(sys, stream_name)
    setattr(sys, stream_name, io.StringIO())
    try:
        yield getattr(sys, stream_name)
    finally:
        setattr(sys, stream_name, old)


def captured_stdout():
    return _captured("stdout")


def captured_stderr():
    return _captured("stderr")


@contextlib.contextmanager
def ignore_internal_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def run_in_subprocess(code, flags=(), env=None, timeout=30):
    proc = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, check=False,
                          env=env, timeout=timeout)
    if proc.returncode:
        raise AssertionError(f"process failed with code {proc.returncode}: "
                             f"{proc.stderr.decode()}")
    return proc.stdout, proc.stderr


class CheckWarningsMixin:
    @contextlib.contextmanager
    def check_warnings(self, messages, category=RuntimeWarning):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        found = [str(w.message) for w in caught if w.category is category]
        for m in messages:
            self.assertTrue(any(m in f for f in found), f"no warning {m!r} in {found}")


class MemoryLeakMixin:
    """numba's NRT leak check: kaiojit has no NRT, so there is nothing to leak-check."""


def load_testsuite(loader, directory):
    return unittest.TestSuite()
