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

Rows that need what the machine lacks (a GPU, Triton) are listed as skipped with the reason;
a GPU row that fails is listed as failed with its error, and the other rows still run.

``--host`` places the *call* figure without a GPU: the op path's host work per call on the
mock backend, whose driver is replaced by a native no-op (``launch_parts._stub_driver``), with
CPU tensors standing for the GPU's (the mock backend's memory is host memory, so they take the
same fast launch form, DLPack exchange reads included). Rows, each a median of ``reps`` loops
of ``calls`` calls on the (4, 64) input, timed alternately round by round:

- the kaiojit launch of the forward kernel alone (``kernel[rows, block](...)``);
- the op's function (allocations and the launch), called as Python;
- the op through PyTorch's dispatcher (``torch.ops.kaiojit_examples.rmsnorm.default``), as
  ``kaiojit.torch.op`` registers it, and the same function registered by plain
  ``torch.library.custom_op`` (what ``kaiojit.torch.op`` did before it added direct kernels);
- both under ``torch.compile(fullgraph=True)``, and the floor: a compiled function whose graph
  is one ``torch.empty_like`` (Dynamo's guards, AOTAutograd's and Inductor's wrappers).

On the GPU the device's stream lookup (one call into PyTorch) and CUDA allocations add to
these; the GPU's own figures come from the default mode.
"""

from __future__ import annotations

import argparse
import functools
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
    kernel, block, constants = ex.forward_plan(n)
    args = (y, rstd, x, w, EPS, n, *constants)
    kernel[rows, block, stream](*args)  # warm-up: compile, load
    stream.synchronize()
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (n,), w, EPS))
    g = kj.CudaGraph()
    with g.capture(stream):
        for _ in range(100):
            kernel[rows, block, stream](*args)

    loaded = kernel.loaded_kernel(args)
    fn = loaded.on_device(0).fn.obj
    slots = ArgSlots(loaded.packer.layout)
    loaded.packer.pack(slots, kernel.passed_args(args), 0)
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


def _forward_launch(ex, x, w) -> Callable[[], None]:
    """The example's forward kernel launched on ``x`` as the op launches it."""
    rows, n = x.shape
    y, rstd = torch.empty_like(x), x.new_empty(rows)
    if hasattr(ex, "forward_plan"):
        kernel, block, constants = ex.forward_plan(n)
    else:  # the example before its one-pass kernel (a before/after run of this mode)
        kernel, block, constants = ex.rmsnorm_forward_kernel, ex.BLOCK, ()
    launcher = kernel[rows, block]
    return lambda: launcher(y, rstd, x, w, EPS, n, *constants)


def _host_rows(ex, calls: int, reps: int, backend: str) -> list[tuple[str, float, str]]:
    """``--host``: the op path's host work per call on the mock backend's no-op driver."""
    from kaiojit.runtime.backend import set_backend
    from kaiojit.runtime.mock import MockBackend

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from launch_parts import _stub_driver

    mock = MockBackend()
    _stub_driver(mock)
    set_backend(mock)
    x, w = torch.randn(SMALL), torch.randn(SMALL[1])
    plain = torch.library.custom_op("kaiojit_bench::plain_rmsnorm", ex.rmsnorm._init_fn,
                                    mutates_args=())
    plain.register_fake(ex._fake_forward)
    ours, theirs = torch.ops.kaiojit_examples.rmsnorm.default, plain._opoverload
    compile_ = functools.partial(torch.compile, backend=backend, fullgraph=True)
    cases: dict[str, Callable[[], object]] = {
        "kaiojit launch of the forward kernel": _forward_launch(ex, x, w),
        "the op's function (allocations + launch)": lambda: ex.rmsnorm._init_fn(x, w, EPS),
        "op through the dispatcher, kaiojit.torch.op": lambda: ours(x, w, EPS),
        "op through the dispatcher, plain custom_op": lambda: theirs(x, w, EPS),
    }
    compiled = {
        "op under torch.compile, kaiojit.torch.op": compile_(lambda a, b: ours(a, b, EPS)[0]),
        "op under torch.compile, plain custom_op": compile_(lambda a, b: theirs(a, b, EPS)[0]),
        "floor: torch.compile of one empty_like": compile_(lambda a, b: torch.empty_like(a)),
    }
    expect = torch.nn.functional.rms_norm(x, (SMALL[1],), w, EPS)
    for name, fn in compiled.items():
        if "floor" not in name:
            set_backend("cpu")  # the check runs the kernel; the timed calls launch nothing
            torch.testing.assert_close(fn(x, w), expect, msg=f"{name} is wrong")
            set_backend(mock)
        cases[name] = functools.partial(fn, x, w)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():
        for _ in range(100):
            fn()
    mock.launches.clear()
    for _ in range(reps):
        for name, fn in cases.items():
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter_ns() - start) / calls / 1e3)
        mock.launches.clear()
    return [(name, statistics.median(v), "us/call") for name, v in samples.items()]


