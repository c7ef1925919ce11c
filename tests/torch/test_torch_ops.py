"""kaiojit kernels as PyTorch custom ops (``kaiojit.torch.op``) on CPU tensors and the cpu
backend: results against PyTorch, ``opcheck``, ``gradcheck``, ``torch.compile(fullgraph=True)``
with no graph break and no recompile, ``torch.export``, the example's training loop, and a
plain launch (no op) under ``torch.compile``."""

from __future__ import annotations

import math

import pytest
import torch
from torch._dynamo.utils import counters

import kaiojit as kj
import kaiojit.torch as kjt
from kaiojit.launch.launcher import DYNAMO_REASON
from tests.torch.torch_examples import load_example

BLOCK = 128


@kj.jit
def tanh_mul_kernel(out, x, w, n):
    i = kj.grid(1)
    if i < n:
        out[i] = math.tanh(x[i]) * w[i]


@kj.jit
def tanh_mul_grad_kernel(dx, dw, dy, x, w, n):
    i = kj.grid(1)
    if i < n:
        t = math.tanh(x[i])
        dx[i] = (1.0 - t * t) * w[i] * dy[i]
        dw[i] = t * dy[i]


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(-1)


@kjt.op("kaiojit_tests::tanh_mul_grad", mutates_args=(),
        fake=lambda dy, x, w: (torch.empty_like(x), torch.empty_like(w)))
