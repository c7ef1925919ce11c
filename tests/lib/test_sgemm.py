"""The benchmark's float32 SGEMMs (benchmarks/_kaiojit_gemm.py) at sizes off their tiles, every
configuration, on the cpu backend (and a GPU under the marker); their sm_90 PTX reads shared
memory and, when rows are 16-byte aligned, global memory in float4s, without local memory."""

from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.tools.resources import ptxas_resources
from tests.ptxas import require_ptxas

HERE = os.path.dirname(__file__)
rng = np.random.default_rng()


@pytest.fixture(scope="module")
def sgemm():
    path = os.path.join(HERE, "..", "..", "benchmarks", "_kaiojit_gemm.py")
    spec = importlib.util.spec_from_file_location("kaiojit_gemm_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (160, 136, 40): one block inside every matrix (the unchecked copy), the others on the edges;
# (131, 67, 45): rows not 16-byte aligned (the general specialization), every block checked.
# The first configuration only, on the cpu backend: each compile there takes seconds
# (benchmarks/gemm.py checks every configuration on the GPU before timing them).
SIZES = [(160, 136, 40), (131, 67, 45)]


def test_sgemm_at_sizes_off_the_tiles(backend, sgemm):
    configs = list(zip(sgemm.SGEMM_CONFIGS, sgemm.SGEMM_KERNELS))
    for cfg, kernel in configs if backend == "cuda" else configs[:1]:
        for m, n, k in SIZES:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            c = kj.to_device(np.full((m, n), np.nan, np.float32))
            sgemm.sgemm_launch(c, kj.to_device(a), kj.to_device(b), kernel, cfg)
            expect = a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_allclose(c.copy_to_host(), expect, rtol=1e-5, atol=1e-4,
                                       err_msg=f"{cfg}, {m}x{n}x{k}")


ALIGNED = "void(float32[:, ::1, align=16], float32[:, ::1, align=16], float32[:, ::1, align=16])"


def test_sgemm_ptx_vector_accesses_and_registers(sgemm):
    """Per K step, each copy of the kernel (unchecked and checked) reads shared memory in 32
    float4s; the unchecked copy's global loads and stores of an aligned C are float4s. Within
    128 registers (2 blocks of 256 threads an SM) and without spills."""
    require_ptxas()
    kernel = sgemm.SGEMM_KERNELS[0]
    aligned = kernel.compile(ALIGNED).ptx
    assert len(re.findall(r"ld\.shared\.v4\.[fb]32", aligned)) == 2 * 32
    assert len(re.findall(r"ld\.shared\.[fb]32", aligned)) == 0
    assert len(re.findall(r"ld\.global\.nc\.v4\.[fb]32", aligned)) == 2
    assert len(re.findall(r"st\.global\.v4\.[fb]32", aligned)) == 16
    assert ".local" not in aligned
    r = ptxas_resources(aligned, "sm_90")
    assert r.registers <= 128 and not r.spills, r
