"""Which declared signature a call runs: numba's overload choice, for kernels launched with
several eager signatures and for device functions declared with signatures."""

from __future__ import annotations

from . import types as T


def accepts(param: T.Type, arg: T.Type) -> bool:
    """Whether an argument of type ``arg`` may be passed for a parameter of type ``param``."""
    if param == arg:
        return True
    if isinstance(param, T.TensorMapType):
        return param.accepts(arg)
    if isinstance(param, T.ArrayType) and isinstance(arg, T.ArrayType):
        return (param.dtype == arg.dtype and param.ndim == arg.ndim
                and param.layout in ("A", arg.layout)
                and (not param.align or arg.align == param.align))  # no unaligned data for
        # a kernel compiled to assume 16-byte aligned rows (128-bit accesses)
    return isinstance(param, T.ScalarType) and isinstance(arg, T.ScalarType)


def _conversion(param: T.Type, arg: T.Type) -> int:
    """How far ``arg`` is from ``param``, as numba rates it: 0 exact, 1 promotion (same kind,
    no narrower), 2 safe conversion (every value kept), 3 unsafe."""
    if param == arg or not (isinstance(param, T.ScalarType) and isinstance(arg, T.ScalarType)):
        return 0
    order = "buifc"
    if param.kind == arg.kind:
        return 1 if param.bits >= arg.bits else 3
    if order.index(param.kind) < order.index(arg.kind):
        return 3  # float to int, complex to float: values lost
    if arg.kind == "b":
        return 1
    if arg.kind in "iu" and param.kind in "iu":
        return 2 if param.bits > arg.bits else 3  # unsigned into a wider signed keeps it
    if arg.kind in "iu" and param.kind in "fc":
        mantissa = {16: 11, 32: 24, 64: 53}[param.component.bits]
        return 2 if arg.bits <= mantissa else 3
    return 2 if param.component.bits >= arg.bits else 3  # float into complex


def best_signature(signatures, arg_types) -> T.Signature | None:
    """The declared signature a call with ``arg_types`` runs (numba's overload choice): of
    those that accept the arguments, the one with the fewest unsafe conversions, then safe
    ones, then promotions; the first declared of equals."""
    best, best_rating = None, None
    for sig in signatures:
        if len(sig.args) != len(arg_types) or not all(
                accepts(p, a) for p, a in zip(sig.args, arg_types)):
            continue
        costs = [_conversion(p, a) for p, a in zip(sig.args, arg_types)]
        rating = (costs.count(3), costs.count(2), costs.count(1))
        if best_rating is None or rating < best_rating:
            best, best_rating = sig, rating
    return best
