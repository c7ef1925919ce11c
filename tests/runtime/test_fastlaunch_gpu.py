"""The fast launch on a GPU with real PyTorch tensors and CuPy arrays (where installed), kj.constexpr
kernels and kj.autotune: results against NumPy, fast forms taken, and the fallbacks when a tensor's
dtype, contiguity or alignment changes between launches."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime.native import dlpack_exchange, getset_reader
from kaiojit.runtime.native.fastlaunch import source_of

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng()


def make_saxpy():
    @kj.jit
    def saxpy(out, x, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + out[i]
    return saxpy


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_foreign_arrays_launch_fast_and_fall_back(cuda, library):
    lib = pytest.importorskip(library)
    if library == "torch" and not lib.cuda.is_available():
        pytest.skip("PyTorch without CUDA")

    def on_device(host):
        return lib.tensor(host, device="cuda") if library == "torch" else lib.asarray(host)

    def to_host(a):
        return a.cpu().numpy() if library == "torch" else lib.asnumpy(a)
    saxpy = make_saxpy()
    n = int(RNG.integers(1000, 4000))
    grid = (n + 255) // 256
    for dtype in (np.float32, np.float32, np.float64, np.float32):
        x, y = RNG.standard_normal(n).astype(dtype), RNG.standard_normal(n).astype(dtype)
        a = dtype(RNG.uniform(-3, 3))
        out = on_device(y)
        saxpy[grid, 256](out, on_device(x), a, np.int32(n))
        kj.synchronize()
        np.testing.assert_allclose(to_host(out), a * x + y, rtol=1e-5, atol=1e-5)
    assert callable(saxpy[grid, 256]) and saxpy[grid, 256].__class__.__name__ == "function"
    if library == "torch" and dlpack_exchange.export_function(lib.Tensor) is not None:
        assert "READ(a0, a1)" in source_of(saxpy[grid, 256])  # one native read of both
    if library == "cupy" and getset_reader.readable(lib.ndarray, lib.cuda.MemoryPointer):
        assert "READ_GETSET(a0, a1)" in source_of(saxpy[grid, 256])  # through the C getters
    # unaligned (off by one element) and strided: other specializations, still right
    x = RNG.standard_normal(2 * n + 1).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    for view, expected in ((on_device(x)[1:n + 1], x[1:n + 1]), (on_device(x)[::2][:n], x[::2][:n])):
        out = on_device(y)
        saxpy[grid, 256](out, view, np.float32(2.0), np.int32(n))
        kj.synchronize()
        np.testing.assert_allclose(to_host(out), 2.0 * expected + y, rtol=1e-5, atol=1e-5)


def test_torch_tensor_changed_in_place_between_launches(cuda):
    """The same tensor object, its storage, dtype or strides changed in place: each launch
    reads what the tensor is now (the fast form caches nothing per tensor)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    saxpy = make_saxpy()
    n = int(RNG.integers(1000, 4000))
    launch = saxpy[(n + 255) // 256, 256]
    x, y = (RNG.standard_normal(n).astype(np.float32) for _ in range(2))
    tx = torch.tensor(x, device="cuda")
    out = torch.tensor(y, device="cuda")
    launch(out, tx, np.float32(2.0), np.int32(n))
    x2 = RNG.standard_normal(n).astype(np.float32)
    tx.data = torch.tensor(x2, device="cuda")  # new storage, same object
    launch(out, tx, np.float32(2.0), np.int32(n))
    kj.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), y + 2 * x + 2 * x2, rtol=1e-5, atol=1e-5)
    x64 = RNG.standard_normal(n)
    tx.data = torch.tensor(x64, device="cuda")  # another dtype: another specialization
    out64 = torch.tensor(y.astype(np.float64), device="cuda")
    launch(out64, tx, 3.0, np.int32(n))
    kj.synchronize()
    np.testing.assert_allclose(out64.cpu().numpy(), y + 3 * x64, rtol=1e-12)
    wide = RNG.standard_normal(2 * n).astype(np.float32)
    tx.data = torch.tensor(wide, device="cuda")
    tx.as_strided_((n,), (2,))  # strided in place: the general path's strides
    out = torch.tensor(y, device="cuda")
    launch(out, tx, np.float32(2.0), np.int32(n))
    kj.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), y + 2 * wide[::2], rtol=1e-5, atol=1e-5)


def test_torch_conjugate_view_is_refused_and_its_resolved_copy_runs(cuda):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")

    @kj.jit
    def copy(out, x):
        i = kj.grid(1)
        if i < x.shape[0]:
            out[i] = x[i]
    n = int(RNG.integers(100, 1000))
    z = (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(np.complex64)
    tz = torch.tensor(z, device="cuda")
    out = torch.full((n,), complex(np.nan, np.nan), dtype=torch.complex64, device="cuda")
    copy[(n + 127) // 128, 128](out, tz)
    copy[(n + 127) // 128, 128](out, tz)  # the fast form, built for a plain tensor
    with pytest.raises(TypeError, match="parameter 'x': a PyTorch tensor with its conjugate"):
        copy[(n + 127) // 128, 128](out, tz.conj())
    copy[(n + 127) // 128, 128](out, tz.conj().resolve_conj())
    kj.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), np.conj(z))


def test_constexpr_and_autotuned_kernels_launch_fast(cuda):
    def covering(a):  # 128 elements a block under either config
        return ((a["n"] + 127) // 128,)

    @kj.autotune(configs=[kj.Config(block=128, grid=covering, constants={"STEP": 1}),
                          kj.Config(block=64, grid=covering, constants={"STEP": 2})],
                 key=["n"], cache=False)
    @kj.jit
    def scaled(out, x, n, STEP: kj.constexpr):
        base = kj.grid(1) * STEP
        for k in range(STEP):
            if base + k < n:
                out[base + k] = 3 * x[base + k]
    n = int(RNG.integers(1000, 4000))
    for _ in range(3):
        x = RNG.standard_normal(n).astype(np.float32)
        out = kj.to_device(np.full(n, np.nan, np.float32))
        scaled(out, kj.to_device(x), n)
        kj.synchronize()
        np.testing.assert_allclose(out.copy_to_host(), 3 * x, rtol=1e-6)
    assert scaled._fast.entries  # the chosen config's fast form was kept
    for step in (1, 2):
        x = RNG.standard_normal(n).astype(np.float32)
        out = kj.to_device(np.full(n, np.nan, np.float32))
        grid = (n + 127) // 128
        launcher = scaled.kernel[grid, 128 // step]
        for _ in range(2):
            launcher(out, kj.to_device(x), n, step)
        kj.synchronize()
        np.testing.assert_allclose(out.copy_to_host(), 3 * x, rtol=1e-6)
        assert scaled.kernel[grid, 128 // step].__class__.__name__ == "function"
