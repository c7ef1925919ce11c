"""The runtime on a real device: PTX loading, every scalar kind, tensormaps, streams, interop,
DEBUG_SYNC faults. Skipped without CUDA."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit.errors import CudaError

from .ptx_kernels import (BAD_PTX, FAULT_PTX, SCALAR_PARAMS, TENSORMAP_ARRAY_PTX,
                          TENSORMAP_PTX, axpy_image, image, scalars_image)

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng()
POISON = 0xAB


def _random_scalars():
    values = []
    for name, *_ in SCALAR_PARAMS:
        if name == "bool":
            values.append(bool(RNG.integers(0, 2)))
        elif name.startswith(("int", "uint")):
            info = np.iinfo(name)
            values.append(int(RNG.integers(info.min, info.max, dtype=np.int64 if
                                           info.max < 2**63 else np.uint64)))
        else:
            values.append(float(np.dtype(name).type(RNG.standard_normal() * 100)))
    return values


def test_every_scalar_kind_arrives_intact(cuda):
    loaded = cuda.load_kernel(scalars_image())
    out = rt.device_array(len(SCALAR_PARAMS), np.uint64)
    for _ in range(5):
        values = _random_scalars()
        cuda.memset(out.ptr, POISON, out.nbytes)
        loaded.launch(1, 1, None, 0, [out] + values)
        raw = out.copy_to_host().tobytes()
        for k, ((name, *_), v) in enumerate(zip(SCALAR_PARAMS, values)):
            size = np.dtype(name).itemsize
            want = np.array(v, dtype=name).tobytes()
            word = raw[8 * k : 8 * k + 8]
            assert word[:size] == want, (name, v)
            assert word[size:] == bytes([POISON]) * (8 - size), name


def test_a_tensormap_between_other_arguments_arrives_intact(cuda):
    fn = rt.Module.from_ptx(TENSORMAP_PTX).get_function("tmap")
    out = rt.device_array(132, np.uint8)
    for _ in range(3):
        tm = RNG.integers(0, 256, 128, dtype=np.uint8).tobytes()
        after = int(RNG.integers(0, 2**32))
        cuda.memset(out.ptr, POISON, out.nbytes)
        fn.grid(1).block(1).arg_ptr(out).arg_tensormap(tm).arg_u32(after).launch()
        got = out.copy_to_host().tobytes()
        assert got[:128] == tm
        assert got[128:] == struct.pack("<I", after)


def test_a_real_tensormap_through_the_compiled_path(cuda):
    src = rt.to_device(RNG.standard_normal((64, 64)).astype(np.float32))
    tm = rt.TensorMap.tiled(src, box=(16, 32), swizzle="128B")
    loaded = cuda.load_kernel(image("tmap", TENSORMAP_ARRAY_PTX, "void(uint8[::1], tensormap, uint32)",
                                    "out tm after"))
    out = rt.device_array(132, np.uint8)
    cuda.memset(out.ptr, POISON, out.nbytes)
    loaded.launch(1, 1, None, 0, (out, tm, 99))
    got = out.copy_to_host().tobytes()
    assert got[:128] == tm.bytes and got[128:] == struct.pack("<I", 99)


def test_strided_array_parameters(cuda):
    loaded = cuda.load_kernel(axpy_image())
    host = RNG.standard_normal(3000).astype(np.float32)
    x = rt.to_device(host)[::3]
    out = rt.to_device(np.full(1000, np.nan, np.float32))
    a = float(RNG.standard_normal())
    loaded.launch(8, 128, None, 0, (out, x, a, 1000))
    np.testing.assert_array_equal(out.copy_to_host(), np.float32(a) * host[::3])


def test_bad_ptx_error_carries_the_jit_log(cuda):
    with pytest.raises(CudaError) as info:
        rt.Module.from_ptx(BAD_PTX)
    message = str(info.value)
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "JIT log:" in message and "frobnicate" in message
    assert "loading PTX with cuModuleLoadDataEx" in message


def test_streams_events_and_async_copies(cuda):
    loaded = cuda.load_kernel(axpy_image())
    stream = rt.Stream()
    host = RNG.standard_normal(1 << 20).astype(np.float32)
    x = rt.to_device(host, stream=stream)
    out = rt.device_array_like(x)
    start, end = rt.Event(), rt.Event()
    start.record(stream)
    for _ in range(10):
        loaded.launch(1 << 12, 256, stream, 0, (out, x, 2.0, host.size))
    end.record(stream)
    result = np.full_like(host, np.nan)
    out.copy_to_host(result, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(result, 2 * host)
    end.synchronize()
    assert start.elapsed_time(end) > 0
    # a foreign handle and the protocol both reach the same stream
    loaded.launch(1, 32, stream.handle, 0, (out, x, 1.0, 32))
    loaded.launch(1, 32, stream, 0, (out, x, 1.0, 32))
    rt.synchronize()


def test_copies_in_a_new_thread_find_the_context(cuda):
    """A thread that has made no CUDA call copies host to device, device to device and back
    (numba-cuda's test_invalid_context_error_with_d2h/d2d: the primary context is made current
    in the thread by its first copy, not an invalid-context error)."""
    import threading

    host = RNG.standard_normal(4096).astype(np.float32)
    src = rt.to_device(host)
    dst = rt.to_device(np.full_like(host, np.nan))
    got = np.full_like(host, np.nan)
    again = np.full_like(host, np.nan)
    errors = []

    def work():
        try:
            dst.copy_to_device(src)
            dst.copy_to_host(got)
            rt.to_device(host).copy_to_host(again)  # an allocation made in the thread
        except Exception as e:  # noqa: BLE001 - reported to the test's thread
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors, errors
    np.testing.assert_array_equal(got, host)
    np.testing.assert_array_equal(again, host)
    np.testing.assert_array_equal(dst.copy_to_host(), host)


def test_dynamic_shared_memory_over_48k(cuda):
    loaded = cuda.load_kernel(axpy_image())
    out = rt.device_array(32, np.float32)
    x = rt.to_device(np.ones(32, np.float32))
    loaded.launch(1, 32, None, 100 * 1024, (out, x, 3.0, 32))
    rt.synchronize()
    assert np.all(out.copy_to_host() == 3)


def test_occupancy_block_size(cuda):
    loaded = cuda.load_kernel(axpy_image())
    block = rt.suggest_block_size(loaded)
    assert 32 <= block <= 1024 and block % 32 == 0


def test_cupy_interop():
    cp = pytest.importorskip("cupy")
    previous = rt.set_backend("cuda")
    try:
        loaded = rt.get_backend().load_kernel(axpy_image())
        host = RNG.standard_normal(4096).astype(np.float32)
        x = cp.asarray(host)
        out = cp.full(2048, cp.nan, dtype=cp.float32)
        stream = cp.cuda.Stream()
        loaded.launch(16, 128, stream, 0, (out, x[::2], 1.5, 2048))
        stream.synchronize()
        np.testing.assert_array_equal(cp.asnumpy(out), np.float32(1.5) * host[::2])
        view = rt.as_device_array(x)
        assert view.ptr == x.data.ptr
        back = cp.asarray(view)
        assert back.data.ptr == view.ptr
        from_dl = cp.from_dlpack(rt.to_device(host))
        np.testing.assert_array_equal(cp.asnumpy(from_dl), host)
    finally:
        rt.set_backend(previous)


def test_torch_interop():
    torch = pytest.importorskip("torch")
    previous = rt.set_backend("cuda")
    try:
        loaded = rt.get_backend().load_kernel(axpy_image())
        x = torch.randn(64, 32, device="cuda")
        col = x[:, 5]  # strided
        out = torch.full((64,), float("nan"), device="cuda")
        stream = torch.cuda.Stream()
        torch.cuda.current_stream().synchronize()
        loaded.launch(1, 64, stream, 0, (out, col, -2.0, 64))
        stream.synchronize()
        assert torch.equal(out, -2.0 * col)
        view = rt.as_device_array(x)
        assert view.ptr == x.data_ptr() and view.shape == (64, 32)
        t = torch.from_dlpack(rt.to_device(np.arange(10, dtype=np.int32)))
        assert t.device.type == "cuda" and t.tolist() == list(range(10))
        with pytest.raises(TypeError, match=r"parameter 'out': a PyTorch tensor on the CPU"):
            loaded.launch(1, 64, None, 0, (torch.zeros(64), col, 1.0, 64))
    finally:
        rt.set_backend(previous)


def test_driver_facts(cuda):
    from kaiojit.runtime.driver import device_compute_capability, driver_version, max_ptx_version

    assert driver_version() >= 12000
    assert device_compute_capability(0) >= (7, 0)
    assert max_ptx_version() >= (8, 0)


def test_target_spec_is_the_device_under_the_driver(cuda):
    from kaiojit.runtime.driver import max_ptx_version

    spec = cuda.target_spec()
    major, minor = cuda.compute_capability(cuda.current_device())
    ptx_major, ptx_minor = max_ptx_version()
    assert (spec.kind, spec.arch) == ("nvptx", f"sm_{major}{minor}")
    assert 60 <= spec.ptx_version <= 10 * ptx_major + ptx_minor


def test_fast_launch_on_the_device(cuda):
    import kaiojit as kj

    @kj.jit
    def axpy(out, x, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + out[i]
    launcher = axpy[8, 128]
    for _ in range(4):
        n = int(RNG.integers(500, 1024))
        x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
        a = np.float32(RNG.uniform(-3, 3))
        out = rt.to_device(y)
        launcher(out, rt.to_device(x), a, np.int32(n))
        rt.synchronize()
        np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-5)
    assert launcher.fast is not None


FAULT_SCRIPT = f"""
import numpy as np, kaiojit.runtime as rt
from types import SimpleNamespace
from kaiojit import types as kt
ptx = {FAULT_PTX!r}
img = SimpleNamespace(name="store_to", ptx=ptx, signature=kt.parse_signature("void(uint64)"),
                      arg_names=("p",), static_shared_bytes=0)
loaded = rt.get_backend().load_kernel(img)
def faulty_launch_site():
    loaded.launch((2, 1), (32, 2), None, 64, (16,))
faulty_launch_site()
print("NOT RAISED")
"""


def test_debug_sync_reports_a_fault_at_its_launch():
    env = {**os.environ, "KAIOJIT_BACKEND": "cuda", "KAIOJIT_DEBUG_SYNC": "1",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", FAULT_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=120)
    assert "NOT RAISED" not in r.stdout
    assert "kaiojit.errors.CudaError: CUDA_ERROR_ILLEGAL_ADDRESS" in r.stderr, r.stderr
    assert "this fault poisons the CUDA context" in r.stderr
    assert ("kernel 'store_to', grid=(2, 1, 1), block=(32, 2, 1), shared_mem=64; "
            "KAIOJIT_DEBUG_SYNC caught this fault") in r.stderr
    assert "in faulty_launch_site" in r.stderr