def tanh_mul_grad(dy: torch.Tensor, x: torch.Tensor,
                  w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    n = x.numel()
    tanh_mul_grad_kernel[(n + BLOCK - 1) // BLOCK, BLOCK](dx.view(-1), dw.view(-1), _flat(dy),
                                                          _flat(x), _flat(w), n)
    return dx, dw


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _backward(ctx, dy):
    x, w = ctx.saved_tensors
    return tanh_mul_grad(dy, x, w)


@kjt.op("kaiojit_tests::tanh_mul", mutates_args=(), fake=lambda x, w: torch.empty_like(x),
        backward=_backward, setup_context=_setup)
def tanh_mul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``tanh(x) * w``, elementwise."""
    out = torch.empty_like(x)
    n = x.numel()
    tanh_mul_kernel[(n + BLOCK - 1) // BLOCK, BLOCK](out.view(-1), _flat(x), _flat(w), n)
    return out


def _inputs(shape=(7, 300), dtype=torch.float32, grad=False):
    x = torch.randn(shape, dtype=dtype, requires_grad=grad)
    w = torch.randn(shape, dtype=dtype, requires_grad=grad)
    return x, w


def test_op_is_a_custom_op_matching_pytorch(cpu):
    assert isinstance(tanh_mul, torch._library.custom_ops.CustomOpDef)
    x, w = _inputs()
    torch.testing.assert_close(tanh_mul(x, w), torch.tanh(x) * w)
    torch.testing.assert_close(torch.ops.kaiojit_tests.tanh_mul(x, w), torch.tanh(x) * w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck(cpu, dtype):
    x, w = _inputs(dtype=dtype, grad=True)
    for op, args in ((tanh_mul, (x, w)), (tanh_mul_grad, (torch.randn_like(x), x.detach(), w.detach()))):
        result = torch.library.opcheck(op, args)
        assert set(result.values()) == {"SUCCESS"}, result


def test_gradcheck(cpu):
    x, w = _inputs((5, 41), torch.float64, grad=True)
    assert torch.autograd.gradcheck(tanh_mul, (x, w))


def test_backward_runs_the_kaiojit_ops_under_compile(cpu):
    x, w = _inputs(grad=True)
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w))
    compiled = torch.compile(lambda a, b: tanh_mul(a, b).square().sum(), backend="aot_eager",
                             fullgraph=True)
    compiled(x, w).backward()
    (torch.tanh(xr) * wr).square().sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


def test_fullgraph_keeps_the_op_with_no_break_and_no_recompile(cpu):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(lambda a, b: tanh_mul(a + 1.0, b) * 2.0, backend=backend,
                             fullgraph=True)
    for _ in range(3):  # fresh values, the same shapes: one graph
        x, w = _inputs()
        torch.testing.assert_close(compiled(x, w), torch.tanh(x + 1.0) * w * 2.0)
    assert len(graphs) == 1
    assert not counters["graph_break"]
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.kaiojit_tests.tanh_mul.default) == 1


def test_export_keeps_one_op(cpu):
    class Model(torch.nn.Module):
        def forward(self, x, w):
            return tanh_mul(x, w)

    x, w = _inputs()
    exported = torch.export.export(Model(), (x, w))
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.kaiojit_tests.tanh_mul.default]
    torch.testing.assert_close(exported.module()(x, w), torch.tanh(x) * w)


def test_example_rmsnorm_ops_pass_opcheck(cpu):
    ex = load_example("torch_op")
    x, w = torch.randn(6, 200, requires_grad=True), torch.randn(200, requires_grad=True)
    y, rstd = ex.rmsnorm(x, w, 1e-6)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (200,), w, 1e-6))
    for op, args in ((ex.rmsnorm, (x, w, 1e-6)),
                     (ex.rmsnorm_backward, (torch.randn(6, 200), x.detach(), w.detach(), rstd))):
        result = torch.library.opcheck(op, args)
        assert set(result.values()) == {"SUCCESS"}, result


def test_example_trains_under_compile_as_pytorch_does(cpu):
    ours, reference = load_example("torch_op").train(3, "aot_eager", "cpu", seed=1)
    assert len(ours) == 3
    assert ours == pytest.approx(reference, abs=1e-4)
    assert ours[-1] < ours[0]


def test_inductor_compiles_a_model_using_the_op(cpu):
    x, w = _inputs()
    compiled = torch.compile(lambda a, b: tanh_mul(a * 0.5, b).relu(), fullgraph=True)
    torch.testing.assert_close(compiled(x, w), (torch.tanh(x * 0.5) * w).relu())


def _plain(x):
    out = torch.empty_like(x)
    n = x.numel()
    tanh_mul_kernel[(n + BLOCK - 1) // BLOCK, BLOCK](out, x, x, n)
    return out * 2.0


def test_plain_launch_under_compile_runs_eagerly(cpu):
    torch._dynamo.reset()
    x = torch.randn(1000)
    got = torch.compile(_plain, backend="aot_eager")(x)
    torch.testing.assert_close(got, torch.tanh(x) * x * 2.0)


def test_plain_launch_under_fullgraph_names_the_break(cpu):
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as info:
        torch.compile(_plain, backend="aot_eager", fullgraph=True)(torch.randn(100))
    assert str(DYNAMO_REASON) in str(info.value)
    assert "kaiojit.torch.op" in str(DYNAMO_REASON)


def test_cpu_tensors_are_zero_copy_on_the_cpu_backend(cpu):
    n = 125
    x, w = torch.randn(n), torch.randn(n)
    out = torch.full((4 * n,), float("nan"))
    view = out[::4]  # a strided view: the kernel writes through it into out's memory
    tanh_mul_kernel[1, 128](view, x, w, n)
    torch.testing.assert_close(out[::4], torch.tanh(x) * w)
    assert torch.isnan(out.view(n, 4)[:, 1:]).all()  # untouched between the view's elements


def test_a_cpu_tensor_on_a_cuda_backend_says_how_to_move_it():
    from kaiojit.runtime.backend import set_backend
    from kaiojit.runtime.mock import MockBackend

    class DeviceMemoryMock(MockBackend):
        def dlpack_device_type(self) -> int:
            return 2  # kDLCUDA, as the cuda backend answers

    previous = set_backend(DeviceMemoryMock())
    try:
        with pytest.raises(TypeError, match=r"parameter 'out'.*on the CPU.*\.cuda\(\)"):
            tanh_mul_kernel[1, 32](torch.zeros(4), torch.randn(4), torch.randn(4), 4)
    finally:
        set_backend(previous)


PLAIN_LAUNCH_FIRST = """
import sys, warnings
import kaiojit as kj          # kaiojit before PyTorch, kaiojit.torch never imported
import torch
warnings.simplefilter("error")

@kj.jit
def add_one(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i] + 1.0

def f(x):
    out = torch.full_like(x, float("nan"))
    add_one[(x.numel() + 127) // 128, 128](out, x, x.numel())
    return out * 2.0

x = torch.randn(1000)
got = torch.compile(f, backend="aot_eager")(x)   # the kernel's first launch, under Dynamo
assert torch.equal(got, (x + 1.0) * 2.0), "wrong result"
print("kept out:", "kaiojit.torch" in sys.modules)
"""


def test_a_first_launch_under_compile_keeps_dynamo_out_in_any_import_order(tmp_path):
    import os
    import subprocess
    import sys

    from tests.torch.torch_examples import ROOT

    env = dict(os.environ, KAIOJIT_BACKEND="cpu", PYTHONPATH=str(ROOT))
    script = tmp_path / "plain_launch_first.py"
    script.write_text(PLAIN_LAUNCH_FIRST)
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kept out: True" in done.stdout
    assert "Traceback" not in done.stderr
