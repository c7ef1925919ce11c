"""Host time of each part of a ``kernel[grid, block](...)`` launch, each timed on its own.

    PYTHONPATH=. python3 benchmarks/launch_parts.py [--launches 20000] [--reps 7]

Runs without a GPU: on the mock backend the driver is replaced by a native no-op (compiled
with the launch trampoline), so the figures are the Python side of a launch and the foreign
call, nothing of the driver. With a GPU (``KAIOJIT_BACKEND=cuda``) the last rows call the
real ``cuLaunchKernelEx``. The kernel is a 5-argument saxpy over 1024 float32 DeviceArrays.
Rows: the launcher's call with nothing in it (Python frames), the token check, the argument
checks, the slot writes, the trampoline call, and the whole fast launch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

N = 1024


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=7)
    opts = parser.parse_args(argv)
    if "KAIOJIT_BACKEND" not in os.environ:
        os.environ["KAIOJIT_BACKEND"] = "mock"
    import kaiojit as kj
    import kaiojit.runtime as rt
    from kaiojit.runtime import launchrecord
    from kaiojit.runtime.backend import FastLaunchBinding

    backend = rt.get_backend()
    stubbed = backend.name == "mock"
    if stubbed:
        # the driver call becomes the trampoline into a native no-op, as on the GPU
        real_binding = backend.fast_launch_binding

        def native_binding(fn, grid, block, shared_mem, stream, slots):
            b = real_binding(fn, grid, block, shared_mem, stream, slots)
            record, pointer = launchrecord.make_record(launchrecord.stub_entry(), 0, grid,
                                                       block, shared_mem, stream,
                                                       slots.params_address)
            return FastLaunchBinding(launchrecord.trampoline(), pointer, b.failed,
                                     b.thread_state, b.token, (record, slots))
        backend.fast_launch_binding = native_binding

    @kj.jit
    def saxpy(out, x, y, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    rng = np.random.default_rng()
    x = kj.to_device(rng.standard_normal(N).astype(np.float32))
    y = kj.to_device(rng.standard_normal(N).astype(np.float32))
    out = kj.device_array(N, np.float32)
    a, n = np.float32(2.0), np.int32(N)
    launcher = saxpy[N // 256, 256]
    launcher(out, x, y, a, n)
    launcher(out, x, y, a, n)
    loaded = next(iter(saxpy._launch_cache.values()))
    slots = loaded.slots.get()
    raw, f32, i64 = slots.raw, slots.f32, slots.raw.cast("q")
    tls = backend._tls
    token = tls.token
    tag = x.launch_tag
    record, pointer = launchrecord.make_record(launchrecord.stub_entry(), 0, (4, 1, 1),
                                               (256, 1, 1), 0, 0, slots.params_address)
    trampoline = launchrecord.trampoline()
    from kaiojit.runtime.memory import DeviceArray as DA

    class Empty:
        def __call__(self, *args):
            pass
    empty = Empty()

    def token_check():
        if tls.token is not token:
            raise AssertionError

    def argument_checks():
        for v in (out, x, y):
            if v.__class__ is not DA or v.launch_tag is not tag:
                raise AssertionError
        if a.__class__ is not np.float32 or n.__class__ is not np.int32:
            raise AssertionError

    def slot_writes():
        raw[0:16] = out.launch_bytes
        raw[16:32] = x.launch_bytes
        raw[32:48] = y.launch_bytes
        f32[12] = a
        i64[7] = n

    rows = [
        ("a Python call of the launcher, empty", lambda: empty(out, x, y, a, n)),
        ("device-selection token check", token_check),
        ("argument checks (3 arrays, 2 scalars)", argument_checks),
        ("slot writes", slot_writes),
        ("trampoline into a no-op (the foreign call)", lambda: trampoline(pointer)),
        ("whole fast launch" + (" (no-op driver)" if stubbed else " (real driver)"),
         lambda: launcher(out, x, y, a, n)),
    ]
    print(f"launch parts on the {backend.name} backend, median of {opts.reps} x "
          f"{opts.launches}")
    total_parts = 0.0
    for name, fn in rows:
        ns = median_ns(fn, opts.launches, opts.reps)
        if not name.startswith("whole"):
            total_parts += ns
        print(f"{name:48} {ns:8.1f} ns")
    print(f"{'sum of the parts (each with its own call frame)':48} {total_parts:8.1f} ns")
    assert launcher.fast is not None, "the launcher took no fast form"
    return 0


if __name__ == "__main__":
    sys.exit(main())
