"""How a compile is asked for: the user's options, and the environment read once.

``CompileOptions`` is what ``@kj.jit(...)`` takes; it is part of every cache key.
``Config`` is the environment (``KAIOJIT_DUMP``, ``KAIOJIT_DUMP_DIR``), read once at import
into a frozen object, so nothing deeper in the compiler reads ``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

VERSION = "0.1.0"  # kaiojit's version: part of every cache key


@dataclass(frozen=True, slots=True)
class CompileOptions:
    fastmath: bool = False
    contract: bool = True  # False: no multiply-add is fused into an fma (bit-exact IEEE steps)
    debug: bool = False
    lineinfo: bool = False
    opt: int = 3
    max_registers: int | None = None
    cache: bool = False
    prefetch: bool = True  # L2 prefetches ahead of a streaming kernel's loads (nvptx.py)
    coarsen: bool = True  # a coarse entry beside an elementwise kernel (kir/coarsen.py)
    link: tuple[str, ...] = ()  # foreign device code to link (kaiojit/linking.py)


@dataclass(frozen=True, slots=True)
class Config:
    """The environment, read once at import (``KAIOJIT_DUMP``, ``KAIOJIT_DUMP_DIR``)."""

    dump: frozenset = frozenset()
    dump_dir: str = "."

    @staticmethod
    def from_env() -> Config:
        stages = os.environ.get("KAIOJIT_DUMP", "")
        return Config(
            dump=frozenset(s.strip() for s in stages.split(",") if s.strip()),
            dump_dir=os.environ.get("KAIOJIT_DUMP_DIR", "."),
        )


CONFIG = Config.from_env()


def cache_dir() -> str:
    """Where kaiojit keeps what it caches on disk (kernels, libdevice subsets)."""
    root = os.environ.get("KAIOJIT_CACHE_DIR")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kaiojit")
