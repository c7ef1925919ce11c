"""``import numba`` in a process a test starts (``python -c "from numba import cuda ..."``):
installs the harness's name mapping there too (``NUMBA_SUITE_*`` come from the runner)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import shim  # noqa: E402

shim.install(os.environ.get("NUMBA_SUITE_TARGET", "kaiojit.cuda"),
             os.environ["NUMBA_SUITE_CUDAPY"])
