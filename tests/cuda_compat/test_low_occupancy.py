"""numba's ``CUDA_LOW_OCCUPANCY_WARNINGS``: where set, configuring a kernel with fewer than 128
blocks warns at the user's ``kernel[grid, block]`` (numba's test_warning
``test_inefficient_launch_configuration``); off, as by default, nothing warns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda
from kaiojit.cuda.dispatcher import launch_warnings

rng = np.random.default_rng()


def fill(out, v):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = v


@pytest.fixture
def low_occupancy_warnings():
    launch_warnings.low_occupancy = True
    yield
    launch_warnings.low_occupancy = False


def test_a_small_grid_warns_where_asked(kj_backend, low_occupancy_warnings):
    kernel = cuda.jit(fill)
    blocks = int(rng.integers(1, 128))
    with pytest.warns(kj.PerformanceWarning) as seen:
        launch = kernel[(blocks, 1), 32]
    (w,) = seen
    assert str(w.message) == (f"Grid size {blocks} will likely result in GPU "
                              "under-utilization due to low occupancy.")
    assert w.filename == __file__  # the user's line, not kaiojit's
    out = cuda.to_device(np.full(blocks * 32, np.nan))
    value = float(rng.standard_normal())
    launch(out, value)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(blocks * 32, value))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel[(8, 4, 4), 32]  # 128 blocks: enough
        kernel[128, 1]


def test_off_by_default(kj_backend):
    kernel = cuda.jit(fill)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel[1, 1](cuda.to_device(np.full(1, np.nan)), 1.0)
