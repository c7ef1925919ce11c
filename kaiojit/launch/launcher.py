"""Launching a ``@kj.jit`` kernel: ``kernel[grid, block, stream, shared]`` and ``.forall(n)``.

``parse_launch_config`` reads numba's configuration tuple; :class:`Launcher` is the bound
configuration a launch calls until it has a fast form (then ``kernel[grid, block]`` returns the
fast form itself), and :class:`ForallLauncher` the 1-D one sized by occupancy. A general launch
finds its loaded kernel by :func:`launch_key` (the backend and every argument's type, plus the
constexpr values) through its dispatcher's public interface (``loaded_kernel``: the launch
cache, else type, compile, load).
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

from ..errors import KaiojitError, user_facing

# what a launch raises for the user's mistakes (compile errors, launch checks, arguments): shown
# with the user's frames only, the message saying what is wrong
USER_ERRORS = (KaiojitError, TypeError, ValueError)

MAX_FAST_REBUILDS = 8  # a launcher fed ever-changing argument kinds stops specializing


class _DynamoReason(str):
    """Why ``torch.compile`` (Dynamo) breaks its graph at a kaiojit launch. Dynamo formats it
    when it first meets a launch, before it runs the launch eagerly: that is when kaiojit
    keeps Dynamo out of its own frames (:func:`kaiojit.torch.keep_dynamo_out`), at no cost
    to any launch and whatever the order in which kaiojit and PyTorch were imported."""

    def __format__(self, spec: str) -> str:
        import kaiojit.torch  # noqa: F401 - importing it keeps Dynamo out

        return str.__format__(str(self), spec)


DYNAMO_REASON = _DynamoReason(
    "a kaiojit launch runs eagerly, outside the graph: make the function that launches it a "
    "custom op (kaiojit.torch.op) to keep it in the graph")


def outside_graphs(fn: Any) -> Any:
    """Mark a launch entry as ``torch.compiler.disable`` marks a function (the attributes
    Dynamo reads, without importing PyTorch): Dynamo does not trace into it, it breaks the
    graph there with :data:`DYNAMO_REASON`."""
    fn._torchdynamo_disable = True
    fn._torchdynamo_disable_msg = DYNAMO_REASON
    return fn


def untraced(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with ``torch.compile``'s frame hook off where PyTorch's Dynamo is loaded
    (``torch.compiler.disable``): a kernel's first launch inside a compiled function (the eager
    side of the graph break at the launch) types, compiles and loads it, and Dynamo must not
    try to compile those frames or the libraries they call (under PyTorch 2.11 it tried
    ml_dtypes' ``finfo`` and failed the launch). It also keeps Dynamo out of kaiojit's later
    frames (:func:`kaiojit.torch.keep_dynamo_out`). Only a launch cache miss comes here."""
    if "torch._dynamo" not in sys.modules:
        return fn(*args)
    import torch

    from ..torch import keep_dynamo_out

    keep_dynamo_out()
    return torch.compiler.disable(fn, recursive=True)(*args)


def parse_launch_config(config: Any) -> tuple[Any, Any, Any, Any, Any]:
    """``(grid, block[, stream[, dynamic_shared_bytes[, cluster]]])`` as ``(grid, block,
    stream, shared, cluster)``; the cluster (a thread-block cluster's shape, sm_90) is None
    where not given."""
    if not isinstance(config, tuple) or not 2 <= len(config) <= 5:
        raise TypeError("launch configuration is kernel[grid, block], kernel[grid, block, stream], "
                        "kernel[grid, block, stream, dynamic_shared_bytes] or kernel[grid, block, "
                        "stream, dynamic_shared_bytes, cluster]")
    grid, block = config[0], config[1]
    stream = config[2] if len(config) > 2 else None
    shared = config[3] if len(config) > 3 else 0
    cluster = config[4] if len(config) > 4 else None
    check_stream(stream)
    return grid, block, stream, shared, cluster


def check_stream(stream: Any) -> None:
    """A launch's stream is None, an integer handle (0: the default stream), a kj.Stream or an
    object with ``__cuda_stream__`` (or numba's ``cuda_stream``): anything else is a TypeError
    when the launch is configured (the cpu backend would otherwise ignore it)."""
    cls = stream.__class__
    if stream is None or (isinstance(stream, int) and cls is not bool) or \
            hasattr(cls, "__cuda_stream__") or hasattr(cls, "cuda_stream"):
        return
    shown = f" {stream!r}" if isinstance(stream, (str, bytes, float, bool)) else ""
    raise TypeError(f"the launch stream must be a kj.Stream, an integer handle (0: the default "
                    f"stream), None or an object with __cuda_stream__; got "
                    f"{cls.__qualname__}{shown}")


