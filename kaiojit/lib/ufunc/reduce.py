"""``@kj.reduce``: a binary function reduced over an array on the device, as numba's
``cuda.reduce``.

Two passes of one generated kernel: each of up to ``MAX_BLOCKS`` blocks of ``BLOCK`` threads
folds a grid-strided share of the array (every thread starts from its own first element, so
no identity is needed) and then its threads' values, in a tree in shared memory, into one
partial; one block then reduces the partials the same way and folds in ``init``. The order of
the combinations is not left to right: the function must be associative and commutative.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

import kaiojit as kj
from kaiojit import types as kt

from .source import (
    as_device,
    compile_generated,
    is_device_array_like,
    synchronize_stream,
    user_facing,
)

BLOCK = 256  # threads a block (a power of two: the tree halves it)
MAX_BLOCKS = 1024  # partials of the first pass; one block of BLOCK threads takes them all


class Reduce:
    """A binary function reduced over arrays; ``r(arr, size=None, res=None, init=0,
    stream=0)`` as numba's ``cuda.reduce`` objects."""

    def __init__(self, pyfunc: Callable, options: dict[str, Any] | None = None):
        pyfunc = getattr(pyfunc, "py_func", pyfunc)
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"kj.reduce takes a Python function, got {type(pyfunc).__name__}")
        params = inspect.signature(pyfunc).parameters
        if len(params) != 2:
            raise TypeError(f"kj.reduce needs a binary function; {pyfunc.__qualname__} takes "
                            f"{len(params)} arguments")
        self.py_func = pyfunc
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self._options = dict(options or {})
        self._device = kj.jit(device=True, **self._options)(pyfunc)
        self._kernels: dict[np.dtype, Any] = {}

    def __repr__(self) -> str:
        return f"<kaiojit reduce {self.__qualname__}>"

    @property
    def kernels(self) -> list[Any]:
        """The kernels generated so far, one a dtype (``kj.jit`` objects)."""
        return list(self._kernels.values())

    @user_facing
    def __call__(self, arr: Any, size: int | None = None, res: Any = None, init: Any = 0,
                 stream: Any = 0) -> Any:
        """Reduce ``arr`` (its first ``size`` elements) to ``f(reduction, init)``. With ``res``
        (a device array) the result goes to ``res[0]`` on ``stream`` and None is returned;
        else the result is returned as a scalar of ``arr``'s dtype. An empty ``arr`` gives
        ``init``."""
        data = self._as_1d(arr, size, stream)
        return self._run(data, data.dtype.type(init), res, stream)

    @user_facing
    def reduce_without_init(self, arr: Any, stream: Any = 0) -> Any:
        """The reduction of ``arr``'s elements alone (a ufunc's ``.reduce``)."""
        data = self._as_1d(arr, None, stream)
        if data.size == 0:
            raise ValueError(f"zero-size array to reduction operation {self.__name__} which "
                             "has no identity")
        return self._run(data, None, None, stream)

    def _as_1d(self, arr: Any, size: int | None, stream: Any) -> Any:
        what = f"{self.__name__}(): arr"
        if is_device_array_like(arr):
            data = as_device(arr, what)
        elif isinstance(arr, np.ndarray):
            if arr.ndim != 1:
                raise TypeError(f"{what} must be 1-D, got shape {arr.shape}")
            data = arr
        else:
            raise TypeError(f"{what} must be a 1-D array (NumPy or device), got "
                            f"{type(arr).__name__}")
        if data.ndim != 1:
            raise TypeError(f"{what} must be 1-D, got shape {tuple(data.shape)}")
        try:
            kt.from_dtype(data.dtype)
        except TypeError:
            raise TypeError(f"{what}: kaiojit has no type for dtype {data.dtype}") from None
        if size is not None:
            if not 0 <= size <= data.shape[0]:
                raise ValueError(f"{self.__name__}(): size {size} is outside 0..{data.shape[0]}")
            data = data[:size]
        if isinstance(data, np.ndarray) and data.size:
            data = kj.to_device(data, stream=stream)
        return data

    def _run(self, data: Any, init: Any, res: Any, stream: Any) -> Any:
        dtype = data.dtype
        n = data.shape[0]
        host_res = isinstance(res, np.ndarray)
        if res is not None and not host_res:
            res = as_device(res, f"{self.__name__}(): res")
        if res is not None and res.size < 1:
            raise ValueError(f"{self.__name__}(): res must hold at least one element")
        if n == 0:  # only with an init (reduce_without_init refuses empty arrays)
            if res is None:
                return init
            res[0] = init
            return None
        kernel = self._kernel(dtype)
        use_init = init is not None
        init = dtype.type(0) if init is None else init
        target = res if res is not None and not host_res else kj.device_array(1, dtype)
        blocks = min((n + BLOCK - 1) // BLOCK, MAX_BLOCKS)
        if blocks == 1:
            kernel[1, BLOCK, stream](data, np.int64(n), target, init, use_init)
        else:
            partials = kj.device_array(blocks, dtype)
            kernel[blocks, BLOCK, stream](data, np.int64(n), partials, init, False)
            kernel[1, BLOCK, stream](partials, np.int64(blocks), target, init, use_init)
        if res is not None and not host_res:
            return None
        value = target.copy_to_host(stream=stream)
        synchronize_stream(stream)
        if host_res:
            res[0] = value[0]
            return None
        return value[0]

    def _kernel(self, dtype: np.dtype) -> Any:
        kernel = self._kernels.get(dtype)
        if kernel is None:
            # a lambda's name, <lambda>, is no identifier: the kernel is named reduce then
            name = f"{self.__name__ if self.__name__.isidentifier() else 'lambda'}_reduce"
            source = reduce_source(name, kt.from_dtype(dtype))
            kernel = self._kernels[dtype] = compile_generated(
                name, source, {"kj": kj, "binary_function": self._device}, self._options)
        return kernel


def reduce_source(name: str, scalar: kt.ScalarType) -> str:
    """One pass: block ``b`` reduces its grid-strided share of ``src[:n]`` into ``dst[b]``
    (folding in ``init`` when ``use_init``). Every block of the grid has at least one
    element: the launch has no more than ``ceil(n / BLOCK)`` blocks."""
    t = f"kj.{scalar}"
    return f'''def {name}(src, n, dst, init, use_init):
    part = kj.shared.array({BLOCK}, {t})
    tid = kj.threadIdx.x
    i = kj.grid(1)
    if i < n:
        acc = src[i]
        i += kj.gridsize(1)
        while i < n:
            acc = {t}(binary_function(acc, src[i]))
            i += kj.gridsize(1)
        part[tid] = acc
    kj.syncthreads()
    count = min(n - kj.blockIdx.x * {BLOCK}, {BLOCK})
    step = {BLOCK // 2}
    while step > 0:
        if tid < step and tid + step < count:
            part[tid] = {t}(binary_function(part[tid], part[tid + step]))
        kj.syncthreads()
        count = min(count, step)
        step //= 2
    if tid == 0:
        if use_init:
            dst[kj.blockIdx.x] = {t}(binary_function(part[0], init))
        else:
            dst[kj.blockIdx.x] = part[0]
'''


def reduce(func: Callable | None = None, **options: Any) -> Any:
    """``@kj.reduce``: a binary scalar function made a device reduction (see :class:`Reduce`);
    ``@kj.reduce(fastmath=True)`` passes ``kj.jit`` options."""
    if func is None:
        return lambda f: Reduce(f, options)
    return Reduce(func, options)
