"""Launching a ``@kj.jit`` kernel: ``kernel[grid, block, stream, shared]`` and ``.forall(n)``.

``parse_launch_config`` reads numba's configuration tuple; :class:`Launcher` is the bound
configuration a launch calls, and :class:`ForallLauncher` the 1-D one sized by occupancy. A
launch finds its loaded kernel by :func:`launch_key` (the backend and every argument's type)
in its dispatcher's ``_launch_cache``; a miss goes through ``dispatcher._prepare`` (type,
compile, load).
"""

from __future__ import annotations

from typing import Any

from .errors import CompileError

MAX_FAST_REBUILDS = 8  # a launcher fed ever-changing argument kinds stops specializing


def parse_launch_config(config: Any) -> tuple[Any, Any, Any, Any]:
    """``(grid, block[, stream[, dynamic_shared_bytes]])`` as ``(grid, block, stream, shared)``."""
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise TypeError("launch configuration is kernel[grid, block], kernel[grid, block, stream] "
                        "or kernel[grid, block, stream, dynamic_shared_bytes]")
    grid, block = config[0], config[1]
    stream = config[2] if len(config) > 2 else None
    shared = config[3] if len(config) > 3 else 0
    return grid, block, stream, shared


class Launcher:
    """``kernel[grid, block, stream, shared]``: bound to a configuration, called with arguments.

    After a launch through the general path, the launcher takes the runtime's fast form of
    that launch (arguments of the same kinds, same device and thread) as its own ``__call__``,
    in a class of its own; the fast form hands anything else back to :meth:`general`.
    """

    __slots__ = ("dispatcher", "grid", "block", "stream", "shared_mem", "rebuilds")

    def __init__(self, dispatcher: Any, grid: Any, block: Any, stream: Any = None,
                 shared_mem: Any = 0):
        self.dispatcher = dispatcher
        self.grid = grid
        self.block = block
        self.stream = stream
        self.shared_mem = shared_mem
        self.rebuilds = 0

    def general(self, args: tuple) -> None:
        """The general path (what a fast form hands back to)."""
        return Launcher.__call__(self, *args)

    def __call__(self, *args: Any) -> None:
        # the general path: one key of the backend and the argument types, one dict lookup
        try:
            loaded = self.dispatcher._launch_cache.get((_get_backend(), *map(_typeof, args)))
        except TypeError:  # first launch (runtime not bound yet) or an argument kaiojit can't type
            loaded = None
        if loaded is None:
            try:
                loaded = self.dispatcher._prepare(args)
            except CompileError as e:  # the user's line, not kaiojit's frames
                raise e.with_traceback(None) from None
        loaded.launch(self.grid, self.block, self.stream, self.shared_mem, args, None)
        if self.rebuilds < MAX_FAST_REBUILDS:
            self.rebuilds += 1
            fast = loaded.fast_path(self.grid, self.block, self.stream, self.shared_mem, args)
            if fast:
                self.__class__ = type("_FastLauncher", (Launcher,),
                                      {"__slots__": (), "__call__": fast})
            else:
                self.__class__ = Launcher

    @property
    def fast(self) -> Any:
        """The generated fast form this launcher uses, if any (for tests and inspection)."""
        call = type(self).__call__
        return None if call is Launcher.__call__ else call


class ConstexprLauncher(Launcher):
    """The launcher of a kernel with constexpr parameters: their values choose the compiled
    kernel and are not passed to it (the general path only)."""

    __slots__ = ()

    def __call__(self, *args: Any) -> None:
        try:
            self.dispatcher._launch(self.grid, self.block, self.stream, self.shared_mem, args)
        except CompileError as e:  # the user's line, not kaiojit's frames
            raise e.with_traceback(None) from None


class ForallLauncher:
    """``kernel.forall(n)``: a 1-D launch of ``n`` threads, block size by occupancy."""

    def __init__(self, dispatcher: Any, n: int, stream: Any, shared_mem: int):
        self.dispatcher, self.n, self.stream, self.shared_mem = dispatcher, n, stream, shared_mem

    def __call__(self, *args: Any) -> None:
        d = self.dispatcher
        try:
            loaded = d._loaded_for(args)
        except CompileError as e:  # the user's error, without kaiojit's frames
            raise e.with_traceback(None) from None
        block = d._block_size_cache.get(loaded)
        if block is None:
            block = d._block_size_cache[loaded] = loaded.suggest_block_size(self.shared_mem)
        block = min(block, self.n)
        grid = (self.n + block - 1) // block
        loaded.launch(grid, block, self.stream, self.shared_mem, d._runtime_args(args), None)


_get_backend = None  # kaiojit.runtime's get_backend and typeof, bound at the first launch
_typeof = None


def launch_key(args: tuple) -> tuple:
    """What a launch's specialization depends on: the backend and every argument's type."""
    if _get_backend is None:
        _bind_runtime()
    return (_get_backend(), *map(_typeof, args))


def _bind_runtime() -> None:
    global _get_backend, _typeof
    from .runtime import get_backend, typeof

    _typeof = typeof
    _get_backend = get_backend


__all__ = ["ConstexprLauncher", "ForallLauncher", "Launcher", "launch_key", "parse_launch_config"]
