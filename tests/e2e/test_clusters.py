"""Thread-block clusters (``kernel.launch(..., cluster=...)``, through cuLaunchKernelEx): the
kernel runs on every block and computes what it computes without clusters."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [2, (4, 1, 1)])
def test_cluster_launch_runs_every_block(cluster):
    rng = np.random.default_rng()
    n = 256 * 8 * 5 + int(rng.integers(0, 200))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-2, 2))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    blocks = -(-n // 256)
    blocks += -blocks % 4  # a whole number of clusters
    saxpy.launch(out, kj.to_device(x), kj.to_device(y), a, np.int32(n), grid=blocks,
                 block=256, cluster=cluster)
    np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_cluster_that_does_not_divide_the_grid_is_a_launch_error():
    out = kj.device_array(64, np.float32)
    with pytest.raises(kj.LaunchError, match="cluster"):
        saxpy.launch(out, out, out, np.float32(1), np.int32(64), grid=3, block=32, cluster=2)
