"""Host time per launch of a tiny 5-argument kernel, kaiojit against raw and other launchers.

    PYTHONPATH=. python3 benchmarks/launch_overhead.py [--launches 5000] [--reps 7]

Each row times ``launches`` back-to-back launches with ``time.perf_counter`` (the device is
synchronized between repetitions, outside the timing) and reports the median over ``reps``
repetitions, per launch, and its ratio to the raw ``driver.cuLaunchKernel`` with prepacked
arguments. The kernel is ``out[i] = a * x[i] + y[i]`` on 1024 float32 elements. Rows whose
library is missing are listed as skipped with the reason. To add a row, add a function to
``ROWS`` that returns a zero-argument launch callable.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

N = 1024
BLOCK = 256
GRID = N // BLOCK
A = 2.0

# saxpy(out: float32[::1], x: float32[::1], y: float32[::1], a: float32, n: int32):
# the parameters kaiojit gives that signature (a C-contiguous 1-D array is a pointer and a length).
SAXPY_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry saxpy(
.param .u64 out, .param .s64 out_n,
.param .u64 x, .param .s64 x_n,
.param .u64 y, .param .s64 y_n,
.param .f32 a, .param .s32 n
)
{
.reg .pred %p;
.reg .b32 %r<6>;
.reg .b64 %rd<12>;
.reg .f32 %f<5>;
mov.u32 %r1, %ctaid.x;
mov.u32 %r2, %ntid.x;
mov.u32 %r3, %tid.x;
mad.lo.s32 %r4, %r1, %r2, %r3;
ld.param.s32 %r5, [n];
setp.ge.s32 %p, %r4, %r5;
@%p bra DONE;
mul.wide.s32 %rd1, %r4, 4;
ld.param.u64 %rd2, [x];
cvta.to.global.u64 %rd2, %rd2;
add.s64 %rd3, %rd2, %rd1;
ld.global.f32 %f1, [%rd3];
ld.param.u64 %rd4, [y];
cvta.to.global.u64 %rd4, %rd4;
add.s64 %rd5, %rd4, %rd1;
ld.global.f32 %f2, [%rd5];
ld.param.f32 %f3, [a];
fma.rn.f32 %f4, %f3, %f1, %f2;
ld.param.u64 %rd6, [out];
cvta.to.global.u64 %rd6, %rd6;
add.s64 %rd7, %rd6, %rd1;
st.global.f32 [%rd7], %f4;
DONE:
ret;
}
"""
SIGNATURE = "void(float32[::1], float32[::1], float32[::1], float32, int32)"

CUDA_C = r"""
extern "C" __global__ void saxpy(float* out, const float* x, const float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


def _image() -> SimpleNamespace:
    from kaiojit import types as kt

    return SimpleNamespace(name="saxpy", ptx=SAXPY_PTX, signature=kt.parse_signature(SIGNATURE),
                           arg_names=("out", "x", "y", "a", "n"), static_shared_bytes=0)


def _kj_arrays():
    import kaiojit.runtime as rt

    rng = np.random.default_rng(0)
    x = rt.to_device(rng.standard_normal(N).astype(np.float32))
    y = rt.to_device(rng.standard_normal(N).astype(np.float32))
    return rt.device_array(N, np.float32), x, y


def row_raw() -> Callable[[], None]:
    """``driver.cuLaunchKernel`` with the parameters packed once, outside the loop."""
    import kaiojit.runtime as rt
    from cuda.bindings import driver
    from kaiojit.runtime.args import ArgPacker

    loaded = rt.get_backend().load_kernel(_image())
    fn = loaded.on_device(0).fn.obj
    out, x, y = _kj_arrays()
    packer = ArgPacker(loaded.packer.arg_types, loaded.packer.arg_names)
    from kaiojit.runtime.slots import ArgSlots

    slots = ArgSlots(packer.layout)
    packer.pack(slots, (out, x, y, A, N), 0)
    params = slots.params_address
    stream = driver.CUstream(0)

    def launch() -> None:
        driver.cuLaunchKernel(fn, GRID, 1, 1, BLOCK, 1, 1, 0, stream, params, 0)
    launch._keep = (slots, out, x, y)  # type: ignore[attr-defined]
    return launch


def row_ctypes_raw() -> Callable[[], None]:
    """The driver entry point kaiojit calls (ctypes, via cuGetProcAddress), prepacked."""
    import kaiojit.runtime as rt

    backend = rt.get_backend()
    loaded = backend.load_kernel(_image())
    handle = loaded.on_device(0).fn.handle
    arrays = _kj_arrays()
    slots = loaded.slots.get()
    loaded.packer.pack(slots, (*arrays, A, N), 0)
    params, entry = slots.params_pointer, backend._launch
    fn = ctypes.c_void_p(handle)

    def launch() -> None:
        entry(fn, GRID, 1, 1, BLOCK, 1, 1, 0, None, params, None)
    launch._keep = arrays  # type: ignore[attr-defined]
    return launch


def row_kaiojit_loaded() -> Callable[[], None]:
    """kaiojit's LoadedKernel.launch (what @kj.jit calls), DeviceArray arguments."""
    import kaiojit.runtime as rt

    loaded = rt.get_backend().load_kernel(_image())
    args = (*_kj_arrays(), A, N)
    return lambda: loaded.launch(GRID, BLOCK, None, 0, args)


