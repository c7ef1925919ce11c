"""numba's CUDA ufuncs in the ``cuda`` namespace: ``cuda.vectorize`` and ``cuda.guvectorize``
are kaiojit's, returning numba's shape: an output given as a foreign device array (one with
only ``__cuda_array_interface__``) comes back as a device array viewing it, as numba's
``as_cuda_array`` makes one, where ``kj.``'s ufuncs give the object back as it was given."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import user_facing
from ..lib.ufunc import GUFunc, UFunc
from ..runtime import DeviceArray
from .host import as_cuda_array, is_cuda_array


def _numba_result(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_numba_result(v) for v in value)
    if isinstance(value, (DeviceArray, np.ndarray)) or not is_cuda_array(value):
        return value
    return as_cuda_array(value, sync=False)  # the ufunc's own work: nothing to wait for


class NumbaUFunc(UFunc):
    """``kj.vectorize``'s ufunc with numba's result for a foreign ``out``."""

    def __call__(self, *args: Any, out: Any = None, stream: Any = 0) -> Any:
        return _numba_result(super().__call__(*args, out=out, stream=stream))


class NumbaGUFunc(GUFunc):
    """``kj.guvectorize``'s gufunc with numba's result for foreign outputs."""

    def __call__(self, *args: Any, out: Any = None, stream: Any = 0) -> Any:
        return _numba_result(super().__call__(*args, out=out, stream=stream))


_NUMBA_CLASS = {UFunc: NumbaUFunc, GUFunc: NumbaGUFunc}


def numba_ufunc(made: Any) -> Any:
    """What ``kj.vectorize`` / ``kj.guvectorize`` returned, made numba's: a ufunc's class
    becomes its numba subclass (no state of its own), a decorator decorates so."""
    cls = _NUMBA_CLASS.get(type(made))
    if cls is not None:
        made.__class__ = cls
        return made
    if callable(made) and not isinstance(made, (NumbaUFunc, NumbaGUFunc)):
        @user_facing
        def decorate(pyfunc: Any) -> Any:
            return numba_ufunc(made(pyfunc))
        return decorate
    return made


def guvectorize(*args: Any, **kwargs: Any) -> Any:
    """numba's ``cuda.guvectorize``: ``kj.guvectorize`` with numba's results."""
    from ..lib.ufunc import guvectorize as kj_guvectorize

    return numba_ufunc(kj_guvectorize(*args, **kwargs))
