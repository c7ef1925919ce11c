"""How a compile is asked for: the user's options, and the environment read once.

``CompileOptions`` is what ``@kj.jit(...)`` takes; it is part of every cache key.
``Config`` is the environment (``KAIOJIT_DUMP``, ``KAIOJIT_DUMP_DIR``), read once at import
into a frozen object, so nothing deeper in the compiler reads ``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CompileOptions:
    fastmath: bool = False
    debug: bool = False
    lineinfo: bool = False
    opt: int = 3
    max_registers: int | None = None
    cache: bool = False


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
