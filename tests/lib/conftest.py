"""The library tests (kj.random, kj.vectorize, kj.reduce, the examples) run on the cpu backend
everywhere and, under the ``gpu`` marker, on the CUDA backend too."""

from __future__ import annotations

import pytest

import kaiojit as kj


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def backend(request: pytest.FixtureRequest):
    """The backend a test runs on, made active for the test."""
    if request.param == "cuda" and not kj.is_cuda_available():
        pytest.skip("needs a CUDA device")
    previous = kj.set_backend(request.param)
    try:
        yield request.param
    finally:
        kj.set_backend(previous)


def compile_for_gpu(*kernels) -> list[str]:
    """The sm_90 PTX of every signature the kernels were launched with (the ptxas fixture
    assembles each), so tests on the cpu backend also check what the GPU would run."""
    ptx = []
    for kernel in kernels:
        assert kernel.signatures, f"{kernel.__name__} was never launched"
        ptx += [kernel.compile(sig).ptx for sig in kernel.signatures]
    return ptx
