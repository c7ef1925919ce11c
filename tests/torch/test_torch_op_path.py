"""The per-call path of ``kaiojit.torch.op`` ops (``DirectKernels``: the dispatcher reaches the
function in one Python layer where no gradient is needed, custom_op's own path otherwise) and
the RMSNorm example's one-pass forward kernel: its plans against PyTorch on the cpu backend,
its PTX (128-bit accesses, no local memory, one barrier, no spills), and the fast launch form
on the mock backend's CPU tensors."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import kaiojit as kj
import kaiojit.torch as kjt
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend
from kaiojit.tools.resources import ptxas_resources
from tests.torch.torch_examples import load_example

RNG = np.random.default_rng()
DIRECT = ("kaiojit/torch.py", "kernel")  # DirectKernels' backend kernel, as a caller


@kj.jit
def scale_kernel(out, x, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i]


calls: list[tuple[str, str]] = []  # per call of scale's function: who called it (file, function)


def _scale_backward(ctx, grad):
    return grad * ctx.a, None


def _scale_setup(ctx, inputs, output):
    ctx.a = inputs[1]


@kjt.op("kaiojit_tests::scale", mutates_args=(), fake=lambda x, a: x.new_empty(x.shape),
        backward=_scale_backward, setup_context=_scale_setup)
def scale(x: torch.Tensor, a: float) -> torch.Tensor:
    """``a * x`` (1-D), recording its caller."""
    caller = inspect.stack()[1]
    calls.append(("/".join(Path(caller.filename).parts[-2:]), caller.function))
    out = torch.empty_like(x)
    scale_kernel[(x.numel() + 127) // 128, 128](out, x, a, x.numel())
    return out


@kjt.op("kaiojit_tests::leak", mutates_args=(), fake=lambda x: x.new_empty(x.shape))
def leak(x: torch.Tensor) -> torch.Tensor:
    return x  # an input returned as the output: an alias custom ops may not have


@kjt.op("kaiojit_tests::scale_into", mutates_args=("out",))
def scale_into(out: torch.Tensor, x: torch.Tensor, a: float) -> None:
    scale_kernel[(x.numel() + 127) // 128, 128](out, x, a, x.numel())


def _input(n: int | None = None, grad: bool = False) -> tuple[torch.Tensor, float]:
    n = n or int(RNG.integers(100, 700))
    return torch.randn(n, requires_grad=grad), float(RNG.uniform(0.5, 2.0))


def test_a_call_reaches_the_function_without_custom_ops_wrappers(cpu):
    x, a = _input()
    calls.clear()
    torch.testing.assert_close(scale(x, a), a * x)
    torch.testing.assert_close(torch.ops.kaiojit_tests.scale.default(x, a), a * x)
    with torch.no_grad():  # an input that requires grad, grad mode off: no autograd either
        xg, _ = _input(grad=True)
        got = scale(xg, a)
    assert not got.requires_grad
    torch.testing.assert_close(got, a * xg.detach())
    assert calls == [DIRECT] * 3


def test_under_compile_the_graph_calls_the_function_directly(cpu):
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, a: scale(t * 2.0, a) + 1.0, backend="aot_eager",
                             fullgraph=True)
    x, a = _input()
    compiled(x, a)  # the first call traces (fake tensors: the fake rule, not the function)
    calls.clear()
    x, a = _input(x.numel())
    torch.testing.assert_close(compiled(x, a), a * (x * 2.0) + 1.0)
    assert calls == [DIRECT]


def test_a_gradient_takes_custom_ops_autograd_path(cpu):
    x, a = _input(grad=True)
    calls.clear()
    y = scale(x, a)
    assert y.requires_grad  # custom_op's autograd.Function, which redispatches to the function
    assert type(y.grad_fn).__name__.startswith("GeneratedBackwardFor_kaiojit_tests_scale")
    assert calls == [DIRECT]
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, torch.full_like(x, a))


def test_fake_and_meta_tensors_get_the_fake_rule_not_the_function(cpu):
    calls.clear()
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.randn(321))
        out = scale(fake, 1.5)
    assert out.shape == (321,) and out.dtype == torch.float32
    meta = scale(torch.empty(77, device="meta"), 2.0)
    assert meta.shape == (77,) and meta.device.type == "meta"
    assert calls == []


def test_an_output_aliasing_an_input_is_refused_with_the_ops_name(cpu):
    x, _ = _input()
    with pytest.raises(RuntimeError, match=r"kaiojit_tests::leak .*test_torch_op_path\.leak.*"
                                           r"aliases one"):
        leak(x)


def test_mutating_ops_keep_custom_ops_path(cpu):
    assert "kaiojit_tests::scale" in kjt._direct
    assert "kaiojit_tests::scale_into" not in kjt._direct
    x, a = _input()
    out = torch.full_like(x, float("nan"))
    scale_into(out, x, a)
    torch.testing.assert_close(out, a * x)


def test_without_the_private_pieces_an_op_keeps_custom_ops_path(cpu, monkeypatch):
    monkeypatch.setattr(kjt.DirectKernels, "PRIVATE", ("_no_such_binding",))

    @kjt.op("kaiojit_tests::scale_plain", mutates_args=(), fake=lambda x, a: x.new_empty(x.shape))
    def scale_plain(x: torch.Tensor, a: float) -> torch.Tensor:
        out = torch.empty_like(x)
        scale_kernel[(x.numel() + 127) // 128, 128](out, x, a, x.numel())
        return out

    assert "kaiojit_tests::scale_plain" not in kjt._direct
    x, a = _input()
    torch.testing.assert_close(scale_plain(x, a), a * x)


# --- the RMSNorm example's forward --------------------------------------------------------


@pytest.mark.parametrize("n", [64, 200, 1023, 4096, 4098, 33000])
def test_rmsnorm_forward_plans_match_pytorch(cpu, n):
    ex = load_example("torch_op")
    kernel, block, constants = ex.forward_plan(n)
    if constants:
        chunks, vec = constants[1], constants[2]
        assert n % vec == 0 and block * chunks * vec >= n and chunks <= ex.MAX_CHUNKS
    else:
        assert kernel is ex.rmsnorm_forward_long_kernel
    rows = int(RNG.integers(2, 4))
    x, w = torch.randn(rows, n), torch.randn(n)
    eps = float(RNG.uniform(1e-6, 1e-4))
    y, rstd = torch.full_like(x, float("nan")), torch.full((rows,), float("nan"))
    kernel[rows, block](y, rstd, x, w, eps, n, *constants)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (n,), w, eps))
    torch.testing.assert_close(rstd, torch.rsqrt(x.square().mean(-1) + eps))
    got, _ = ex.rmsnorm(x.view(rows, 1, n), w, eps)  # through the op, a 3-D input
    assert got.shape == (rows, 1, n)
    torch.testing.assert_close(got.view(rows, n), y)


def test_rmsnorm_forward_ptx_is_one_pass_of_vector_accesses():
    ex = load_example("torch_op")
    previous = set_backend(MockBackend())
    try:
        rows, n = 4, 4096
        kernel, block, constants = ex.forward_plan(n)
        assert (block, constants) == (256, (256, 4, 4))  # 4 float4 a thread
        x, w = torch.randn(rows, n), torch.randn(n)
        kernel[rows, block](torch.empty_like(x), x.new_empty(rows), x, w, 1e-6, n, *constants)
        ptx = next(p for s, p in kernel.inspect_ptx().items() if "align=16" in str(s))
    finally:
        set_backend(previous)
    chunks = constants[1]
    assert len(re.findall(r"ld\.global\.nc\.v4", ptx)) == 2 * chunks  # x and w, once each
    assert len(re.findall(r"st\.global\.v4", ptx)) == chunks
    assert not re.search(r"ld\.global\.nc\.(f32|b32)\b", ptx)  # no scalar re-read of the row
    assert "ld.local" not in ptx and "st.local" not in ptx
    assert len(re.findall(r"bar\.sync", ptx)) == 1
    assert not re.search(r"(add|mul|fma|div|sqrt|rcp)(\.rn)?\.f64", ptx)  # float32 math
    res = ptxas_resources(ptx, "sm_90")
    assert not res.spills and res.local_bytes == 0


def test_the_fast_launch_reads_cpu_tensors_on_the_mock_backend():
    mock = MockBackend()
    previous = set_backend(mock)
    try:
        n = int(RNG.integers(100, 1000))
        x = torch.randn(n)
        out = torch.full_like(x, float("nan"))
        for _ in range(3):
            scale_kernel[(n + 127) // 128, 128](out, x, 2.0, n)
        assert mock.fast_launches == 2  # the first launch takes the general path
        assert mock.launches[-1].params[0].startswith(np.uint64(out.data_ptr()).tobytes())
    finally:
        set_backend(previous)


def test_the_host_benchmark_mode_runs_without_a_gpu(monkeypatch):
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "torch_op.py"
    spec = importlib.util.spec_from_file_location("kaiojit_bench_torch_op", path)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)
    spec.loader.exec_module(bench)
    previous = set_backend("cpu")
    try:
        rows = bench.main(["--host", "--calls", "3", "--reps", "1", "--backend", "aot_eager"])
    finally:
        set_backend(previous)
    names = [name for name, _, _ in rows]
    assert "op through the dispatcher, kaiojit.torch.op" in names
    assert "op under torch.compile, plain custom_op" in names
    assert all(value > 0 and unit == "us/call" for _, value, unit in rows)


def test_an_op_defined_again_replaces_its_direct_kernels():
    """A notebook cell run twice, a module loaded under two names (the benchmark's copy of an
    example beside the example's own): the op is defined again, and its direct kernels must
    replace the first definition's. Seen on an H100 machine's PyTorch 2.11: the second
    definition's kernels were refused ("already a kernel registered from python"); on 2.13 the
    first's finalizer removed the second's from PyTorch's registry."""
    import gc

    from torch import library

    def define(factor: float):
        @kjt.op("kaiojit_tests::redefined")
        def redefined(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            scale_kernel[(x.numel() + 127) // 128, 128](out, x, factor, x.numel())
            return out
        return redefined

    x = torch.randn(int(np.random.default_rng().integers(100, 300)))
    previous = set_backend("cpu")
    try:
        for factor in (2.0, 3.0, 5.0):
            op = define(factor)
            gc.collect()  # the earlier definition's library is finalized
            keys = {k.split("/")[-1] for k in library._impls
                    if k.startswith("kaiojit_tests/redefined/")}
            assert {"CPU", "CUDA", "AutogradCPU", "AutogradCUDA"} <= keys, keys
            torch.testing.assert_close(op(x), x * factor)
            torch.testing.assert_close(torch.ops.kaiojit_tests.redefined(x), x * factor)
    finally:
        set_backend(previous)
