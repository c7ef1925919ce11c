"""``@kj.guvectorize``: a function over array cores made a generalized ufunc, as numba's CUDA
gufuncs (NumPy's generalized ufuncs: docs.scipy.org "generalized ufuncs").

``@kj.guvectorize(["void(float32[:, :], float32[:, :], float32[:, :])"], "(m,n),(n,p)->(m,p)")``
types the core function for every signature at decoration (as a device function, so its
errors point at its lines). A call binds the layout's dimension names to the operands'
trailing dimensions, broadcasts the leading (loop) dimensions of the inputs, allocates the
outputs that are not given and launches a generated kernel in which each thread calls the
core function on one element of the loop: views of the operands' cores (a scalar, for a
scalar argument of the signature under a ``()`` core).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import kaiojit as kj
from kaiojit import types as kt

from .source import (
    as_device,
    broadcast_view,
    compile_generated,
    is_device_array_like,
    parse_signature,
    synchronize_stream,
    user_facing,
)

_CORE = re.compile(r"\(([^()]*)\)")


def parse_layout(layout: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """``"(m,n),(n)->(m)"`` as the inputs' and the outputs' core dimension names."""
    if not isinstance(layout, str) or layout.count("->") != 1:
        raise ValueError(f"a gufunc layout is like '(m,n),(n)->(m)', got {layout!r}")
    sides = layout.replace(" ", "").split("->")
    parsed = []
    for side in sides:
        cores = _CORE.findall(side)
        if ",".join(f"({c})" for c in cores) != side or not cores:
            raise ValueError(f"bad gufunc layout {layout!r}: each side is a comma-separated "
                             "list of '(dims)'")
        parsed.append([tuple(d for d in c.split(",") if d) for c in cores])
    for core in parsed[0] + parsed[1]:
        for d in core:
            if not d.isidentifier():
                raise ValueError(f"bad gufunc layout {layout!r}: {d!r} is not a dimension name")
    return parsed[0], parsed[1]


class _Arg:
    """One formal argument: its core dimension names and its type in a signature."""

    __slots__ = ("core", "scalar")

    def __init__(self, core: tuple[str, ...], scalar: bool):
        self.core = core
        self.scalar = scalar  # a scalar of the signature under a () core


class GUFunc:
    """A generalized ufunc made from a core function; call it like NumPy's gufuncs."""

    def __init__(self, pyfunc: Callable, signatures: Sequence[Any], layout: str,
                 options: dict[str, Any]):
        self.py_func = pyfunc
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self.layout = layout
        self.in_cores, self.out_cores = parse_layout(layout)
        self.nin, self.nout = len(self.in_cores), len(self.out_cores)
        nparams = len(inspect.signature(pyfunc).parameters)
        if nparams != self.nin + self.nout:
            raise TypeError(f"@guvectorize of {pyfunc.__qualname__}: the layout {layout!r} "
                            f"has {self.nin + self.nout} arguments, the function takes {nparams}")
        self.signatures = [self._parse(sig) for sig in signatures]
        self._options = options
        self._device = kj.jit(list(self.signatures), device=True, **options)(pyfunc)
        self._kernels: dict[tuple, Any] = {}

    def __repr__(self) -> str:
        return f"<kaiojit gufunc {self.__qualname__} {self.layout!r}>"

    def __reduce__(self):
        """Pickled as a ufunc is (``UFunc.__reduce__``), with its layout."""
        return _rebuilt, (type(self), self._device, self.signatures, self.layout, self._options)

    def _parse(self, sig: Any) -> kt.Signature:
        where = f"@guvectorize of {self.py_func.__qualname__}"
        parsed = parse_signature(sig, where, "void(float32[:], float32[:])", tuples=True)
        if parsed.return_type != kt.void:
            raise TypeError(f"guvectorized functions cannot return values: signature {sig!r} "
                            f"specifies {parsed.return_type} return type")
        if len(parsed.args) != self.nin + self.nout:
            raise TypeError(f"{where}: signature {sig!r} has {len(parsed.args)} arguments, the "
                            f"layout {self.layout!r} has {self.nin + self.nout}")
        for i, (t, core) in enumerate(zip(parsed.args, self.in_cores + self.out_cores)):
            ndim = t.ndim if isinstance(t, kt.ArrayType) else 0
            old_style = not core and ndim == 1  # a () core passed as a 1-element array
            if ndim != len(core) and not old_style:
                raise TypeError(f"{where}: argument {i + 1} of {sig!r} is {t}; the layout "
                                f"gives it {len(core)} dimension(s)")
            if i >= self.nin and not isinstance(t, kt.ArrayType):
                raise TypeError(f"{where}: output argument {i + 1} of {sig!r} must be an array")
        return parsed

    # --- calling ------------------------------------------------------------------------------

    @user_facing
    def __call__(self, *args: Any, out: Any = None, stream: Any = 0) -> Any:
        nin, nout = self.nin, self.nout
        if len(args) not in (nin, nin + nout):
            n = len(args)
            raise TypeError(f"gufunc accepts {nin} positional arguments or {nin + nout} "
                            f"positional arguments (outputs included). Got {n} positional "
                            f"argument{'s' if n != 1 else ''}.")
        outs: list[Any] = list(args[nin:]) if len(args) > nin else [None] * nout
        if out is not None:
            if len(args) > nin:
                raise ValueError("cannot specify argument 'out' as both positional and keyword")
            outs = list(out) if isinstance(out, tuple) else [out]
            if len(outs) != nout:
                raise ValueError(f"{self.__name__}(): out has {len(outs)} arrays, the gufunc "
                                 f"has {nout} outputs")
        inputs = [_as_operand(a, f"{self.__name__}(): input {i + 1}")
                  for i, a in enumerate(args[:nin])]
        given_outs = outs
        outs = [o if o is None or isinstance(o, np.ndarray)
                else as_device(o, f"{self.__name__}(): output {k + 1}")
                for k, o in enumerate(outs)]
        sig = self._resolve(inputs)
        device_call = any(is_device_array_like(a) for a in inputs)
        dims, loop = self._bind(inputs, outs)
        ins = [self._input(a, t, stream) for a, t in zip(inputs, sig.args)]
        results, host_outs = [], []
        for k, (given, t, core) in enumerate(zip(outs, sig.args[nin:], self.out_cores)):
            shape = loop + tuple(dims[d] for d in core)
            if given is None:
                results.append(kj.device_array(shape, t.dtype.np_dtype))
                host_outs.append(None)
            elif isinstance(given, np.ndarray):
                self._check_out(given, t, shape, k)
                results.append(kj.to_device(given, stream=stream))
                host_outs.append(given)
            else:
                self._check_out(given, t, shape, k)
                results.append(given)
                host_outs.append(None)
        if int(np.prod(loop, dtype=np.int64)) and all(r.size for r in results):
            self._launch(sig, ins, results, loop, stream)
        returned = []
        for res, host, given in zip(results, host_outs, given_outs):
            if host is not None:
                res.copy_to_host(out=host, stream=stream)
                returned.append(host)
            elif given is not None or device_call:
                returned.append(given if given is not None else res)
            else:
                returned.append(res.copy_to_host(stream=stream))
        if any(h is not None for h in host_outs) or not device_call:
            synchronize_stream(stream)
        return returned[0] if nout == 1 else tuple(returned)

    def _resolve(self, inputs: list[Any]) -> kt.Signature:
        """The first signature whose input dtypes are the inputs' exactly, else the first to
        which every input casts safely, else (one signature) that one: NumPy inputs are cast
        to it, device arrays cannot be."""
        dtypes = [np.asarray(a).dtype if not is_device_array_like(a) else a.dtype
                  for a in inputs]
        for casting in ("equiv", "safe", "same_kind"):
            for sig in self.signatures:
                if all(np.can_cast(d, t.dtype.np_dtype if isinstance(t, kt.ArrayType)
                                   else t.np_dtype, casting=casting)
                       for d, t in zip(dtypes, sig.args)):
                    return sig
        if len(self.signatures) == 1:
            return self.signatures[0]
        have = "; ".join(str(s) for s in self.signatures)
        raise TypeError(f"{self.__name__}(): no signature takes the input dtypes "
                        f"({', '.join(map(str, dtypes))}); the signatures are {have}")

    def _bind(self, inputs: list[Any], outs: list[Any]) -> tuple[dict[str, int], tuple]:
        """The size of every dimension name, and the broadcast loop shape of the inputs."""
        dims: dict[str, int] = {}
        loops = []
        operands = [(a, core, f"input {i + 1}") for i, (a, core) in
                    enumerate(zip(inputs, self.in_cores))]
        operands += [(o, core, f"output {k + 1}") for k, (o, core) in
                     enumerate(zip(outs, self.out_cores)) if o is not None]
        for value, core, what in operands:
            shape = tuple(np.shape(value)) if not is_device_array_like(value) else \
                tuple(value.shape)
            if len(shape) < len(core):
                raise ValueError(f"{self.__name__}(): {what} has {len(shape)} dimension(s), "
                                 f"its core {('(' + ','.join(core) + ')')} needs {len(core)}")
            split = len(shape) - len(core)
            for name, n in zip(core, shape[split:]):
                if dims.setdefault(name, n) != n:
                    raise ValueError(f"{self.__name__}(): dimension {name!r} is {dims[name]} "
                                     f"and {n} ({what})")
            if what.startswith("input"):
                loops.append(shape[:split])
        for core in self.out_cores:
            for name in core:
                if name not in dims:
                    raise ValueError(f"{self.__name__}(): the output dimension {name!r} is not "
                                     "set by an input; pass the output")
        try:
            loop = tuple(np.broadcast_shapes(*loops))
        except ValueError:
            raise ValueError(f"{self.__name__}(): the inputs' loop dimensions "
                             f"{' '.join(map(str, loops))} do not broadcast") from None
        return dims, loop

    def _input(self, value: Any, t: kt.Type, stream: Any) -> Any:
        dtype = t.dtype.np_dtype if isinstance(t, kt.ArrayType) else t.np_dtype
        if is_device_array_like(value):
            dev = as_device(value, f"{self.__name__}(): an input")
            if dev.dtype != dtype:
                raise TypeError(f"{self.__name__}(): a device array of {dev.dtype} where the "
                                f"signature takes {dtype}: kaiojit does not support .astype() "
                                "on device arrays here; convert it first")
            return dev
        return kj.to_device(np.ascontiguousarray(np.asarray(value, dtype=dtype)), stream=stream)

    def _check_out(self, arr: Any, t: kt.ArrayType, shape: tuple, k: int) -> None:
        """``arr`` has ``shape`` (leading dimensions of length 1 may be left out of either,
        as NumPy's broadcasting lets them) and the signature's dtype."""
        if _without_leading_ones(tuple(arr.shape)) != _without_leading_ones(shape):
            raise ValueError(f"{self.__name__}(): output {k + 1} has shape {tuple(arr.shape)}, "
                             f"expected {shape}")
        if arr.dtype != t.dtype.np_dtype:
            raise TypeError(f"{self.__name__}(): output {k + 1} has dtype {arr.dtype}, the "
                            f"signature writes {t.dtype}")

    # --- launching ----------------------------------------------------------------------------

    def _launch(self, sig: kt.Signature, ins: list[Any], outs: list[Any], loop: tuple,
                stream: Any) -> None:
        loop1 = loop or (1,)  # a loop of one element: every operand gets a leading 1
        views = []
        for arr, core in zip(ins + outs, self.in_cores + self.out_cores):
            core_shape = tuple(arr.shape[arr.ndim - len(core):]) if core else ()
            views.append(broadcast_view(arr, loop1 + core_shape))
        kernel = self._kernel(sig, len(loop1))
        n = int(np.prod(loop1, dtype=np.int64))
        kernel.forall(n, stream=stream)(*views)

    def _kernel(self, sig: kt.Signature, loop_ndim: int) -> Any:
        key = (sig, loop_ndim)
        kernel = self._kernels.get(key)
        if kernel is None:
            name = f"{self.__name__}_gufunc_{loop_ndim}d"
            args = [_Arg(core, not isinstance(t, kt.ArrayType))
                    for t, core in zip(sig.args, self.in_cores + self.out_cores)]
            source = gufunc_source(name, args, loop_ndim)
            kernel = self._kernels[key] = compile_generated(
                name, source, {"kj": kj, "core_function": self._device}, self._options)
        return kernel


