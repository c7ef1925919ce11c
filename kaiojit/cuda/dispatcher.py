"""numba's ``CUDADispatcher`` API on kaiojit's :class:`~kaiojit.dispatcher.Dispatcher`.

numba keys what it compiled by argument-type tuples (``kernel.overloads[(float32[:],)]``,
``kernel.inspect_asm()`` as ``{(float32[:],): ptx}``, ``kernel.signatures`` a list of
tuples); ``kj``'s dispatcher keys by :class:`~kaiojit.types.Signature`. This subclass gives
numba's shapes; ``cuda.jit`` returns it, ``kj.jit`` the plain one.
"""

from __future__ import annotations

import numbers
import warnings

from .. import types as T
from ..dispatcher import Dispatcher
from ..errors import PerformanceWarning

LOW_OCCUPANCY_GRID = 128  # numba's threshold of blocks


class LaunchWarnings:
    """numba's ``config.CUDA_LOW_OCCUPANCY_WARNINGS``: a kernel configured with fewer than
    128 blocks warns (a PerformanceWarning) that the GPU is likely under-used. numba warns
    by default; kaiojit does where ``low_occupancy`` is set (a small grid is often meant)."""

    low_occupancy = False


launch_warnings = LaunchWarnings()


class CUDADispatcher(Dispatcher):
    """A kernel or device function with numba's inspection and specialization API."""

    @property
    def extensions(self) -> list:
        """numba's dispatcher extensions: objects whose ``prepare_args(ty, val, stream=,
        retr=)`` each launch calls on every argument, in order, before packing it (it returns
        the type and value to pass; callables it appends to ``retr`` run after the launch)."""
        found = self.__dict__.get("_extensions")
        if found is None:
            found = self.__dict__["_extensions"] = []
        return found

    def forall(self, ntasks: int, tpb: int = 0, stream=0, sharedmem: int = 0):
        """numba's ``forall``: ``ntasks`` threads; none is a launch of nothing (numba's), a
        negative count numba's ValueError. ``tpb`` is the block size (0: by occupancy)."""
        if ntasks < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")
        if ntasks == 0:
            return _no_launch
        if tpb:
            return self[-(-ntasks // tpb), tpb, stream or None, sharedmem]
        return super().forall(ntasks, stream=stream or None, shared_mem=sharedmem)

    def _check_config(self, config) -> None:
        _check_dims(config)  # numba's errors, when the kernel is configured
        if launch_warnings.low_occupancy and isinstance(config, tuple) and config:
            _warn_if_low_occupancy(config[0])

    def __getitem__(self, config):
        launcher = super().__getitem__(config)
        extensions = self.__dict__.get("_extensions")
        return _ExtendedLauncher(launcher, extensions) if extensions else launcher

    def __call__(self, *args, **kwargs):
        if self.device:
            return super().__call__(*args, **kwargs)
        raise ValueError(f"launch configuration was not specified for kernel "
                         f"{self.__qualname__}: launch it as {self.__name__}[grid, block](...)")

    def _arg_tuples(self) -> list[tuple]:
        return [sig.args for sig in Dispatcher.signatures.fget(self)]

    @property
    def signatures(self) -> list[tuple]:
        """The argument types of each compiled signature (numba's list of tuples)."""
        return self._arg_tuples()

    @property
    def overloads(self) -> dict:
        """{argument types: compiled kernel} for every compiled signature."""
        if self.device:
            return dict(self._device_cache)
        return {sig.args: CompiledOverload(self, ck) for (_, sig), ck in self._compiled.items()}

    @property
    def specializations(self) -> dict:
        return getattr(self, "_specializations", {})

    def specialize(self, *args) -> CUDADispatcher:
        """A dispatcher compiled for the types of ``args`` only (numba's ``specialize``):
        values, or types themselves (``f.specialize(float32[::1])``). A dispatcher with
        signatures, or one made by ``specialize``, is specialized already: RuntimeError."""
        from ..runtime import typeof

        if self._eager:  # a specialization has its one signature too
            raise RuntimeError(f"Dispatcher already specialized: {self.__qualname__} has "
                               f"its signature(s) {[str(s) for s in self._eager]}")
        argtypes = tuple(a if isinstance(a, T.Type) else typeof(a) for a in args)
        specs = self.__dict__.setdefault("_specializations", {})
        found = specs.get(argtypes)
        if found is None:
            found = Dispatcher(self.py_func, self.options, device=self.device,
                               signatures=(T.Signature(argtypes),))
            found.__class__ = CUDADispatcher
            specs[argtypes] = found
        return found

    def _compiled_for(self, signature):
        """A kernel compiled for ``signature``; a device function compiled on its own (numba
        inspects a device function's PTX as the ``.func`` it compiles)."""
        if self.device:
            if isinstance(signature, tuple):
                signature = T.Signature(signature)
            return self.compile_device(signature)
        return self.compile(signature)

    def _stage_by_args(self, stage: str, signature):
        if signature is not None:
            return self._compiled_for(signature).stage(stage)
        out = {}
        for args in self._arg_tuples():
            out[args] = self._compiled_for(T.Signature(args)).stage(stage)
        return out

    def inspect_asm(self, signature=None):
        """PTX: a str for one signature, {argument types: str} for every compiled one."""
        return self._stage_by_args("ptx", signature)

    def inspect_lto_ptx(self, signature=None):
        """PTX after link-time optimization. kaiojit links device functions (and libdevice)
        into one LLVM module before NVPTX runs, so this is :meth:`inspect_asm`'s PTX;
        ``signature`` may be numba's tuple of argument types."""
        if isinstance(signature, (tuple, list)):
            signature = T.Signature(tuple(signature))
        return self._stage_by_args("ptx", signature)

    def inspect_llvm(self, signature=None):
        """LLVM IR: a str for one signature, {argument types: str} for every compiled one."""
        return self._stage_by_args("llvm", signature)

    def _resource(self, field: str, signature):
        """One figure of :meth:`resources`: an int for one signature, {argument types: int}
        for every compiled one (numba's ``get_regs_per_thread`` and friends); an int too for
        a kernel declared with one signature (numba's specialized dispatcher)."""
        if signature is None and self._eager and len(self._eager) == 1:
            signature = self._eager[0]
        if signature is not None:
            return int(getattr(self.resources(signature), field))
        return {args: int(getattr(self.resources(T.Signature(args)), field))
                for args in self._arg_tuples()}

    def get_regs_per_thread(self, signature=None):
        return self._resource("registers", signature)

    def get_shared_mem_per_block(self, signature=None):
        return self._resource("shared_bytes", signature)

    def get_local_mem_per_thread(self, signature=None):
        return self._resource("local_bytes", signature)

    def get_const_mem_size(self, signature=None):
        return self._resource("const_bytes", signature)

    def get_max_threads_per_block(self, signature=None):
        return self._resource("max_threads_per_block", signature)

    def inspect_types(self, file=None, **kwargs) -> None:
        """Print each compiled signature's typed kernel IR (numba prints its typed IR)."""
        import sys

        out = file or sys.stdout
        for args in self._arg_tuples():
            print(f"{self.__name__} {args}", file=out)
            print("-" * 80, file=out)
            print(self.inspect_kir(T.Signature(args)), file=out)


def _check_dims(config) -> None:
    """numba's checks of ``kernel[griddim, blockdim, ...]``, made when the kernel is
    configured (kaiojit's own launcher checks at the launch): each is an integer or a
    sequence of 1 to 3 integers, a ValueError or TypeError in numba's words."""
    if not isinstance(config, tuple) or len(config) < 2:
        return  # kaiojit's launcher names the shape it takes
    for value, name in ((config[0], "griddim"), (config[1], "blockdim")):
        dims = list(value) if isinstance(value, (tuple, list)) else [value]
        if len(dims) > 3:
            raise ValueError(f"{name} must be a sequence of 1, 2 or 3 integers, got {dims!r}")
        if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) for d in dims):
            raise TypeError(f"{name} must be a sequence of integers, got {dims!r}")


