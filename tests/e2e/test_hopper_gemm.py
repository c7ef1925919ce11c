"""examples/hopper_gemm.py, the warp-specialized persistent GEMM (issue 32): correct on shapes
that are not multiples of its tile against NumPy, for bf16 and both fp8 formats and each
structure knob, on the cpu backend (and, marked ``gpu``, on a GPU); every configuration
assembled by ptxas for sm_90a without spills where it reallocates registers; the launch it
makes (dynamic shared memory past 48 KB, a persistent grid) on the mock backend."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import MockBackend, set_backend
from kaiojit.testing import _backend
from tests.ptxas import require_ptxas

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "hopper_gemm.py")


def _load():
    spec = importlib.util.spec_from_file_location("example_hopper_gemm", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


hg = _load()
BASE = hg.GemmConfig()
RNG = np.random.default_rng()


@pytest.mark.parametrize("cfg, shape", [
    (BASE, (131, 264, 200)),                              # 2 x 2 tiles, 4 K steps, 2 workers
    (replace(BASE, dtype="e4m3", stages=3), (136, 272, 272)),
    (replace(BASE, dtype="e5m2", stages=2, wait=0), (72, 520, 144)),
    (replace(BASE, tma_epilogue=False, persistent=False), (131, 264, 72)),
    (replace(BASE, dtype="e4m3", bn=128, stages=6, promote=True), (200, 136, 400)),
], ids=["bf16", "e4m3-3stages", "e5m2-2stages-wait0", "register-epilogue-one-tile-a-block",
        "e4m3-promoted-128x128"])
def test_gemm_odd_shapes(kj_backend, cfg, shape):
    err = hg.check(*shape, cfg)
    assert 0 <= err <= 1


def test_the_split_form_is_reported_on_the_cpu_backend():
    """The GPU form (the producer's own loop) waits on the consumers' releases, which the cpu
    backend runs after the producer's branch: reported, not hung (the cpu runs lockstep)."""
    previous = set_backend(_backend("cpu"))
    try:
        m, n, k = 128, 256, 64 * 6  # 6 K steps through 4 stages: the producer must wait
        a = kj.to_device(RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16))
        b = kj.to_device(RNG.standard_normal((n, k)).astype(ml_dtypes.bfloat16))
        c = kj.to_device(np.zeros((m, n), ml_dtypes.bfloat16))
        maps = [kj.TensorMap.tiled(x, box, swizzle="128B") for x, box in
                ((a, (hg.BM, 64)), (b, (hg.BN, 64)), (c, (hg.EPI, hg.EPI)))]
        with pytest.raises(kj.KernelError, match="can never complete"):
            hg.kernel(BASE)[1, hg.THREADS, 0, BASE.shared_bytes()](*maps, c, m, n, k)
    finally:
        set_backend(previous)


def test_the_launch_on_the_mock_backend():
    mock = MockBackend()
    previous = set_backend(mock)
    try:
        m, n, k = 8192, 4096, 512
        a = kj.device_array((m, k), ml_dtypes.bfloat16)
        b = kj.device_array((n, k), ml_dtypes.bfloat16)
        c = kj.device_array((m, n), ml_dtypes.bfloat16)
        hg.matmul(a, b, c)
        (launch,) = mock.launches
        assert launch.grid == (mock.device_limits(0).multiprocessor_count, 1, 1)
        assert launch.block == (hg.THREADS, 1, 1)
        assert launch.shared_mem == BASE.shared_bytes() > 48 * 1024
        assert [nbytes for _, nbytes in mock.dynamic_shared_set] == [BASE.shared_bytes()]
    finally:
        set_backend(previous)


SIG = ("void(tensormap({0}, 2), tensormap({0}, 2), tensormap(bfloat16, 2), "
       "bfloat16[:, ::1], int64, int64, int64)")


@pytest.mark.parametrize("cfg", [
    BASE, replace(BASE, dtype="e4m3"), replace(BASE, stages=3, wait=0),
    replace(BASE, tma_epilogue=False), replace(BASE, lockstep=True),
    replace(BASE, dtype="e4m3", bn=128, stages=6, promote=True),
], ids=["bf16", "e4m3", "3stages-wait0", "register-epilogue", "lockstep", "e4m3-promoted"])
def test_ptxas_sm90a_no_spills(cfg):
    from kaiojit.tools.resources import ptxas_resources

    require_ptxas()
    storage = "bfloat16" if cfg.dtype == "bf16" else "uint8"
    ptx = kj.compile_ptx(hg.kernel(cfg).py_func, SIG.format(storage), arch="sm_90",
                         max_registers=hg.ENTRY_REGISTERS)
    assert ".target sm_90a" in ptx and "wgmma.mma_async" in ptx
    r = ptxas_resources(ptx, "sm_90a")
    assert not r.spills and r.local_bytes == 0, r
    assert ("setmaxnreg.inc.sync.aligned.u32 232" in ptx) is not cfg.lockstep


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [cfg for _, cfg in [
    ("base", BASE), ("e4m3", replace(BASE, dtype="e4m3")), ("e5m2", replace(BASE, dtype="e5m2")),
    ("2", replace(BASE, stages=2)), ("3", replace(BASE, stages=3)), ("w0", replace(BASE, wait=0)),
    ("reg", replace(BASE, tma_epilogue=False)), ("np", replace(BASE, persistent=False)),
    ("nr", replace(BASE, reg_alloc=False)), ("ls", replace(BASE, lockstep=True)),
    ("pr", replace(BASE, dtype="e4m3", bn=128, stages=6, promote=True))]], ids=str)
def test_gemm_gpu(kj_backend, cfg):
    for shape in ((131, 264, 208), (1000, 776, 1040), (256, 512, 64)):
        assert hg.check(*shape, cfg) <= 1