def _guarded(rows: list, skipped: list, label: str, make: Callable[[], list]) -> None:
    """Run one GPU row (or group of rows); a failure is reported, the others still run."""
    try:
        rows += make()
    except Exception as e:  # noqa: BLE001 - one failed row must not lose the run's others
        skipped.append(f"{label} FAILED: {type(e).__name__}: {e}")


def main(argv: list[str] | None = None) -> list[tuple[str, float, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    parser.add_argument("--host", action="store_true",
                        help="the op path's host work per call on the mock backend's no-op driver")
    args = parser.parse_args(argv)
    ex = _example()
    if args.host:
        results = _host_rows(ex, args.calls, args.reps, args.backend)
        print(f"RMSNorm op path, host work per call, on the mock backend's no-op driver, "
              f"(4, 64) float32 CPU tensors, torch {torch.__version__}, torch.compile backend "
              f"{args.backend!r}")
        _print(results, [])
        return results
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
    compile_ = functools.partial(torch.compile, backend=args.backend, fullgraph=True)
    for name, op in ops.items():
        label = "eager call" if name == "eager" else f"{name} call under torch.compile"

        def call_row(name=name, op=op, label=label):
            fn = op if name == "eager" else compile_(op)
            _checked(name, fn, x, w)
            return [(label, _call_time(fn, x, w, args.calls, args.reps, device), "us/call")]
        _guarded(results, skipped, label, call_row)
    _guarded(results, skipped, "kaiojit op call, eager", lambda: [
        ("kaiojit op call, eager (the dispatcher, no torch.compile)",
         _call_time(ops["kaiojit op"], x, w, args.calls, args.reps, device), "us/call")])
    _guarded(results, skipped, "floor", lambda: [
        ("floor: torch.compile of one empty_like",
         _call_time(compile_(lambda a, b: torch.empty_like(a)), x, w, args.calls, args.reps,
                    device), "us/call")])
    xs = [torch.randn(LARGE, device=device) for _ in range(8 if device == "cuda" else 2)]
    w = torch.randn(LARGE[1], device=device)
    for name, op in ops.items():
        def op_row(name=name, op=op):
            _checked(name, op, xs[0], w)
            return [(f"{name} {LARGE[0]}x{LARGE[1]}", _op_time(op, xs, w, args.reps, device),
                     "ms/op")]
        _guarded(results, skipped, f"{name} {LARGE[0]}x{LARGE[1]}", op_row)
    if device == "cuda":
        _guarded(results, skipped, "CUDA graphs", lambda: _graph_rows(ex, args.reps))
    else:
        skipped.append("CUDA graphs: need the cuda backend")

    print(f"RMSNorm, float32, on the {kj.backend()} backend, torch {torch.__version__}, "
          f"torch.compile backend {args.backend!r}")
    _print(results, skipped)
    return results


def _print(results: list[tuple[str, float, str]], skipped: list[str]) -> None:
    print("| row | figure | unit |\n| --- | --- | --- |")
    for label, value, unit in results:
        print(f"| {label} | {value:.3f} | {unit} |")
    for reason in skipped:
        print(f"skipped: {reason}")


if __name__ == "__main__":
    main()
