"""Every example's kernels exported and reloaded: for the GPU (cubins by ptxas, for the archs
each kernel can be compiled for) and for the host, where the reloaded kernels run the example
again on the cpu backend and give the JIT's results."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from kaiojit import aot
from kaiojit.aot.exporter import ExportError
from kaiojit.dispatcher import Dispatcher
from kaiojit.runtime.backend import set_backend

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples")

# example -> (its main's small arguments, the archs its kernels compile for)
RUNS = {
    "saxpy": ({}, ["sm_80", "sm_90"]),
    "grid_sync": ({"n": 1 << 12, "blocks": 4}, ["sm_80", "sm_90"]),
    "monte_carlo_pi": ({"seed": 7, "blocks": 2, "iterations": 200}, ["sm_80", "sm_90"]),
    "gemm": ({"m": 40, "n": 72, "k": 24}, ["sm_80", "sm_90"]),
    "tma_copy": ({"rows": 64, "cols": 96}, ["sm_90"]),
    "wgmma_gemm": ({"m": 64, "n": 128, "k": 64}, ["sm_90a"]),
}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_aot_{name}",
                                                  os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kernels(module) -> dict:
    found = {}
    for value in vars(module).values():
        if isinstance(value, Dispatcher) and not value.device and value.signatures:
            found[value] = [str(s) for s in value.signatures]
    return found


@pytest.fixture
def cpu():
    previous = set_backend("cpu")
    yield
    set_backend(previous)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_kernels_export_and_reload(name, tmp_path, cpu):
    args, archs = RUNS[name]
    module = _load(name)
    jit_result = module.main(**args)  # the JIT's run: compiles the kernels' signatures
    kernels = _kernels(module)
    assert kernels, f"{name}: no kernel compiled"
    gpu = aot.export(str(tmp_path / "gpu"), kernels, archs=archs)
    assert {e.kernel for e in gpu.entries} == {d.__name__ for d in kernels}
    for e in gpu.entries:
        assert set(e.cubins) == set(archs)
    try:
        aot.export(str(tmp_path / "host"), kernels, target="host")
    except ExportError as e:  # tensor copies on the host are kaiojit's own native code
        assert name == "tma_copy" and "kaiojit's own native functions" in str(e)
        return
    exported = aot.load(str(tmp_path / "host"))
    for d in kernels:  # the example's globals now name the exported kernels
        setattr(module, d.__name__, getattr(exported, d.__name__))
    if name == "saxpy":  # its main inspects the JIT's PTX: run the kernel itself
        _check_saxpy(module)
    elif name == "gemm":  # matmul's default kernel is bound at definition: pass it
        _check_gemm(module, exported)
    elif name == "monte_carlo_pi":
        assert module.main(**args) == jit_result  # the same seed, the same draws
    else:
        module.main(**args)  # each main asserts its result against NumPy


def _check_saxpy(module) -> None:
    import kaiojit as kj

    rng = np.random.default_rng()
    n = 1000
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    out = kj.to_device(np.full(n, np.nan, np.float32))
    module.saxpy[4, 256](out, kj.to_device(x), kj.to_device(y), np.float32(1.5), np.int32(n))
    np.testing.assert_allclose(out.copy_to_host(), 1.5 * x + y, rtol=1e-6, atol=1e-6)


def _check_gemm(module, exported) -> None:
    import ml_dtypes

    import kaiojit as kj

    rng = np.random.default_rng()
    m, n, k = 40, 72, 24
    a = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    out = kj.to_device(np.full((m, n), np.nan, np.float32))
    module.matmul(kj.to_device(a), kj.to_device(b), out, kernel=exported.gemm_bf16)
    expect = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.copy_to_host(), expect, rtol=1e-5, atol=1e-4)
