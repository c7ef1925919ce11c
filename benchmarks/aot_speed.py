"""An exported kernel against the JIT's: the same kernels, launched through ``kaiojit.aot.load``
and through ``@kj.jit``, timed side by side in one process.

    PYTHONPATH=. python3 benchmarks/aot_speed.py [--reps 30] [--block 20] [--launches 3000]
    KAIOJIT_MOCK_BACKEND=1 PYTHONPATH=. python3 benchmarks/aot_speed.py --mock

Two kernels: saxpy over 2^26 float32 (memory-bound; the JIT launches its coarse entry) and
``examples/gemm.py``'s bf16 GEMM (tensor cores, ``cp.async`` pipeline, dynamic shared memory)
at 4096^3. Each is exported with the JIT's own specialization (the signature its first launch
compiled, ``align=16`` arrays included) for the device's arch, once per cubin compiler there
is (``ptxas``; ``driver``, the CUDA driver's linker), and every exported kernel's result is
checked against the JIT kernel's before timing. Printed per kernel and path:

- GPU time a launch: CUDA events around blocks of ``--block`` launches back to back (the
  paths' blocks alternating, ``--reps`` blocks each; median), so the host's launch path does
  not show as GPU time; and, as the first version of this benchmark timed it, one launch
  between two events (host launch time included);
- host time a launch: ``perf_counter`` over ``--launches`` launches of a small problem, the
  device synchronized after (median of 5).

``--mock`` times host launches only, on the mock backend with the driver replaced by a native
no-op (as ``benchmarks/launch_parts.py``): the Python side of each path, without a GPU. On the
cpu backend the export is ``--target host`` and sizes are small: the figures say only that the
path runs. Goal on the GPU (issue 35): the exported kernel at the JIT's speed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kaiojit as kj
from kaiojit import aot

ROOT = Path(__file__).resolve().parents[1]


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


# saxpy autotuned over two block sizes, keyed on n (the grid covers 4,096 elements at 256)
tuned_saxpy = kj.autotune(configs=[kj.Config(block=(256,)), kj.Config(block=(128,))],
                          key=["n"], grid=(16,))(saxpy)


def _gemm_example():
    spec = importlib.util.spec_from_file_location("kaiojit_example_gemm",
                                                  ROOT / "examples" / "gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Row:
    """One kernel: its JIT launch and each exported path's, at a timed size and a small one."""

    def __init__(self, name: str, unit: str, work: float, jit_kernel, make_launch, big, small):
        self.name, self.unit, self.work, self.jit_kernel = name, unit, work, jit_kernel
        self.make_launch = make_launch  # (kernel, args) -> a function of no arguments
        self.big, self.small = big, small  # (args, outputs) each

    def signature(self) -> str:
        """The specialization the JIT compiled at its first launch (what an export should
        carry to be the JIT's kernel)."""
        self.make_launch(self.jit_kernel, self.big[0])()
        return str(self.jit_kernel.signatures[-1])