def gufunc_source(name: str, args: list[_Arg], loop_ndim: int) -> str:
    """The kernel calling ``core_function`` on one element of the loop a thread: the thread
    index split into ``loop_ndim`` indices of the first output's loop dimensions."""
    params = [f"x{k}" for k in range(len(args))]
    total = " * ".join(f"{params[-1]}.shape[{d}]" for d in range(loop_ndim))
    lines = [f"def {name}({', '.join(params)}):",
             "    i = kj.grid(1)",
             f"    if i < {total}:",
             "        rest = i"]
    for d in range(loop_ndim - 1, 0, -1):
        lines += [f"        i{d} = rest % {params[-1]}.shape[{d}]",
                  f"        rest = rest // {params[-1]}.shape[{d}]"]
    lines.append("        i0 = rest")
    idx = [f"i{d}" for d in range(loop_ndim)]
    operands = []
    for p, a in zip(params, args):
        if a.scalar or a.core:
            operands.append(f"{p}[{', '.join(idx)}]")
        else:  # a () core as a 1-element array
            operands.append(f"{p}[{', '.join(idx[:-1] + [f'{idx[-1]}:{idx[-1]} + 1'])}]")
    lines.append(f"        core_function({', '.join(operands)})")
    return "\n".join(lines) + "\n"


