"""``@kj.vectorize``: a scalar function made an elementwise kernel, as numba's CUDA ufuncs.

``@kj.vectorize(["float32(float32, float32)", "float64(float64, float64)"])`` types the
function for every signature at decoration (as a device function, so errors point at its
lines), and each call picks a signature, broadcasts the operands and launches a generated
kernel that applies the function to every element. Kernels are generated once per signature
and shape pattern (contiguous same-shape operands take a flat 1-D kernel; anything else an
N-d one that broadcasts through zero strides) and compiled per argument types by ``kj.jit``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import kaiojit as kj
from kaiojit import types as kt

from .reduce import Reduce
from .source import (
    PYTHON_SCALARS,
    as_device,
    broadcast_view,
    compile_generated,
    flat_view,
    is_device_array_like,
    parse_signature,
    synchronize_stream,
    user_facing,
)

_TARGETS = ("cuda",)


class _Operand:
    """One input of a call: a host (NumPy) array, a device array, or a scalar."""

    __slots__ = ("kind", "value", "dtype", "shape")

    def __init__(self, kind: str, value: Any, dtype: np.dtype | None, shape: tuple[int, ...]):
        self.kind = kind  # "host", "device", "scalar" (typed: NumPy) or "weak" (Python scalar)
        self.value = value
        self.dtype = dtype
        self.shape = shape


class UFunc:
    """An elementwise kernel made from a scalar function; call it like a NumPy ufunc."""

    def __init__(self, pyfunc: Callable, signatures: Sequence[Any], options: dict[str, Any]):
        self.py_func = pyfunc
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self.arg_names = tuple(inspect.signature(pyfunc).parameters)
        self.nin = len(self.arg_names)
        self.nout = 1
        self.signatures = [_parse(sig, pyfunc, self.nin) for sig in signatures]
        self._options = options
        # typed now, for every signature: a function that cannot be typed fails here
        self._device = kj.jit(list(self.signatures), device=True, **options)(pyfunc)
        self._kernels: dict[tuple, Any] = {}
        self._reduce: Reduce | None = None

    def __repr__(self) -> str:
        return f"<kaiojit ufunc {self.__qualname__} {[str(s) for s in self.signatures]}>"

    def __reduce__(self):
        """Pickled as its function (by its device function's rules), signatures and options;
        rebuilt of its class, its kernels generated again where it is loaded."""
        return _rebuilt, (type(self), self._device, self.signatures, self._options)

    @property
    def kernels(self) -> list[Any]:
        """The kernels generated so far (``kj.jit`` objects: ``.inspect_ptx()`` and the rest)."""
        return list(self._kernels.values())

    # --- calling ------------------------------------------------------------------------------

    @user_facing
    def __call__(self, *args: Any, out: Any = None, stream: Any = 0) -> Any:
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} argument"
                            f"{'s' if self.nin != 1 else ''} ({', '.join(self.arg_names)}), "
                            f"got {len(args)}")
        operands = [self._operand(a, i) for i, a in enumerate(args)]
        sig = self._resolve(operands)
        ret_dtype = sig.return_type.np_dtype
        host_out = isinstance(out, np.ndarray)
        target = None
        if out is not None:
            target = out if host_out else as_device(out, f"{self.__name__}(): out")
            _check_out_dtype(ret_dtype, target.dtype, self.__name__)
        shape = self._broadcast_shape(operands, target)
        if target is None:
            result = kj.device_array(shape, ret_dtype)
        elif host_out:  # written on the device, then copied into out
            result = kj.device_array(shape, out.dtype)
        else:
            result = target
        if result.size:
            self._launch(sig, operands, result, stream)
        if host_out:
            result.copy_to_host(out=out, stream=stream)
            synchronize_stream(stream)
            return out
        if out is not None:
            return out
        if any(op.kind == "device" for op in operands):
            return result
        host = result.copy_to_host(stream=stream)
        synchronize_stream(stream)
        return host[()] if host.ndim == 0 else host

    @user_facing
    def reduce(self, array: Any, stream: Any = 0) -> Any:
        """Reduce a 1-D array with this binary ufunc (numba's ``ufunc.reduce``)."""
        if self.nin != 2:
            raise TypeError(f"{self.__name__}.reduce needs a binary ufunc; this one takes "
                            f"{self.nin} arguments")
        if self._reduce is None:
            self._reduce = Reduce(self.py_func, self._options)
        return self._reduce.reduce_without_init(array, stream)

    def _operand(self, value: Any, index: int) -> _Operand:
        what = f"{self.__name__}(): argument {index + 1} ({self.arg_names[index]})"
        if isinstance(value, np.generic):  # before Python's: np.float64 is a float
            return _Operand("scalar", value, _kaiojit_dtype(value.dtype, what), ())
        if isinstance(value, PYTHON_SCALARS):
            return _Operand("weak", value, None, ())
        if is_device_array_like(value):
            arr = as_device(value, what)
            return _Operand("device", arr, _kaiojit_dtype(arr.dtype, what), tuple(arr.shape))
        try:
            host = np.asarray(value)
        except Exception:  # noqa: BLE001 - anything NumPy cannot take is named below
            host = np.asarray(None)
        if host.dtype.kind not in "biufc":  # complex is named by _kaiojit_dtype
            raise TypeError(f"{what}: expected an array or a number, got "
                            f"{type(value).__name__}")
        dtype = _kaiojit_dtype(host.dtype, what)
        if host.ndim == 0:
            return _Operand("scalar", host[()], dtype, ())
        return _Operand("host", host, dtype, host.shape)

    def _resolve(self, operands: list[_Operand]) -> kt.Signature:
        """The first signature every operand matches exactly (numba's rule), else the first
        that every operand casts to safely. Python scalars are weak (NEP 50)."""
        for casting in ("equiv", "safe"):
            for sig in self.signatures:
                if all(_accepts(op, formal.np_dtype, casting)
                       for op, formal in zip(operands, sig.args)):
                    return sig
        got = ", ".join(type(op.value).__name__ if op.kind == "weak" else str(op.dtype)
                        for op in operands)
        have = "; ".join(str(s) for s in self.signatures)
        raise TypeError(f"{self.__name__}(): no signature takes ({got}) without an unsafe "
                        f"cast; the signatures are {have}")

    def _broadcast_shape(self, operands: list[_Operand], out: Any) -> tuple[int, ...]:
        shapes = [op.shape for op in operands]
        try:
            shape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"{self.__name__}(): operands could not be broadcast together "
                             f"with shapes {' '.join(str(s) for s in shapes)}") from None
        if out is not None and tuple(out.shape) != shape:
            raise ValueError(f"{self.__name__}(): out has shape {tuple(out.shape)}, the "
                             f"operands broadcast to {shape}")
        return shape

    # --- launching ----------------------------------------------------------------------------

    def _launch(self, sig: kt.Signature, operands: list[_Operand], result: Any,
                stream: Any) -> None:
        values = []
        for op, formal in zip(operands, sig.args):
            if op.kind == "host":
                values.append(kj.to_device(op.value, stream=stream))
            elif op.kind == "device":
                values.append(op.value)
            else:  # a scalar: the kernel takes it by value, of the signature's type
                values.append(formal.np_dtype.type(op.value))
        scalars = tuple(op.kind in ("scalar", "weak") for op in operands)
        arrays = [v for v, s in zip(values, scalars) if not s]
        shape = tuple(result.shape)
        order = _common_order(arrays + [result], shape)
        if order is not None:
            args = [v if s else flat_view(v) for v, s in zip(values, scalars)]
            kernel = self._kernel(sig, 0, scalars)
            threads = -(-result.size // PER_THREAD)
            kernel.forall(threads, stream=stream)(flat_view(result), *args,
                                                  np.int64(result.size))
            return
        # not flat: shape is not () (0-d operands are all C-contiguous alike)
        args = [v if s else broadcast_view(v, shape) for v, s in zip(values, scalars)]
        kernel = self._kernel(sig, len(shape), scalars)
        kernel.forall(result.size, stream=stream)(result, *args)

    def _kernel(self, sig: kt.Signature, ndim: int, scalars: tuple[bool, ...]) -> Any:
        key = (sig, ndim, scalars)
        kernel = self._kernels.get(key)
        if kernel is None:
            name = f"{self.__name__}_{'flat' if ndim == 0 else f'{ndim}d'}"
            source = elementwise_source(name, sig, ndim, scalars)
            kernel = self._kernels[key] = compile_generated(
                name, source, {"kj": kj, "scalar_function": self._device}, self._options)
        return kernel


# Elements a thread of the flat kernel computes: four consecutive ones, all loaded before any
# is stored, so that 16-byte aligned arrays (the usual allocation) move as 128-bit loads and
# stores; one element a thread keeps too few bytes in flight to reach the copy bandwidth.
PER_THREAD = 4


def flat_source(name: str, sig: kt.Signature, scalars: tuple[bool, ...]) -> str:
    """The kernel over ``n`` contiguous elements, ``PER_THREAD`` consecutive ones a thread."""
    params = [f"x{k}" for k in range(len(scalars))]

    def operands(at: str) -> str:
        return ", ".join(f"kj.{formal}({p if is_scalar else f'{p}[{at}]'})"
                         for p, is_scalar, formal in zip(params, scalars, sig.args))
    ret = f"kj.{sig.return_type}"
    lines = [f"def {name}(out, {', '.join(params)}, n):",
             f"    i = kj.grid(1) * {PER_THREAD}",
             f"    if i + {PER_THREAD - 1} < n:"]
    for k in range(PER_THREAD):
        args = [f"kj.{formal}({p if is_scalar else f'{p}[i + {k}]'})"
                for p, is_scalar, formal in zip(params, scalars, sig.args)]
        lines += [f"        a{k}_{j} = {a}" for j, a in enumerate(args)]
    for k in range(PER_THREAD):
        call = ", ".join(f"a{k}_{j}" for j in range(len(params)))
        lines.append(f"        r{k} = {ret}(scalar_function({call}))")
    lines += [f"        out[i + {k}] = r{k}" for k in range(PER_THREAD)]
    lines += ["    else:",
              f"        for k in range({PER_THREAD}):",
              "            if i + k < n:",
              f"                out[i + k] = {ret}(scalar_function({operands('i + k')}))"]
    return "\n".join(lines) + "\n"


def elementwise_source(name: str, sig: kt.Signature, ndim: int,
                       scalars: tuple[bool, ...]) -> str:
    """The kernel applying ``scalar_function`` to every element: a flat one over ``n``
    elements (``ndim == 0``, see ``flat_source``), or one whose thread index is split into
    ``ndim`` indices."""
    if ndim == 0:
        return flat_source(name, sig, scalars)
    params = [f"x{k}" for k in range(len(scalars))]
    idx = [f"i{d}" for d in range(ndim)]
    index = ", ".join(idx)
    head = [f"def {name}(out, {', '.join(params)}):",
            "    i = kj.grid(1)",
            "    if i < out.size:",
            "        rest = i"]
    for d in range(ndim - 1, 0, -1):
        head += [f"        i{d} = rest % out.shape[{d}]",
                 f"        rest = rest // out.shape[{d}]"]
    head.append("        i0 = rest")
    operands = []
    for p, is_scalar, formal in zip(params, scalars, sig.args):
        operands.append(f"kj.{formal}({p if is_scalar else f'{p}[{index}]'})")
    body = f"        out[{index}] = kj.{sig.return_type}(scalar_function({', '.join(operands)}))"
    return "\n".join(head + [body]) + "\n"


def _parse(sig: Any, pyfunc: Callable, nin: int) -> kt.Signature:
    where = f"@kj.vectorize of {pyfunc.__qualname__}"
    parsed = parse_signature(sig, where, "float32(float32, float32)")
    if not all(isinstance(t, kt.ScalarType) for t in (*parsed.args, parsed.return_type)):
        raise TypeError(f"{where}: signature {sig!r} must take and return scalars, as "
                        "'float32(float32, float32)'")
    if len(parsed.args) != nin:
        raise TypeError(f"{where}: signature {sig!r} has {len(parsed.args)} arguments, the "
                        f"function takes {nin}")
    return parsed


def _kaiojit_dtype(dtype: np.dtype, what: str) -> np.dtype:
    try:
        kt.from_dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}: kaiojit has no type for dtype {dtype}") from None
    return dtype


def _accepts(op: _Operand, formal: np.dtype, casting: str) -> bool:
    if op.kind != "weak":
        return np.can_cast(op.dtype, formal, casting=casting)
    value = op.value
    if isinstance(value, bool) or formal.kind == "f":
        return True
    if isinstance(value, int) and formal.kind in "iu":
        info = np.iinfo(formal)
        return info.min <= value <= info.max
    return False


def _check_out_dtype(ret: np.dtype, out: np.dtype, name: str) -> None:
    if not np.can_cast(ret, out, casting="same_kind"):
        raise TypeError(f"{name}(): out has dtype {out}; the result, {ret}, does not cast to "
                        "it (same_kind)")


def _common_order(arrays: list[Any], shape: tuple[int, ...]) -> str | None:
    """'C' or 'F' when every array has ``shape`` and that contiguous layout (then one flat
    kernel serves them all), else None."""
    if any(tuple(a.shape) != shape for a in arrays):
        return None
    if all(a.is_c_contiguous for a in arrays):
        return "C"
    if all(a.is_f_contiguous for a in arrays):
        return "F"
    return None


def vectorize(signatures: Any = None, *, target: str = "cuda", **options: Any) -> Any:
    """``@kj.vectorize(["float32(float32, float32)", ...])``: a scalar function made an
    elementwise kernel (see :class:`UFunc`). ``target="cuda"`` is accepted for numba's
    spelling; ``options`` are ``kj.jit``'s (``fastmath``, ``opt``, ...)."""
    if target not in _TARGETS:
        raise ValueError(f"kj.vectorize compiles for kaiojit's backend: target must be 'cuda', "
                         f"got {target!r}")
    if callable(signatures) and not isinstance(signatures, (str, kt.Signature)):
        raise TypeError(f"@kj.vectorize needs signatures, as numba's CUDA target does: "
                        f"@kj.vectorize(['float32(float32, float32)']) def "
                        f"{signatures.__name__}(...)")
    if signatures is None:
        raise TypeError("kj.vectorize needs a list of signatures, e.g. "
                        "['float32(float32, float32)']")
    sigs = [signatures] if isinstance(signatures, (str, kt.Signature)) else list(signatures)
    if not sigs:
        raise TypeError("kj.vectorize needs at least one signature")

    @user_facing
    def decorate(pyfunc: Any) -> UFunc:
        pyfunc = getattr(pyfunc, "py_func", pyfunc)
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"@kj.vectorize decorates a Python function, got "
                            f"{type(pyfunc).__name__}")
        return UFunc(pyfunc, sigs, options)
    return decorate


def _rebuilt(cls: type, device: Any, signatures: list, options: dict) -> UFunc:
    ufunc = UFunc(device.py_func, signatures, options)
    ufunc.__class__ = cls  # numba's NumbaUFunc stays one
    return ufunc
