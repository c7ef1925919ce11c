"""Warnings point at the user's launch line, not into kaiojit's runtime (PerformanceWarning
for NumPy arguments), whichever path the launch takes: the general path, the fast form of a
repeated launch, ``.forall`` and ``.launch``."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend


@kj.jit
def add_one(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = x[i] + 1


def _launch_lines(launches) -> list[tuple[str, int]]:
    """Run each launch with every warning recorded; (file, line) of each PerformanceWarning."""
    seen = []
    for launch in launches:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            launch()
        seen += [(w.filename, w.lineno) for w in caught
                 if issubclass(w.category, kj.PerformanceWarning)]
    return seen


def _line_of(fn) -> int:
    """The line of the one-line lambda ``fn``."""
    return inspect.getsourcelines(fn)[1]


def _check(launches):
    lines = _launch_lines(launches)
    expected = [(__file__, _line_of(f)) for f in launches for _ in range(2)]
    assert lines == expected


def test_numpy_argument_warning_names_the_launch_line(kj_backend):
    rng = np.random.default_rng()
    x = rng.standard_normal(64)
    out = np.full(64, np.nan)
    launches = [
        lambda: add_one[2, 32](out, x),
        lambda: add_one[2, 32](out, x),
        lambda: add_one.forall(64)(out, x),
        lambda: add_one.launch(out, x, grid=2, block=32),
    ]
    _check(launches)
    np.testing.assert_array_equal(out, x + 1)


def test_a_module_kernel_launch_warns_at_the_launch_line_too():
    """The mock backend launches through the cuda path's ModuleKernel (other frames)."""
    previous = set_backend(MockBackend())
    try:
        x = np.random.default_rng().standard_normal(32)
        out = np.full(32, np.nan)
        launcher = add_one[1, 32]
        launches = [lambda: launcher(out, x) for _ in range(3)]
        _check(launches)
        np.testing.assert_array_equal(out, np.full(32, np.nan))  # the mock runs nothing
    finally:
        set_backend(previous)


@pytest.mark.parametrize("depth", [1, 3])
def test_the_user_frame_is_found_through_user_helpers(kj_backend, depth):
    """Helpers of the user's own stay the user's: the warning names the innermost user line."""
    x = np.random.default_rng().standard_normal(16)
    out = np.full(16, np.nan)

    def helper(n):
        if n:
            return helper(n - 1)
        add_one[1, 16](out, x)
        return inspect.currentframe().f_lineno - 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = helper(depth)
    assert {(w.filename, w.lineno) for w in caught} == {(__file__, line)}