def _without_leading_ones(shape: tuple) -> tuple:
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _as_operand(value: Any, what: str) -> Any:
    """An input as the call sees it: device arrays as kj.DeviceArray views (a foreign one
    may have no ``shape`` or ``dtype`` of its own: only ``__cuda_array_interface__``),
    anything else as NumPy (tuples of numbers, namedtuples and arrays included)."""
    if isinstance(value, np.ndarray):
        return value
    if is_device_array_like(value):
        return as_device(value, what)
    return np.asarray(value)


_OPTIONS = frozenset({"fastmath", "opt", "debug", "lineinfo", "max_registers", "cache"})


def guvectorize(signatures: Any, layout: str, *, target: str = "cuda", nopython: bool = True,
                **options: Any) -> Any:
    """``@kj.guvectorize(signatures, "(n),(n)->()")``: a core function made a generalized
    ufunc (see :class:`GUFunc`); ``options`` are ``kj.jit``'s (``fastmath``, ``opt``, ...)."""
    if target != "cuda":
        raise ValueError(f"kj.guvectorize compiles for kaiojit's backend: target must be "
                         f"'cuda', got {target!r}")
    if not nopython:
        raise TypeError("nopython flag must be True")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise TypeError("The following target options are not supported: "
                        + ", ".join(repr(u) for u in unknown))
    sigs = [signatures] if isinstance(signatures, (str, kt.Signature)) else list(signatures)
    if not sigs:
        raise TypeError("kj.guvectorize needs at least one signature")
    parse_layout(layout)

    @user_facing
    def decorate(pyfunc: Any) -> GUFunc:
        pyfunc = getattr(pyfunc, "py_func", pyfunc)
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"@kj.guvectorize decorates a Python function, got "
                            f"{type(pyfunc).__name__}")
        return GUFunc(pyfunc, sigs, layout, options)
    return decorate


def _rebuilt(cls: type, device: Any, signatures: list, layout: str, options: dict) -> GUFunc:
    gufunc = GUFunc(device.py_func, signatures, layout, options)
    gufunc.__class__ = cls  # numba's NumbaGUFunc stays one
    return gufunc