def _rows(gpu: bool) -> list[Row]:
    import ml_dtypes

    rng = np.random.default_rng()
    n = (1 << 26) if gpu else (1 << 16)

    def saxpy_args(n: int):
        x, y = (kj.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(2))
        out = kj.to_device(np.full(n, np.nan, np.float32))
        return (out, x, y, np.float32(rng.uniform(0.5, 2.0)), np.int32(n)), [out]

    def saxpy_launch(kernel, args):
        grid = (int(args[4]) + 255) // 256
        return lambda: kernel[grid, 256](*args)

    gemm_mod = _gemm_example()
    cfg = gemm_mod.CONFIG

    def gemm_args(size: int):
        a, b = (kj.to_device(rng.standard_normal((size, size), dtype=np.float32)
                             .astype(ml_dtypes.bfloat16)) for _ in range(2))
        c = kj.to_device(np.full((size, size), np.nan, np.float32))
        return (c, a, b), [c]

    def gemm_launch(kernel, args):
        m, nn = args[0].shape
        grid = ((nn + cfg.bn - 1) // cfg.bn, (m + cfg.bm - 1) // cfg.bm)
        return lambda: kernel[grid, cfg.threads, 0, cfg.shared_bytes](*args)

    size = 4096 if gpu else 128
    return [Row("saxpy", "GB/s", n * 12, saxpy, saxpy_launch, saxpy_args(n), saxpy_args(4096)),
            Row("bf16 GEMM (examples/gemm.py)", "TFLOP/s", 2 * size ** 3, gemm_mod.gemm_bf16,
                gemm_launch, gemm_args(size), gemm_args(128))]


def _exports(tmp: str, rows: list[Row], target: str, archs: list[str]) -> dict:
    """Path name -> (export directory, what made its cubins), one per compiler available."""
    kernels = {row.jit_kernel: [row.signature()] for row in rows}
    compilers = ["ptxas", "driver"] if target == "nvptx" else [None]
    out = {}
    for compiler in compilers:
        directory = os.path.join(tmp, compiler or "host")
        try:
            extra = {"compiler": compiler} if compiler else {}
            aot.export(directory, kernels, archs=archs, target=target, **extra)
        except Exception as e:  # noqa: BLE001 - a compiler that fails is reported, not fatal
            print(f"  (no export with compiler={compiler}: {str(e).splitlines()[0]})")
            continue
        with open(os.path.join(directory, "manifest.json")) as f:
            manifest = json.load(f)
        made = manifest.get("compiler_version") or manifest.get("host_triple", "?")
        out[f"aot/{compiler or 'host'}"] = (directory, made)
    return out


def _sass_summary(exports: dict, kernel: str) -> str:
    """Per export, the SASS instruction count of the kernel's cubins (its own entry, and its
    coarse entry's), and whether the compilers' SASS is the same instruction for
    instruction; "" without nvdisasm or cuobjdump."""
    import re

    from kaiojit.tools.sass import sass_of_cubin

    found = {}
    for k, (directory, _) in exports.items():
        with open(os.path.join(directory, "manifest.json")) as f:
            entry = next(e for e in json.load(f)["entries"] if e["kernel"] == kernel)
        files = [*entry["cubins"].values(), *entry.get("coarse_cubins", {}).values()]
        try:
            texts = [sass_of_cubin(os.path.join(directory, name)) for name in files]
        except (RuntimeError, OSError):
            return ""
        found[k] = [[re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in t.splitlines()
                     if re.search(r"/\*[0-9a-f]{4,}\*/\s+\S", line)] for t in texts]
    counts = ", ".join(f"{k} {' + '.join(str(len(i)) for i in v)}" for k, v in found.items())
    same = "identical" if len({json.dumps(v) for v in found.values()}) == 1 else "different"
    return f"SASS instructions (entry + coarse entry): {counts}; {same}"


def _gpu_ms_blocks(launches: dict, reps: int, block: int) -> dict:
    """Median ms a launch, from events around blocks of ``block`` launches, paths alternating
    block by block (the first path of each round rotating)."""
    names = list(launches)
    start, end = kj.Event(), kj.Event()
    times: dict = {k: [] for k in names}
    for r in range(reps):
        for k in names[r % len(names):] + names[:r % len(names)]:
            launch = launches[k]
            start.record()
            for _ in range(block):
                launch()
            end.record()
            end.synchronize()
            times[k].append(start.elapsed_time(end) / block)
    return {k: statistics.median(v) for k, v in times.items()}


def _gpu_ms_single(launches: dict, reps: int) -> dict:
    """Median ms of one launch between two events (host launch time included)."""
    start, end = kj.Event(), kj.Event()
    times: dict = {k: [] for k in launches}
    for _ in range(reps):
        for k, launch in launches.items():
            start.record()
            launch()
            end.record()
            end.synchronize()
            times[k].append(start.elapsed_time(end))
    return {k: statistics.median(v) for k, v in times.items()}


def _host_us(launches: dict, count: int) -> dict:
    """Median microseconds of host time a launch over ``count`` launches, synchronized after
    each round (5 rounds, paths alternating)."""
    samples: dict = {k: [] for k in launches}
    for _ in range(5):
        for k, launch in launches.items():
            kj.synchronize()
            t0 = time.perf_counter()
            for _ in range(count):
                launch()
            samples[k].append((time.perf_counter() - t0) / count * 1e6)
            kj.synchronize()
    return {k: statistics.median(v) for k, v in samples.items()}


def _mock(opts) -> None:
    """Host launch time on the mock backend (its driver a native no-op)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from launch_parts import _stub_driver

    from kaiojit.runtime.backend import set_backend
    from kaiojit.runtime.mock import MockBackend

    rows = _rows(gpu=False)
    with tempfile.TemporaryDirectory(prefix="kaiojit-aot-speed-") as tmp:
        exports = _exports(tmp, rows, "nvptx", ["sm_90"])
        mock = MockBackend(compute_capability=(9, 0))
        set_backend(mock)
        _stub_driver(mock)
        rows = _rows(gpu=False)  # arrays of the mock backend
        exports = {k: (aot.load(directory), made) for k, (directory, made) in exports.items()}
        print(f"host time a launch, mock backend (driver a native no-op), median of 5 x "
              f"{opts.launches}")
        for row in rows:
            host = _host_us(_small_launches(row, exports), opts.launches)
            print(f"  {row.name:30s} " + "  ".join(f"{k} {v:6.2f} us" for k, v in host.items()))
        # an autotuned kernel: tuned on the mock (its timer), exported, called as the tuner is
        args = rows[0].small[0]
        tuned_saxpy(*args)
        set_backend("cpu")
        tuned_dir = os.path.join(tmp, "tuned")
        aot.export(tuned_dir, {tuned_saxpy: [str(saxpy.signatures[-1])]}, archs=["sm_90"],
                   compiler="ptxas")
        set_backend(mock)
        exported = aot.load(tuned_dir).saxpy
        paths = {"jit": lambda: tuned_saxpy(*args), "aot/ptxas": lambda: exported(*args)}
        for launch in paths.values():
            launch()
        host = _host_us(paths, opts.launches)
        print(f"  {'saxpy, autotuned':30s} " + "  ".join(f"{k} {v:6.2f} us"
                                                        for k, v in host.items()))


def _small_launches(row: Row, exports: dict) -> dict:
    """Each path's launch of the row's small problem, each launched once (specialized)."""
    paths = {"jit": row.make_launch(row.jit_kernel, row.small[0])}
    for k, (mod, _) in exports.items():
        paths[k] = row.make_launch(getattr(mod, row.jit_kernel.__name__), row.small[0])
    for launch in paths.values():
        launch()
    return paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--launches", type=int, default=3000)
    ap.add_argument("--mock", action="store_true")
    opts = ap.parse_args()
    if opts.mock:
        _mock(opts)
        return
    gpu = kj.backend() == "cuda"
    backend = kj.runtime.get_backend()
    if gpu:
        major, minor = backend.compute_capability(0)
        arch, target, archs = f"sm_{major}{minor}", "nvptx", [f"sm_{major}{minor}"]
    else:
        arch, target, archs = "host", "host", []
    rows = _rows(gpu)
    with tempfile.TemporaryDirectory(prefix="kaiojit-aot-speed-") as tmp:
        made_dirs = _exports(tmp, rows, target, archs)
        exports = {k: (aot.load(directory), made) for k, (directory, made) in made_dirs.items()}
        made_by = (f"the JIT's cubins by the {backend.compiler_version()} (cuModuleLoadDataEx "
                   "on PTX)" if gpu else "host code by LLVM")
        print(f"exported kernels against the JIT's, {kj.backend()} backend ({arch}); {made_by}")
        for k, (_, made) in exports.items():
            print(f"  {k}: {'cubins by' if gpu else 'a host library for'} {made}")
        for row in rows:
            print(f"{row.name}: exported as {row.jit_kernel.signatures[-1]}")
            if gpu:
                print(f"  {_sass_summary(made_dirs, row.jit_kernel.__name__)}")
            paths = {"jit": row.make_launch(row.jit_kernel, row.big[0])}
            outs = {"jit": row.big[1]}
            for k, (mod, _) in exports.items():
                args, o = row.big
                copy = tuple(kj.to_device(np.full(a.shape, np.nan, a.dtype)) if a is o[0]
                             else a for a in args)
                paths[k] = row.make_launch(getattr(mod, row.jit_kernel.__name__), copy)
                outs[k] = [copy[0]]
            for launch in paths.values():
                launch()
            want = outs["jit"][0].copy_to_host()
            for k in exports:
                if not np.array_equal(outs[k][0].copy_to_host(), want):
                    sys.exit(f"{row.name}: {k}'s result differs from the JIT kernel's")
            blocks = _gpu_ms_blocks(paths, opts.reps, opts.block)
            single = _gpu_ms_single(paths, opts.reps)
            host = _host_us(_small_launches(row, exports), opts.launches)
            scale = 1e9 if row.unit == "GB/s" else 1e12
            for k in paths:
                ms = blocks[k]
                print(f"  {k:12s} {ms:8.4f} ms a launch in blocks of {opts.block} "
                      f"({row.work / ms / 1e-3 / scale:7.1f} {row.unit}, "
                      f"{ms / blocks['jit']:.3f}x the JIT's)  one launch {single[k]:8.4f} ms "
                      f"({single[k] / single['jit']:.3f}x)  host {host[k]:6.2f} us a launch")
            print("  (results identical)")


if __name__ == "__main__":
    main()
