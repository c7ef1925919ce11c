"""The ``kaiojit`` logger, and turning it on at run time.

kaiojit reports through the standard ``logging`` module under the name ``kaiojit``: compiles
(kernel, signature, target and each stage's time) and autotuning progress (each configuration
tried, its time and the best so far) at INFO, the backend chosen at INFO. Nothing is shown
until a user asks: ``kj.set_log_level("INFO")`` (any time, no environment variable needed)
sends INFO and above to stderr, which a notebook shows under the running cell; an application
that configures ``logging`` itself needs nothing from kaiojit.
"""

from __future__ import annotations

import functools
import sys
from typing import IO, Any

_HANDLER_MARK = "_kaiojit_handler"


class _KaiojitLogger:
    """``logging.getLogger("kaiojit")``, looked up on first use: ``logging`` is imported by
    the first message or setting, not by ``import kaiojit`` (a process that launches
    ahead-of-time kernels and never logs never pays for it)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        import logging

        return getattr(logging.getLogger("kaiojit"), name)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        """An INFO message. While ``logging`` is not imported nothing can show it (no handler,
        no level set: the root's WARNING and the last-resort handler drop it), so it is
        dropped without importing ``logging``."""
        if "logging" in sys.modules:
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1  # the caller's line
            self.__getattr__("info")(msg, *args, **kwargs)

    def __repr__(self) -> str:
        return "<the 'kaiojit' logger>"


log: Any = _KaiojitLogger()


def set_log_level(level: int | str = "INFO", stream: IO[str] | None = None) -> Any:
    """Show kaiojit's messages of ``level`` and above ("DEBUG", "INFO", "WARNING", or a
    ``logging`` level; "OFF" or None silences them) on ``stream`` (stderr by default), from
    now on. Returns the ``kaiojit`` logger (a ``logging.Logger``)."""
    import logging

    logger = logging.getLogger("kaiojit")
    if level is None or (isinstance(level, str) and level.upper() == "OFF"):
        logger.setLevel(logging.CRITICAL + 1)
        return logger
    value = logging.getLevelName(level.upper()) if isinstance(level, str) else int(level)
    if not isinstance(value, int):
        raise ValueError(f"log level must be DEBUG, INFO, WARNING, ERROR, OFF or a logging "
                         f"level, got {level!r}")
    logger.setLevel(value)
    ours = [h for h in logger.handlers if getattr(h, _HANDLER_MARK, False)]
    target = stream if stream is not None else sys.stderr
    if ours and getattr(ours[0], "stream", None) is not target:
        logger.removeHandler(ours[0])
        ours = []
    if not ours:
        handler = _stderr_handler_class()(stream)
        setattr(handler, _HANDLER_MARK, True)
        handler.setFormatter(logging.Formatter("kaiojit: %(message)s"))
        logger.addHandler(handler)
    return logger


@functools.cache
def _stderr_handler_class() -> type:
    """A stream handler that looks stderr up at each record when given none (a notebook's
    kernel replaces sys.stderr per cell); made when first needed, as ``logging`` is."""
    import logging

    class StderrHandler(logging.StreamHandler):
        def __init__(self, stream: IO[str] | None):
            super().__init__(stream or sys.stderr)
            self._follow = stream is None

        def emit(self, record: logging.LogRecord) -> None:
            if self._follow:
                self.stream = sys.stderr
            super().emit(record)

    return StderrHandler


__all__ = ["log", "set_log_level"]