def _warn_if_low_occupancy(grid) -> None:
    blocks = 1
    for n in grid if isinstance(grid, (tuple, list)) else (grid,):
        blocks *= n
    if blocks < LOW_OCCUPANCY_GRID:
        warnings.warn(f"Grid size {blocks} will likely result in GPU under-utilization due to "
                      "low occupancy.", PerformanceWarning, stacklevel=5)


class CompiledOverload:
    """A compiled kernel as numba's ``overloads`` values show it: kaiojit's
    :class:`~kaiojit.compiler.CompiledKernel` (its attributes read through) with numba's
    ``cooperative`` (it synchronizes its grid, so it launches cooperatively) and
    ``max_cooperative_grid_blocks(blockdim, dynsmemsize=0)``."""

    __slots__ = ("_dispatcher", "_kernel")

    def __init__(self, dispatcher: Dispatcher, kernel):
        self._dispatcher = dispatcher
        self._kernel = kernel

    def __getattr__(self, name: str):
        return getattr(self._kernel, name)

    def __repr__(self) -> str:
        return repr(self._kernel)

    @property
    def cooperative(self) -> bool:
        from ..runtime.cooperative import is_cooperative

        return is_cooperative(self._kernel)

    def max_cooperative_grid_blocks(self, blockdim, dynsmemsize: int = 0) -> int:
        return self._dispatcher.max_cooperative_grid_blocks(blockdim, dynsmemsize,
                                                            self._kernel.signature)


def _no_launch(*args) -> None:
    """``forall(0)``: no thread, no launch."""


class _ExtendedLauncher:
    """A launch through numba's dispatcher extensions (``CUDADispatcher.extensions``)."""

    __slots__ = ("extensions", "launcher")

    def __init__(self, launcher, extensions: list):
        self.launcher = launcher
        self.extensions = tuple(extensions)

    def __call__(self, *args):
        from ..runtime import typeof

        stream = getattr(self.launcher, "stream", None) or 0
        retr: list = []
        prepared = []
        for value in args:
            try:
                ty = typeof(value)
            except TypeError:
                ty = None
            for ext in self.extensions:
                ty, value = ext.prepare_args(ty, value, stream=stream, retr=retr)
            prepared.append(value)
        self.launcher(*prepared)
        for after in retr:
            after()


def numba_dispatcher(dispatcher: Dispatcher) -> CUDADispatcher:
    """``dispatcher`` with numba's API (the same object, of the subclass)."""
    dispatcher.__class__ = CUDADispatcher
    return dispatcher