class Launcher:
    """``kernel[grid, block, stream, shared]``: bound to a configuration, called with arguments.

    A call goes through the general path (:meth:`general`: type, compile, load, check, pack,
    launch). After it, the launcher builds the runtime's fast form of that launch (a plain
    function, see :mod:`kaiojit.runtime.native.fastlaunch`) and takes it as its ``__call__``; the
    dispatcher caches that function itself under the configuration, so the next
    ``kernel[grid, block]`` returns it and a launch is that one function. A call the fast form
    does not match comes back to :meth:`relaunch`. The form is rebuilt when the arguments'
    specialization or the calling thread's device token changed, at most
    ``MAX_FAST_REBUILDS`` times.
    """

    __slots__ = ("dispatcher", "grid", "block", "stream", "shared_mem", "cluster", "config",
                 "rebuilds", "fast", "_forms")

    def __init__(self, dispatcher: Any, grid: Any, block: Any, stream: Any = None,
                 shared_mem: Any = 0, cluster: Any = None, config: Any = None):
        self.dispatcher = dispatcher
        self.grid = grid
        self.block = block
        self.stream = stream
        self.shared_mem = shared_mem
        self.cluster = cluster  # a thread-block cluster's shape, or None
        self.config = config  # its key in the dispatcher's cache (None: not cached)
        self.rebuilds = 0
        self.fast: Any = None  # the generated fast form now in use, if any
        # the fast forms built, by the arguments' classes: (fast form, loaded kernel, token)
        self._forms: dict[tuple, tuple[Any, Any, Any]] = {}

    @outside_graphs
    @user_facing(errors=USER_ERRORS)  # the user's line, not kaiojit's frames
    def __call__(self, *args: Any) -> None:
        return self.general(args)

    @property
    def griddim(self) -> tuple[int, int, int]:
        """The grid as three extents (numba's name)."""
        return _dim3(self.grid)

    @property
    def blockdim(self) -> tuple[int, int, int]:
        """The block as three extents (numba's name)."""
        return _dim3(self.block)

    def __reduce__(self):
        """A configured launch pickles as its kernel and its configuration (numba's); one on
        a stream does not (a stream belongs to its process)."""
        if self.stream not in (None, 0) or self.cluster is not None:
            raise pickle.PicklingError("a launch configured with a stream or a cluster cannot "
                                       "be pickled; pickle the kernel and configure it again")
        return _configured, (self.dispatcher, self.grid, self.block, self.shared_mem)

    def general(self, args: tuple) -> None:
        """The general path (what a fast form that does not match ends in)."""
        d = self.dispatcher
        loaded = d.loaded_kernel(args)
        loaded.launch(self.grid, self.block, self.stream, self.shared_mem,
                      d.passed_args(args), self.cluster)
        if self.cluster is None:  # a cluster launch goes through cuLaunchKernelEx each time
            self._refresh(loaded, args)

    def relaunch(self, args: tuple, caller: Any) -> None:
        """A call that the fast form ``caller`` did not match: the fast form built for
        arguments of these classes, if it is another one (it tests the rest), else the
        general path."""
        form = self._forms.get(tuple([a.__class__ for a in args]))
        if form is not None and form[0] is not None and form[0] is not caller:
            return form[0](*args)
        return self._general_for_user(args)

    @user_facing(errors=USER_ERRORS)  # the user's line, not kaiojit's frames
    def _general_for_user(self, args: tuple) -> None:
        return self.general(args)

    def _refresh(self, loaded: Any, args: tuple) -> None:
        """After a general launch: build the fast form of this launch, unless the one for
        arguments of these classes is for this specialization, thread and device already
        (the launch came here for a value it could not pack)."""
        from ..runtime.backend import device_token
        from ..runtime.native.fastlaunch import FastPlan

        classes = tuple([a.__class__ for a in args])
        token = device_token(loaded.backend.current_device())
        form = self._forms.get(classes)
        if form is not None and form[1] is loaded and form[2] is token:
            return
        if self.rebuilds >= MAX_FAST_REBUILDS:
            return
        self.rebuilds += 1
        plan = FastPlan.direct(args, self.dispatcher.constexpr_positions, self.relaunch)
        fast = loaded.fast_path(self.grid, self.block, self.stream, self.shared_mem, plan)
        if len(self._forms) >= MAX_FAST_REBUILDS:
            self._forms.clear()
        self._forms[classes] = (fast, loaded, token)
        if fast is None:
            return  # the launcher keeps the fast form it has for other arguments
        self.fast = outside_graphs(fast)
        self.__class__ = type("_FastLauncher", (Launcher,),
                              {"__slots__": (), "__call__": staticmethod(fast)})
        if self.config is not None:
            self.dispatcher.cache_fast_launch(self.config, fast)


ConstexprLauncher = Launcher  # constexpr arguments are a part of the fast form's plan


def _dim3(dims: Any) -> tuple[int, int, int]:
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _configured(dispatcher: Any, grid: Any, block: Any, shared_mem: Any) -> Any:
    """A pickled configured launch."""
    return dispatcher[grid, block, None, shared_mem]


class ForallLauncher:
    """``kernel.forall(n)``: a 1-D launch of ``n`` threads, block size by occupancy."""

    def __init__(self, dispatcher: Any, n: int, stream: Any, shared_mem: int):
        self.dispatcher, self.n, self.stream, self.shared_mem = dispatcher, n, stream, shared_mem

    @outside_graphs
    @user_facing(errors=USER_ERRORS)  # the user's error, without kaiojit's frames
    def __call__(self, *args: Any) -> None:
        self._launch(args)

    def _launch(self, args: tuple) -> None:
        d = self.dispatcher
        loaded = d.loaded_kernel(args)
        block = min(d.forall_block_size(loaded, self.shared_mem), self.n)
        grid = (self.n + block - 1) // block
        loaded.launch(grid, block, self.stream, self.shared_mem, d.passed_args(args), None)


_get_backend = None  # kaiojit.runtime's get_backend and typeof, bound at the first launch
_typeof = None


def launch_key(args: tuple) -> tuple:
    """What a launch's specialization depends on: the backend and every argument's type."""
    if _get_backend is None:
        _bind_runtime()
    return (_get_backend(), *map(_typeof, args))


def _bind_runtime() -> None:
    global _get_backend, _typeof
    from ..runtime import get_backend, typeof

    _typeof = typeof
    _get_backend = get_backend


__all__ = ["DYNAMO_REASON", "ConstexprLauncher", "ForallLauncher", "Launcher", "launch_key",
           "outside_graphs", "parse_launch_config", "untraced"]
