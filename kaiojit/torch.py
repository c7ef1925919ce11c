"""PyTorch and kaiojit: kernels as custom ops that ``torch.compile`` keeps in its graph.

``import kaiojit.torch as kjt`` (``import kaiojit`` never imports PyTorch). A Python function
that launches kaiojit kernels on tensors becomes a ``torch.library`` custom op::

    @kjt.op("mylib::scale", mutates_args=(), fake=lambda x, a: torch.empty_like(x))
    def scale(x: torch.Tensor, a: float) -> torch.Tensor:
        out = torch.empty_like(x)
        scale_kernel[grid(x.numel()), 256](out, x, a, x.numel())
        return out

``scale`` is then a ``torch.library.CustomOpDef``: ``torch.compile(fullgraph=True)`` traces it
as one node through its fake rule (shapes and dtypes only, no launch), ``torch.export`` keeps
it as one op, ``torch.library.opcheck`` tests it, and a backward written with kaiojit kernels
attaches with ``backward=`` / ``setup_context=`` (``register_autograd``). See docs/torch.md.

Tensors launch as they do anywhere in kaiojit: CUDA tensors zero-copy on PyTorch's current
stream (:mod:`kaiojit.runtime.torchstream`), CPU tensors zero-copy on the cpu backend.

A kaiojit launch written directly in a function that ``torch.compile`` traces (no custom op)
is not traced: Dynamo breaks the graph there with the reason
:data:`kaiojit.launch.launcher.DYNAMO_REASON` and runs the launch eagerly (under
``fullgraph=True`` that break is the error). This module keeps Dynamo out of kaiojit's own
frames, so the eager launch is never half-traced; :func:`keep_dynamo_out` does it, on import
of this module, or when Dynamo first meets a launch (``kaiojit.launch.launcher.DYNAMO_REASON``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["custom_op", "keep_dynamo_out", "op"]

_kept_out = False
GENERATED_CODE = "<kaiojit "  # how the file names of kaiojit's generated code begin


def keep_dynamo_out() -> None:
    """Make Dynamo run kaiojit's frames as they are, untraced: the files of the ``kaiojit``
    package and the code kaiojit generates (fast launches, named ``<kaiojit ...>``)."""
    global _kept_out
    if _kept_out:
        return
    _kept_out = True
    from torch._dynamo import trace_rules

    trace_rules.add("kaiojit")
    trace_rules.SKIP_DIRS.append(GENERATED_CODE)
    trace_rules._recompile_re()


def op(name: str, *, mutates_args: str | Iterable[str] = (),
       fake: Callable[..., Any] | None = None,
       backward: Callable[..., Any] | None = None,
       setup_context: Callable[..., Any] | None = None,
       device_types: str | Sequence[str] | None = None,
       schema: str | None = None) -> Callable[[Callable[..., Any]], Any]:
    """Decorate a function launching kaiojit kernels: it becomes the custom op ``name``
    (``"namespace::op_name"``), a ``torch.library.CustomOpDef``.

    ``mutates_args``: the tensor parameters the function writes (``()``: none; it returns new
    tensors), as ``torch.library.custom_op`` takes them. ``fake``: the fake (meta) rule, a
    function of the same parameters returning empty tensors of the outputs' shapes, dtypes and
    devices (or register it later with ``@my_op.register_fake``); ``torch.compile`` and
    ``torch.export`` need one. ``backward`` and ``setup_context``: the op's derivative, as
    ``register_autograd`` takes them (``backward(ctx, *grads)`` may call other kaiojit ops).
    ``device_types`` restricts the implementation to devices (default: all); ``schema``
    replaces the one inferred from the type hints.
    """
    keep_dynamo_out()

    def decorate(fn: Callable[..., Any]) -> Any:
        custom = torch.library.custom_op(name, fn, mutates_args=mutates_args,
                                         device_types=device_types, schema=schema)
        if fake is not None:
            custom.register_fake(fake)
        if backward is not None:
            custom.register_autograd(backward, setup_context=setup_context)
        elif setup_context is not None:
            raise TypeError(f"op {name!r}: setup_context without backward")
        return custom
    return decorate


custom_op = op  # torch.library's name for it

keep_dynamo_out()
