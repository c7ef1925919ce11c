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
        if backward is None and setup_context is not None:
            raise TypeError(f"op {name!r}: setup_context without backward")
        custom = torch.library.custom_op(name, fn, mutates_args=mutates_args,
                                         device_types=device_types, schema=schema)
        if fake is not None:
            custom.register_fake(fake)
        if backward is not None:
            custom.register_autograd(backward, setup_context=setup_context)
        if device_types is None and not custom._opoverload._schema.is_mutable:
            direct_kernels(custom, fn)  # the per-call path without custom_op's wrappers
        return custom
    return decorate


custom_op = op  # torch.library's name for it


class DirectKernels:
    """The per-call path of a functional op made by :func:`op`, without custom_op's wrappers.

    ``torch.library.custom_op`` registers, per call, three Python layers around the function:
    an ``Autograd`` kernel that builds a dataclass and redispatches below autograd (a second
    crossing from C++ into Python), a backend kernel that looks the function up by device, and
    ``torch._disable_dynamo`` around the function (which sets and restores Dynamo's frame
    callback). On the RMSNorm op they cost more than the function and its kaiojit launch
    (benchmarks/torch_op.py ``--host``). This registers, beside them, kernels for the dispatch
    keys the runtime actually meets, which take precedence over custom_op's alias-key ones:

    - ``CPU`` and ``CUDA``: the function itself, then PyTorch's own check that no output aliases
      an input (``_C._any_output_is_alias_to_input_or_output``, what custom_op checks);
    - ``AutogradCPU`` and ``AutogradCUDA``: where grad mode is on and an input requires grad,
      custom_op's own autograd kernel (the registered backward, ``setup_context``); otherwise,
      where nothing but the backend key is left below autograd (plain tensors: no fake or
      meta tensors, no tensor subclass, no dispatch mode), the backend kernel called directly,
      else the redispatch below autograd that custom_op does.

    The op stays a ``CustomOpDef``: its schema, fake rule, ``register_autograd`` (read at each
    call that needs it), ``opcheck`` and ``torch.export`` are custom_op's. Ops that mutate
    arguments or are restricted to device types keep custom_op's path.
    """

    BACKEND_KEYS = ("CPU", "CUDA")
    AUTOGRAD_KEYS = ("AutogradCPU", "AutogradCUDA")
    # what this reads of PyTorch beyond its public API (present in 2.6-2.13); where one is
    # missing, ops keep custom_op's path
    PRIVATE = ("_any_output_is_alias_to_input_or_output", "_any_requires_grad",
               "_after_autograd_keyset", "_AutoDispatchBelowAutograd")

    @classmethod
    def available(cls) -> bool:
        try:
            from torch._library.autograd import make_autograd_impl  # noqa: F401
        except ImportError:
            return False
        return all(hasattr(torch._C, name) for name in cls.PRIVATE)

    def __init__(self, custom: Any, fn: Callable[..., Any]):
        from torch._library.autograd import make_autograd_impl

        self.custom = custom
        self.fn = fn
        self.op = custom._opoverload
        self.grad_path = make_autograd_impl(self.op, custom)
        namespace, self.name = self.op._schema.name.split("::")
        self.library = torch.library.Library(namespace, "FRAGMENT")  # kept: it registers

    def register(self) -> None:
        backend = self.backend_kernel()
        for key in self.BACKEND_KEYS:
            self.library.impl(self.name, backend, key)
        autograd = self.autograd_kernel(backend)
        for key in self.AUTOGRAD_KEYS:
            self.library.impl(self.name, autograd, key, with_keyset=True)

    def backend_kernel(self) -> Callable[..., Any]:
        fn, qualname = self.fn, self.op._schema.name
        aliases = torch._C._any_output_is_alias_to_input_or_output

        def kernel(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            if aliases(args, kwargs, result if result.__class__ is tuple else (result,)):
                raise RuntimeError(
                    f"{qualname} (kaiojit.torch.op of {fn.__module__}.{fn.__qualname__}): an "
                    "output is one of the op's inputs, aliases one, or aliases another output; "
                    "return new tensors (x.clone() where an input is returned as it is)")
            return result
        return kernel

    def autograd_kernel(self, backend: Callable[..., Any]) -> Callable[..., Any]:
        C = torch._C
        grad_enabled, any_requires_grad = C.is_grad_enabled, C._any_requires_grad
        below_autograd, after_autograd = C._AutoDispatchBelowAutograd, C._after_autograd_keyset
        rest = after_autograd.remove(C.DispatchKey.ADInplaceOrView)  # a fallthrough here
        plain = frozenset(C.DispatchKeySet(getattr(C.DispatchKey, key)).raw_repr()
                          for key in self.BACKEND_KEYS)
        grad_path, redispatch = self.grad_path, self.op.redispatch
        direct_for: dict[int, bool] = {}  # by the keyset's bits: whether the backend is all left

        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            if grad_enabled() and any_requires_grad(*args):
                return grad_path(keyset, *args, **kwargs)
            bits = keyset.raw_repr()
            direct = direct_for.get(bits)
            if direct is None:
                if len(direct_for) > 64:
                    direct_for.clear()
                direct = direct_for[bits] = (keyset & rest).raw_repr() in plain
            if direct:
                return backend(*args, **kwargs)
            with below_autograd():
                return redispatch(keyset & after_autograd, *args, **kwargs)
        return kernel


_direct: dict[str, DirectKernels] = {}  # by op name: their libraries stay registered


def direct_kernels(custom: Any, fn: Callable[..., Any]) -> DirectKernels | None:
    """Register :class:`DirectKernels` for the custom op ``custom`` of ``fn`` (None where this
    PyTorch lacks what they read)."""
    if not DirectKernels.available():
        return None
    direct = DirectKernels(custom, fn)
    previous = _direct.pop(direct.op._schema.name, None)
    if previous is not None:  # the op defined again (a notebook cell run twice, a module
        # loaded twice): the new definition's kernels replace the old ones (PyTorch refuses a
        # second Python kernel for a key while the first library lives); its finalizer would
        # later remove the same keys from PyTorch's registry again, now the new ones': emptied
        previous.library._destroy()
        previous.library._op_impls.clear()
    direct.register()
    _direct[direct.op._schema.name] = direct
    return direct

keep_dynamo_out()
