"""``cuda.atomic``: kaiojit's atomics (the same kernel builtins) plus numba's
``compare_and_swap``, the first element's compare-and-swap."""

from __future__ import annotations

from types import SimpleNamespace

from .. import jit as _jit
from .. import language as _L

_cas = _L.atomic.cas


@_jit(device=True)
def compare_and_swap(ary, old, val):
    """Store ``val`` in ``ary[0]`` if it holds ``old``; return what it held."""
    return _cas(ary, 0, old, val)


atomic = SimpleNamespace(
    **{name: getattr(_L.atomic, name)
       for name in ("add", "sub", "max", "min", "nanmax", "nanmin", "exch", "and_", "or_",
                    "xor", "inc", "dec", "cas")},
    compare_and_swap=compare_and_swap,
)
