"""kaiojit's RMSNorm custom op (``examples/torch_op.py``) against the same op written in Triton
and registered with ``torch.library.triton_op``, and PyTorch eager; a CUDA graph of 100
kaiojit launches against the same graph of raw ``cuLaunchKernel`` calls.

    PYTHONPATH=. python3 benchmarks/torch_op.py [--calls 2000] [--reps 7] [--backend inductor]

Rows, in one run (each result checked against ``torch.nn.functional.rms_norm`` first):

- *call*: host time of one call of a ``torch.compile(fullgraph=True)``d function that calls
  the op once on a (4, 64) float32 tensor, timed with ``time.perf_counter`` over ``calls``
  calls (the device synchronized before and after, so the figure includes the launch queue's
  back-pressure only when the GPU cannot keep up); median over ``reps`` repetitions. Eager:
  ``rms_norm`` called directly. Target on the H200: kaiojit at most 0.5x Triton's.
- *op*: the op on (8192, 4096) float32, eight input buffers in turn so L2 does not serve them;
  CUDA events, median of ``reps`` x 50 calls; on the cpu backend ``perf_counter``. Target: at
  least as fast as Triton's, faster than eager.
- *graph*: replay of a CUDA graph of 100 launches of the op's forward kernel on (512, 1024),
  captured with ``kj.CudaGraph``, against a graph of 100 ``driver.cuLaunchKernel`` calls of the
  same function with prepacked parameters; CUDA events, median. Target: within 5% of raw.

Rows that need what the machine lacks (a GPU, Triton) are listed as skipped with the reason.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

import kaiojit as kj

ROOT = Path(__file__).resolve().parents[1]
SMALL, LARGE, GRAPH = (4, 64), (8192, 4096), (512, 1024)
EPS = 1e-6


def _example():
    spec = importlib.util.spec_from_file_location("torch_op_example",
                                                  ROOT / "examples" / "torch_op.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _triton_op() -> Callable:
    """The same forward as a Triton kernel, a ``torch.library.triton_op``."""
    import triton
    import triton.language as tl

    @triton.jit
    def rms_forward(y, rstd, x, w, eps, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x + row * n + cols, mask=mask, other=0.0)
        r = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / n + eps)
        tl.store(rstd + row, r)
        g = tl.load(w + cols, mask=mask, other=0.0)
        tl.store(y + row * n + cols, v * r * g, mask=mask)

    @torch.library.triton_op("kaiojit_bench::triton_rmsnorm", mutates_args={})
    def triton_rmsnorm(x: torch.Tensor, w: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        n = x.shape[-1]
        rows = x.numel() // n
        y, rstd = torch.empty_like(x), x.new_empty(rows)
        torch.library.wrap_triton(rms_forward)[(rows,)](
            y, rstd, x.contiguous(), w, eps, n, BLOCK=triton.next_power_of_2(n))
        return y, rstd
    return triton_rmsnorm


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _call_time(fn: Callable, x, w, calls: int, reps: int, device: str) -> float:
    """Median host microseconds per call."""
    fn(x, w)
    times = []
    for _ in range(reps):
        _sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn(x, w)
        _sync(device)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def _op_time(fn: Callable, xs, w, reps: int, device: str) -> float:
    """Median milliseconds per call over input buffers in turn."""
    per_rep = 50
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(per_rep):
                fn(xs[i % len(xs)], w)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / per_rep)
        else:
            begin = time.perf_counter()
            for i in range(per_rep // 10):
                fn(xs[i % len(xs)], w)
            times.append((time.perf_counter() - begin) / (per_rep // 10) * 1e3)
    return statistics.median(times)


def _checked(name: str, fn: Callable, x, w) -> Callable:
    expect = torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS)
    torch.testing.assert_close(fn(x, w), expect, rtol=1e-4, atol=1e-4, msg=f"{name} is wrong")
    return fn


def _graph_rows(ex, reps: int) -> list[tuple[str, float, str]]:
    """Replay of 100 captured launches: kj.CudaGraph against raw cuLaunchKernel."""
    from cuda.bindings import driver

    from kaiojit.runtime.driver import check
    from kaiojit.runtime.slots import ArgSlots

    rows, n = GRAPH
    x, w = torch.randn(GRAPH, device="cuda"), torch.randn(n, device="cuda")
    y, rstd = torch.empty_like(x), x.new_empty(rows)
    stream = kj.Stream()
    kernel, block = ex.rmsnorm_forward_kernel, ex.BLOCK
    kernel[rows, block, stream](y, rstd, x, w, EPS, n)  # warm-up: compile, load
    stream.synchronize()
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (n,), w, EPS))
    g = kj.CudaGraph()
    with g.capture(stream):
        for _ in range(100):
            kernel[rows, block, stream](y, rstd, x, w, EPS, n)

    backend = kj.runtime.get_backend()
    sig = kernel.signatures[0]
    loaded = backend.load_kernel(kernel.compile(sig, backend.target_spec()))
    fn = loaded.on_device(0).fn.obj
    slots = ArgSlots(loaded.packer.layout)
    loaded.packer.pack(slots, (y, rstd, x, w, EPS, n), 0)
    raw_stream = driver.CUstream(stream.handle)
    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    check(driver.cuStreamBeginCapture(raw_stream, mode))
    for _ in range(100):
        check(driver.cuLaunchKernel(fn, rows, 1, 1, block, 1, 1, 0, raw_stream,
                                    slots.params_address, 0))
    raw_graph = check(driver.cuStreamEndCapture(raw_stream))
    raw_exec = check(driver.cuGraphInstantiate(raw_graph, 0))

    def replay_time(replay: Callable[[], None]) -> float:
        start, end = kj.Event(), kj.Event()
        times = []
        for _ in range(reps):
            replay()
            start.record(stream)
            for _ in range(10):
                replay()
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end) / 10 * 1e3)
        return statistics.median(times)

    kj_us = replay_time(g.replay)
    raw_us = replay_time(lambda: check(driver.cuGraphLaunch(raw_exec, raw_stream)))
    return [("graph of 100 launches: kj.CudaGraph", kj_us, "us/replay"),
            ("graph of 100 launches: raw cuLaunchKernel", raw_us, "us/replay")]


def main(argv: list[str] | None = None) -> list[tuple[str, float, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    args = parser.parse_args(argv)
    ex = _example()
    device = "cuda" if kj.backend() == "cuda" else "cpu"
    ops: dict[str, Callable] = {
        "kaiojit op": lambda x, w: ex.rmsnorm(x, w, EPS)[0],
        "eager": lambda x, w: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS),
    }
    skipped = []
    try:
        triton_rmsnorm = _triton_op()
        if device != "cuda":
            raise RuntimeError("Triton kernels need a GPU")
        ops["Triton op"] = lambda x, w: triton_rmsnorm(x, w, EPS)[0]
    except Exception as e:  # noqa: BLE001 - a missing peer is a skipped row
        skipped.append(f"Triton op: {type(e).__name__}: {e}")

    results: list[tuple[str, float, str]] = []
    x, w = torch.randn(SMALL, device=device), torch.randn(SMALL[1], device=device)
    for name, op in ops.items():
        fn = op if name == "eager" else torch.compile(op, backend=args.backend,
                                                        fullgraph=True)
        _checked(name, fn, x, w)
        label = "eager call" if name == "eager" else f"{name} call under torch.compile"
        results.append((label, _call_time(fn, x, w, args.calls, args.reps, device), "us/call"))
    xs = [torch.randn(LARGE, device=device) for _ in range(8 if device == "cuda" else 2)]
    w = torch.randn(LARGE[1], device=device)
    for name, op in ops.items():
        _checked(name, op, xs[0], w)
        unit = "ms/op"
        results.append((f"{name} {LARGE[0]}x{LARGE[1]}", _op_time(op, xs, w, args.reps, device),
                        unit))
    if device == "cuda":
        results += _graph_rows(ex, args.reps)
    else:
        skipped.append("CUDA graphs: need the cuda backend")

    print(f"RMSNorm, float32, on the {kj.backend()} backend, torch {torch.__version__}, "
          f"torch.compile backend {args.backend!r}")
    print("| row | figure | unit |\n| --- | --- | --- |")
    for label, value, unit in results:
        print(f"| {label} | {value:.3f} | {unit} |")
    for reason in skipped:
        print(f"skipped: {reason}")
    return results


if __name__ == "__main__":
    main()