def row_kaiojit_loaded_bindings() -> Callable[[], None]:
    """As above, with the driver called through cuda.bindings (KAIOJIT_LAUNCH=bindings)."""
    import kaiojit.runtime as rt

    backend = rt.get_backend()
    loaded = backend.load_kernel(_image())
    args = (*_kj_arrays(), A, N)

    def launch() -> None:
        loaded.launch(GRID, BLOCK, None, 0, args)

    def switched() -> None:
        backend.launch_through_bindings = True
        try:
            launch()
        finally:
            backend.launch_through_bindings = False
    return switched


def row_kaiojit_builder() -> Callable[[], None]:
    """kaiojit's launch builder over user PTX, building the launch each time."""
    import kaiojit.runtime as rt

    fn = rt.Module.from_ptx(SAXPY_PTX).get_function("saxpy")
    out, x, y = _kj_arrays()

    def launch() -> None:
        (fn.grid(GRID).block(BLOCK).arg_ptr(out.ptr).arg_i64(N).arg_ptr(x.ptr).arg_i64(N)
           .arg_ptr(y.ptr).arg_i64(N).arg_f32(A).arg_i32(N).launch())
    return launch


def row_kaiojit_jit() -> Callable[[], None]:
    """``@kj.jit`` end to end (once the compiler exists)."""
    import kaiojit as kj

    jit = getattr(kj, "jit", None)
    if jit is None:
        raise ImportError("kaiojit.jit is not available yet")

    @jit
    def saxpy(out, x, y, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    out, x, y = _kj_arrays()
    a, n = np.float32(A), np.int32(N)
    launcher = saxpy[GRID, BLOCK]
    launcher(out, x, y, a, n)
    launcher(out, x, y, a, n)
    return lambda: saxpy[GRID, BLOCK](out, x, y, a, n)


def _jit_saxpy_launches(out, x, y) -> Callable[[], None]:
    """``saxpy[GRID, BLOCK](...)`` of a fresh ``@kj.jit`` kernel over these arrays (any kind a
    user passes), warmed up: the launch as a user writes it each time."""
    import kaiojit as kj

    @kj.jit
    def saxpy(out, x, y, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    a, n = np.float32(A), np.int32(N)
    launcher = saxpy[GRID, BLOCK]
    launcher(out, x, y, a, n)
    launcher(out, x, y, a, n)
    return lambda: saxpy[GRID, BLOCK](out, x, y, a, n)


def row_kaiojit_torch() -> Callable[[], None]:
    """``@kj.jit`` with PyTorch tensors as the array arguments (as a PyTorch user launches)."""
    import torch

    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    out = torch.empty(N, device="cuda")
    torch.cuda.synchronize()
    return _jit_saxpy_launches(out, x, y)


def row_kaiojit_torch_loaded() -> Callable[[], None]:
    """kaiojit's LoadedKernel.launch (the general path) with PyTorch tensors."""
    import kaiojit.runtime as rt
    import torch

    loaded = rt.get_backend().load_kernel(_image())
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    out = torch.empty(N, device="cuda")
    torch.cuda.synchronize()
    args = (out, x, y, A, N)
    return lambda: loaded.launch(GRID, BLOCK, None, 0, args)


def row_kaiojit_cupy() -> Callable[[], None]:
    """``@kj.jit`` with CuPy arrays as the array arguments (as a CuPy user launches)."""
    import cupy as cp

    x = cp.random.standard_normal(N, dtype=cp.float32)
    y = cp.random.standard_normal(N, dtype=cp.float32)
    out = cp.empty(N, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    return _jit_saxpy_launches(out, x, y)


def _saxpy_unrolled():
    """The saxpy of the constexpr and autotuned rows, ``UNROLL`` a ``kj.constexpr``."""
    import kaiojit as kj

    def saxpy(out, x, y, a, n, UNROLL: kj.constexpr):
        i = kj.grid(1) * UNROLL
        if i < n:
            out[i] = a * x[i] + y[i]
    return saxpy


def row_kaiojit_constexpr() -> Callable[[], None]:
    """``@kj.jit`` with a ``kj.constexpr`` parameter (one specialization per value)."""
    import kaiojit as kj

    saxpy = kj.jit(_saxpy_unrolled())
    out, x, y = _kj_arrays()
    a, n = np.float32(A), np.int32(N)
    saxpy[GRID, BLOCK](out, x, y, a, n, 1)
    return lambda: saxpy[GRID, BLOCK](out, x, y, a, n, 1)


def row_kaiojit_autotuned() -> Callable[[], None]:
    """``kj.autotune``'d ``@kj.jit`` kernel, the chosen config launched (grid a function)."""
    import kaiojit as kj

    saxpy = kj.autotune(configs=[kj.Config(block=b, grid=lambda args, b=b: (args["n"] // b,),
                                           constants={"UNROLL": 1}) for b in (BLOCK, BLOCK // 2)],
                        key=["n"], cache=False)(kj.jit(_saxpy_unrolled()))

    out, x, y = _kj_arrays()
    a, n = np.float32(A), np.int32(N)
    saxpy(out, x, y, a, n)
    return lambda: saxpy(out, x, y, a, n)


def row_cupy() -> Callable[[], None]:
    """CuPy RawKernel with CuPy arrays."""
    import cupy as cp

    kernel = cp.RawKernel(CUDA_C, "saxpy")
    x = cp.random.standard_normal(N, dtype=cp.float32)
    y = cp.random.standard_normal(N, dtype=cp.float32)
    out = cp.empty(N, dtype=cp.float32)
    args = (out, x, y, np.float32(A), np.int32(N))
    kernel((GRID,), (BLOCK,), args)
    return lambda: kernel((GRID,), (BLOCK,), args)


def row_numba() -> Callable[[], None]:
    """numba-cuda ``@cuda.jit`` with numba device arrays."""
    from numba import cuda

    @cuda.jit
    def saxpy(out, x, y, a, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    rng = np.random.default_rng(0)
    x = cuda.to_device(rng.standard_normal(N).astype(np.float32))
    y = cuda.to_device(rng.standard_normal(N).astype(np.float32))
    out = cuda.device_array(N, np.float32)
    a, n = np.float32(A), np.int32(N)
    launcher = saxpy[GRID, BLOCK]
    launcher(out, x, y, a, n)
    return lambda: launcher(out, x, y, a, n)


def row_triton() -> Callable[[], None]:
    """Triton ``@triton.jit`` with PyTorch tensors."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def saxpy(out, x, y, a, n, BLOCK_SIZE: tl.constexpr):
        i = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = i < n
        tl.store(out + i, a * tl.load(x + i, mask=mask) + tl.load(y + i, mask=mask), mask=mask)

    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    out = torch.empty(N, device="cuda")
    grid = (GRID,)
    saxpy[grid](out, x, y, A, N, BLOCK_SIZE=BLOCK)
    return lambda: saxpy[grid](out, x, y, A, N, BLOCK_SIZE=BLOCK)


ROWS: list[tuple[str, Callable[[], Callable[[], None]]]] = [
    ("raw cuLaunchKernel (prepacked)", row_raw),
    ("ctypes cuLaunchKernel (prepacked)", row_ctypes_raw),
    ("kaiojit LoadedKernel.launch", row_kaiojit_loaded),
    ("kaiojit LoadedKernel, bindings call", row_kaiojit_loaded_bindings),
    ("kaiojit @kj.jit", row_kaiojit_jit),
    ("kaiojit builder (Module)", row_kaiojit_builder),
    ("kaiojit @kj.jit, kj.constexpr", row_kaiojit_constexpr),
    ("kaiojit kj.autotune'd @kj.jit", row_kaiojit_autotuned),
    ("kaiojit @kj.jit, PyTorch tensors", row_kaiojit_torch),
    ("kaiojit LoadedKernel, PyTorch", row_kaiojit_torch_loaded),
    ("kaiojit @kj.jit, CuPy arrays", row_kaiojit_cupy),
    ("CuPy RawKernel", row_cupy),
    ("numba-cuda", row_numba),
    ("Triton", row_triton),
]


def _sync() -> None:
    import kaiojit.runtime as rt

    rt.synchronize()


def time_launches(launch: Callable[[], None], launches: int, reps: int) -> float:
    """Median host seconds per launch."""
    return statistics.median(time_reps(launch, launches, reps))


def time_reps(launch: Callable[[], None], launches: int, reps: int) -> list[float]:
    """Host seconds per launch of each repetition."""
    for _ in range(200):
        launch()
    _sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(launches):
            launch()
        samples.append((time.perf_counter() - start) / launches)
        _sync()
    return samples


def paired_ratios(launchers: dict[str, Callable[[], None]], launches: int, reps: int
                  ) -> dict[str, list[float]]:
    """Per repetition, each launcher's time over the raw call's, the rows interleaved within
    the repetition so a slow stretch of the shared host hits them alike."""
    ratios: dict[str, list[float]] = {name: [] for name in launchers}
    raw = launchers["raw"]
    for _ in range(reps):
        base = time_reps(raw, launches, 1)[0]
        for name, launch in launchers.items():
            ratios[name].append(time_reps(launch, launches, 1)[0] / base)
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--paired-reps", type=int, default=9,
                        help="repetitions of the interleaved ratio measurement")
    opts = parser.parse_args(argv)

    import kaiojit.runtime as rt

    if not rt.is_cuda_available() or rt.backend() != "cuda":
        print("launch_overhead needs the cuda backend (a GPU)", file=sys.stderr)
        return 1
    results: list[tuple[str, float | None, str]] = []
    for name, make in ROWS:
        try:
            launch = make()
            seconds = time_launches(launch, opts.launches, opts.reps)
            results.append((name, seconds, ""))
        except Exception as e:  # a missing library or an unready path: the row is skipped
            results.append((name, None, f"{type(e).__name__}: {str(e).splitlines()[0][:70]}"))
    paired = {}
    for key, make in (("raw", row_raw), ("@kj.jit DeviceArrays", row_kaiojit_jit),
                      ("@kj.jit PyTorch", row_kaiojit_torch), ("@kj.jit CuPy", row_kaiojit_cupy),
                      ("@kj.jit constexpr", row_kaiojit_constexpr),
                      ("kj.autotune", row_kaiojit_autotuned), ("CuPy RawKernel", row_cupy)):
        try:
            paired[key] = make()
        except Exception as e:  # noqa: BLE001 - a missing peer
            print(f"(paired: {key} skipped: {type(e).__name__})")
    ratios = paired_ratios(paired, 1000, opts.paired_reps)
    print(f"KAIOJIT_LAUNCH={getattr(rt.get_backend(), 'launch_mode', '?')}")
    print(f"ratio to raw cuLaunchKernel, each repetition 1000 launches of raw then of the row "
          f"({opts.paired_reps} repetitions)")
    for name, rs in ratios.items():
        if name == "raw":
            continue
        per_run = " ".join(f"{r:.2f}" for r in rs)
        print(f"RATIO {name:24} median {statistics.median(rs):.3f}x  max {max(rs):.3f}x  "
              f"[{per_run}]")
    raw = results[0][1]
    print(f"host time per launch, median of {opts.reps} x {opts.launches} launches")
    print(f"{'launcher':34} {'us/launch':>10} {'x raw':>7}")
    for name, seconds, why in results:
        if seconds is None:
            print(f"{name:34} {'skipped':>10} {'':>7}  ({why})")
        else:
            ratio = f"{seconds / raw:.2f}" if raw else "-"
            print(f"{name:34} {seconds * 1e6:10.2f} {ratio:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
