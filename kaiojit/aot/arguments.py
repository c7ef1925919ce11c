"""The arguments of a call of an exported kernel, typed as ``@kj.jit`` types them: one place
for the loader's kernels and the autotuned ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaiojit import types as kt


def argument_types(kernel: str, names: Sequence[str], args: tuple) -> list[kt.Type]:
    """``args``' kaiojit types; a ``TypeError`` naming the kernel and the parameter for a count
    or a value that does not fit."""
    from kaiojit.runtime import typeof

    if len(args) != len(names):
        raise TypeError(f"{kernel}() takes {len(names)} arguments ({', '.join(names)}), got "
                        f"{len(args)}")
    types = []
    for a, name in zip(args, names):
        try:
            types.append(typeof(a))
        except TypeError as e:
            raise TypeError(f"{kernel}(): parameter {name!r}: {e}") from None
    return types


__all__ = ["argument_types"]
