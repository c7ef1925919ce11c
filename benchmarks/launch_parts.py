"""Host time of each part of a ``kernel[grid, block](...)`` launch, each timed on its own, and of
whole fast launches of each kind (DeviceArrays, constexpr, autotuned, PyTorch- and CuPy-like).

    PYTHONPATH=. python3 benchmarks/launch_parts.py [--launches 20000] [--reps 7]

Runs without a GPU: on the mock backend the driver is replaced by a native no-op (compiled
with the launch trampoline), so the figures are the Python side of a launch and the foreign
call, nothing of the driver. With a GPU (``KAIOJIT_BACKEND=cuda``) the whole-launch rows call
the real ``cuLaunchKernelEx`` (and the PyTorch/CuPy rows use real tensors where installed).
``KAIOJIT_LAUNCH`` picks the trampoline as it does for real launches. The kernel is a
5-argument saxpy over 1024 float32 arrays. Part rows: the call of a plain 5-argument Python
function with nothing in it, the token check, the argument checks (one ``if``), the slot writes
(one ``pack_into``), the trampoline call; then the whole launches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import time
from collections.abc import Callable

import numpy as np

N = 1024
BLOCK = 256
GRID = N // BLOCK


def median_ns(fn: Callable[[], None], launches: int, reps: int) -> float:
    for _ in range(200):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        samples.append((time.perf_counter() - start) / launches)
    return statistics.median(samples) * 1e9


def _stub_driver(backend) -> None:
    """On the mock backend: every fast launch calls a native no-op instead of recording."""
    from kaiojit.runtime.backend import FastLaunchBinding
    from kaiojit.runtime.native import launchrecord

    real_binding = backend.fast_launch_binding
    mode = getattr(backend, "launch_mode", "ex")

    def native_binding(fn, grid, block, shared_mem, stream, slots):
        b = real_binding(fn, grid, block, shared_mem, stream, slots)
        record, pointer = launchrecord.make_record(launchrecord.stub_entry(), 0, grid,
                                                   block, shared_mem, stream,
                                                   slots.params_address)
        if mode == "native":
            call, pointer = launchrecord.native_launcher(record, slots), None
        else:
            call = launchrecord.trampoline()
        return FastLaunchBinding(call, pointer, b.failed, b.thread_state, b.token,
                                 (record, slots))
    backend.fast_launch_binding = native_binding


# --- stand-ins for PyTorch tensors and CuPy arrays over DeviceArrays (no GPU needed) ----------

class _TorchDtype:
    def __str__(self) -> str:
        return "torch.float32"


class Tensor:
    """What kaiojit reads of a ``torch.Tensor``."""

    dtype = _TorchDtype()

    def __init__(self, array):
        self.array = array

    def get_device(self) -> int:
        return self.array.device_id

    def is_contiguous(self) -> bool:
        return True

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def data_ptr(self) -> int:
        return self.array.ptr

    @property
    def shape(self) -> tuple:
        return self.array.shape

    def stride(self) -> tuple:
        return (1,)


Tensor.__module__ = "torch.fake"  # kaiojit's interop reads torch.Tensor by module and name


class _CupyMemory:
    def __init__(self, ptr: int, device_id: int):
        self.ptr, self.device_id = ptr, device_id


class ndarray:  # CuPy's class name, which kaiojit's interop reads
    """What kaiojit reads of a ``cupy.ndarray``."""

    def __init__(self, array):
        self.dtype, self.shape, self.strides = array.dtype, array.shape, array.strides
        self.data = _CupyMemory(array.ptr, array.device_id)
        self._c_contiguous = True
        self.array = array
        self.ndim, self.size = len(array.shape), array.size


ndarray.__module__ = "cupy.fake"


def _foreign_arrays(kind: str, kj, out, x, y):
    if kind == "torch":
        try:
            import torch

            if kj.backend() == "cuda" and torch.cuda.is_available():
                return tuple(torch.randn(N, device="cuda") for _ in range(3))
        except ImportError:
            pass
        return Tensor(out), Tensor(x), Tensor(y)
    try:
        import cupy

        if kj.backend() == "cuda":
            return tuple(cupy.random.standard_normal(N, dtype=cupy.float32) for _ in range(3))
        return tuple(_host_cupy(cupy, a) for a in (out, x, y))
    except ImportError:
        pass
    return ndarray(out), ndarray(x), ndarray(y)


def _host_cupy(cupy, array):
    """A real ``cupy.ndarray`` over the mock backend's (host) memory of ``array``: CuPy imports
    and builds arrays over unowned memory without a GPU, so its attribute reads are timed as
    they are on one."""
    from cupy.cuda import memory

    mem = memory.UnownedMemory(array.ptr, array.size * 4, array, device_id=array.device_id)
    return cupy.ndarray(array.shape, dtype=np.float32, memptr=memory.MemoryPointer(mem, 0))


def _foreign_reads(kind: str, v) -> Callable[[], None]:
    """The attribute reads and calls the fast form's guard and packing make of one array
    (``kaiojit/runtime/native/fastlaunch.py``): for PyTorch five calls into its bindings."""
    if kind == "torch":
        def reads():
            v.__class__, v.dtype, v.get_device(), v.is_contiguous(), v.shape, v.data_ptr()
    else:
        def reads():  # the attribute reads are what is timed
            _ = v.__class__, v.dtype, v._c_contiguous, v.data.device_id, v.ndim, v.size, v.data.ptr
    return reads


def _exchange_reader(kind: str, v) -> Callable[..., bool] | None:
    """The native reader the fast form calls for three such arrays, where their class
    publishes DLPack's C exchange API (``torch.Tensor`` in PyTorch 2.11,
    ``kaiojit/runtime/native/dlpack_exchange.py``) or, for CuPy, where its attributes are C getters
    (``kaiojit/runtime/native/getset_reader.py``), writing into a scratch buffer."""
    import ctypes

    from kaiojit.runtime.interop import array_extractor
    from kaiojit.runtime.native import dlpack_exchange as dx
    from kaiojit.runtime.native import getset_reader as gr

    _, _, _, t, device = array_extractor(type(v))(v)
    scratch = ctypes.create_string_buffer(64)
    if kind == "cupy" and gr.readable(type(v), type(v.data)):
        reads = [gr.ArrayRead(type(v), type(v.data), v.dtype, 1, t.dtype, bool(t.align), 16 * k)
                 for k in range(3)]
        read = gr.reader(reads, ctypes.addressof(scratch), device, scratch)
        if not read(v, v, v):
            raise AssertionError("the native reader refused the benchmark's arrays")
        return read
    if dx.export_function(type(v)) is None:
        return None
    reads = [dx.ArrayRead(type(v), 1, t.dtype, bool(t.align), 16 * k) for k in range(3)]
    read = dx.reader(reads, ctypes.addressof(scratch), device, scratch)
    if not read(v, v, v):
        raise AssertionError("the native reader refused the benchmark's tensors")
    return read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=7)
    opts = parser.parse_args(argv)
    if "KAIOJIT_BACKEND" not in os.environ:
        os.environ["KAIOJIT_BACKEND"] = "mock"
        os.environ["KAIOJIT_MOCK_BACKEND"] = "1"  # the mock backend, on purpose
    import kaiojit as kj
    import kaiojit.runtime as rt
    from kaiojit.runtime.native import launchrecord

    backend = rt.get_backend()
    stubbed = backend.name == "mock"
    if stubbed:
        _stub_driver(backend)

    @kj.jit
    def saxpy(out, x, y, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    @kj.jit
    def saxpy_constexpr(out, x, y, a, n, UNROLL: kj.constexpr):
        i = kj.grid(1) * UNROLL
        if i < n:
            out[i] = a * x[i] + y[i]

    @kj.autotune(configs=[kj.Config(block=BLOCK, constants={"UNROLL": 1}),
                          kj.Config(block=BLOCK // 2, constants={"UNROLL": 1})],
                 key=["n"], grid=lambda args: (args["n"] // BLOCK,), cache=False,
                 timer=lambda run, config, stream: float(config.block))
    @kj.jit
    def saxpy_tuned(out, x, y, a, n, UNROLL: kj.constexpr):
        i = kj.grid(1) * UNROLL
        if i < n:
            out[i] = a * x[i] + y[i]

    rng = np.random.default_rng()
    x = kj.to_device(rng.standard_normal(N).astype(np.float32))
    y = kj.to_device(rng.standard_normal(N).astype(np.float32))
    out = kj.device_array(N, np.float32)
    a, n = np.float32(2.0), np.int32(N)
    launcher = saxpy[GRID, BLOCK]
    launcher(out, x, y, a, n)
    launcher(out, x, y, a, n)
    loaded = next(iter(saxpy._launch_cache.values()))
    slots = loaded.slots.get()
    tls = backend._tls
    token = tls.token
    tag = x.launch_tag
    pack = struct.Struct("<16s16s16sf4xq").pack_into
    buf = slots.raw
    record, pointer = launchrecord.make_record(launchrecord.stub_entry(), 0, (GRID, 1, 1),
                                               (BLOCK, 1, 1), 0, 0, slots.params_address)
    trampoline = launchrecord.trampoline()
    native = getattr(launchrecord, "native_launcher", None)
    native_call = native(record, slots) if native is not None else None

    def empty(*args):
        pass

    def token_check():
        if tls.token is not token:
            raise AssertionError

    def argument_checks():
        if not (out.launch_tag is tag and x.launch_tag is tag and y.launch_tag is tag
                and a.__class__ is np.float32 and n.__class__ is np.int32):
            raise AssertionError

    def slot_writes():
        pack(buf, 0, out.launch_bytes, x.launch_bytes, y.launch_bytes, a, n)

    parts = [
        ("a call of a plain Python function, empty", lambda: empty(out, x, y, a, n)),
        ("device-selection token check", token_check),
        ("argument checks (one if: 3 arrays, 2 scalars)", argument_checks),
        ("slot writes (one pack_into)", slot_writes),
        ("ctypes trampoline into a no-op", lambda: trampoline(pointer)),
    ]
    if native_call is not None:
        parts.append(("native (builtin) trampoline into a no-op", native_call))

    driver = "no-op driver" if stubbed else "real driver"
    wholes: list[tuple[str, Callable[[], None]]] = [
        (f"whole fast launch, launcher kept ({driver})", lambda: launcher(out, x, y, a, n)),
        ("whole, saxpy[grid, block](...) each time", lambda: saxpy[GRID, BLOCK](out, x, y, a, n)),
        ("whole, kj.constexpr kernel", lambda: saxpy_constexpr[GRID, BLOCK](out, x, y, a, n, 1)),
        ("whole, kj.autotune'd kernel", lambda: saxpy_tuned(out, x, y, a, n)),
    ]
    for kind in ("torch", "cupy"):
        fo, fx, fy = _foreign_arrays(kind, kj, out, x, y)
        parts.append((f"{kind}: what the fast form reads of one array "
                      f"({type(fo).__module__})", _foreign_reads(kind, fx)))
        reader = _exchange_reader(kind, fo)
        if reader is not None:
            how = "C getters" if kind == "cupy" else "DLPack exchange"
            parts.append((f"{kind}: the native read of the three ({how})",
                          lambda fo=fo, fx=fx, fy=fy, reader=reader: reader(fo, fx, fy)))
        wholes.append((f"whole, {kind} arrays ({type(fo).__module__})",
                       lambda fo=fo, fx=fx, fy=fy: saxpy[GRID, BLOCK](fo, fx, fy, a, n)))
    wholes.append(("general path (LoadedKernel.launch)",
                   lambda: loaded.launch(GRID, BLOCK, None, 0, (out, x, y, a, n))))

    print(f"launch parts on the {backend.name} backend "
          f"(KAIOJIT_LAUNCH={getattr(backend, 'launch_mode', '?')}), median of {opts.reps} x "
          f"{opts.launches}")
    total_parts = 0.0
    for name, fn in parts:
        ns = median_ns(fn, opts.launches, opts.reps)
        foreign = name.startswith(("torch:", "cupy:"))  # not part of the DeviceArray launch
        if not foreign and (not name.startswith("ctypes") or native_call is None):
            total_parts += ns
        print(f"{name:52} {ns:8.1f} ns")
    print(f"{'sum of the parts (each with its own call frame)':52} {total_parts:8.1f} ns")
    for name, fn in wholes:
        fn()
        fn()
        ns = median_ns(fn, opts.launches, opts.reps)
        print(f"{name:52} {ns:8.1f} ns")
    fast = getattr(launcher, "fast", None)
    assert fast is not None, "the launcher took no fast form"
    return 0


if __name__ == "__main__":
    sys.exit(main())
