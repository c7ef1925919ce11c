"""kaiojit's environment variables: every ``KAIOJIT_*`` knob, declared, validated and read in
one place.

Each knob is read and validated once, at its first use, and remembered; a knob marked
``each_use`` (a directory the tests point elsewhere per test, a flag read when a decorator runs)
is read and validated at every use instead. A value the knob does not take is a ``ValueError``
of one line naming the variable, the value and the values it takes, raised where the knob is
first used, not as a bare parsing error from a later, unrelated launch. ``docs/environment.md``
lists the same knobs for users.

:func:`get` is the only reader of ``os.environ`` for ``KAIOJIT_*`` names in kaiojit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Knob:
    """One variable: what it takes (as the error says it), its parser (raises ``ValueError``)
    and its value when unset or empty."""

    name: str
    takes: str | Callable[[], str]
    parse: Callable[[str], Any]
    default: Any
    each_use: bool = False


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(text)


def _count(text: str) -> int:
    value = int(text.strip(), 10)
    if value < 0:
        raise ValueError(text)
    return value


def _name(text: str) -> str:
    value = text.strip().lower()
    if not value.isidentifier():
        raise ValueError(text)
    return value


def _path(text: str) -> str:
    if "\0" in text:
        raise ValueError(text)
    return text


# The cuda backend's launch calls (kaiojit.runtime.native.launchrecord), and the stages of the
# compiler's pipelines (kaiojit.compiler.PIPELINES; a test keeps the two lists equal): named
# here, at the bottom of the import order, so that reading a knob imports nothing.
LAUNCH_MODES = ("native", "ex", "ctypes", "bindings")
DUMP_STAGES = ("kir", "llvm_unoptimized", "llvm", "ptx", "object")


def _launch_mode(text: str) -> str:
    value = text.strip().lower()
    if value not in LAUNCH_MODES:
        raise ValueError(text)
    return value


def dump_stages() -> tuple[str, ...]:
    """Every stage name of every pipeline, in pipeline order (what ``KAIOJIT_DUMP`` takes)."""
    return DUMP_STAGES


def _stages(text: str) -> frozenset[str]:
    asked = [s.strip() for s in text.split(",") if s.strip()]
    known = dump_stages()
    if "all" in asked:
        return frozenset(known)
    unknown = [s for s in asked if s not in known]
    if unknown:
        raise ValueError(text)
    return frozenset(asked)


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("KAIOJIT_BACKEND", "cuda or cpu (unset: cuda where a CUDA device is usable, else cpu)",
         _name, ""),
    Knob("KAIOJIT_DEBUG_SYNC", "1 (synchronize after every launch) or 0", _flag, False),
    Knob("KAIOJIT_LAUNCH", "native, ex, ctypes or bindings (the cuda backend's launch form)",
         _launch_mode, None),
    Knob("KAIOJIT_NATIVE", "1 (launches may use the native helpers of kaiojit.runtime.native "
         "where the interpreter is one they were written for) or 0 (their Python path)",
         _flag, True),
    Knob("KAIOJIT_COARSE_MIN_THREADS", "a whole number of threads, 0 or more (the smallest "
         "launch that takes a kernel's coarse entry; default 4194304)", _count, 1 << 22),
    Knob("KAIOJIT_DUMP", lambda: "'all' or stage names separated by commas, among: "
         + ", ".join(dump_stages()), _stages, frozenset()),
    Knob("KAIOJIT_DUMP_DIR", "a directory (created if missing; default: the current one)",
         _path, "."),
    Knob("KAIOJIT_CACHE_DIR", "a directory for the disk cache (default: ~/.cache/kaiojit)",
         _path, "", each_use=True),
    Knob("KAIOJIT_AUTOTUNE_LOG", "1 (print what the autotuner tries) or 0", _flag, False,
         each_use=True),
    Knob("KAIOJIT_MOCK_BACKEND", "1 (let KAIOJIT_BACKEND=mock choose the mock backend, which "
         "runs no kernel: for kaiojit's own tests and benchmarks) or 0", _flag, False),
)}

_values: dict[str, Any] = {}
_lock = threading.Lock()


def get(name: str) -> Any:
    """The value of knob ``name`` (validated; read once unless the knob is ``each_use``)."""
    try:
        return _values[name]
    except KeyError:
        pass
    knob = KNOBS[name]
    value = _read(knob)
    if not knob.each_use:
        with _lock:
            value = _values.setdefault(name, value)
    return value


def raw(name: str) -> str:
    """The text knob ``name`` is set to ("" when unset), for errors that quote it."""
    return os.environ.get(KNOBS[name].name, "")


def _read(knob: Knob) -> Any:
    raw = os.environ.get(knob.name, "")
    if not raw.strip():
        return knob.default
    try:
        return knob.parse(raw)
    except ValueError:
        raise invalid(knob.name, raw) from None


def invalid(name: str, raw: str, takes: str | None = None) -> ValueError:
    """The one-line error of knob ``name`` set to ``raw``."""
    if takes is None:
        takes = KNOBS[name].takes
        takes = takes if isinstance(takes, str) else takes()
    return ValueError(f"{name}={raw!r}: takes {takes}")


def forget(*names: str) -> None:
    """Read these knobs (all, without names) again at their next use: for tests that change
    the environment in-process."""
    with _lock:
        for name in names or tuple(_values):
            _values.pop(name, None)


__all__ = ["DUMP_STAGES", "KNOBS", "LAUNCH_MODES", "Knob", "dump_stages", "forget", "get",
           "invalid", "raw"]
