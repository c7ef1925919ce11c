"""Errors a user meets: compile errors located in their source, launch and driver errors."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A position in the user's kernel source: file, 1-based line, 0-based column."""

    filename: str
    line: int
    col: int
    source_line: str = ""
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}"

    def excerpt(self) -> str:
        """The source line with a caret under the offending span."""
        if not self.source_line:
            return ""
        text = self.source_line.rstrip("\n")
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        col = max(self.col - indent, 0)
        width = 1
        if self.end_col is not None and self.end_col > self.col:
            width = min(self.end_col - self.col, max(len(stripped) - col, 1))
        return f"    {stripped}\n    {' ' * col}{'^' * width}"


class KaiojitError(Exception):
    """Base of kaiojit's own errors."""


class CompileError(KaiojitError):
    """A kernel that cannot be compiled, located in the user's source."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        text = f"{self.loc}: {self.message}"
        excerpt = self.loc.excerpt()
        return f"{text}\n{excerpt}" if excerpt else text


class TypingError(CompileError):
    """Types that do not fit: an operation on the wrong types, a variable that changes type."""


class UnsupportedError(CompileError):
    """Python syntax or a feature the kernel dialect does not have."""


class LaunchError(KaiojitError, ValueError):
    """A launch configuration the device cannot run, raised before launching."""


class CudaError(KaiojitError, RuntimeError):
    """A CUDA driver error: its name and text, and the kernel it happened for, if any."""

    def __init__(self, name: str, text: str, context: str = "", code: int = -1):
        self.name = name
        self.text = text
        self.code = code
        self.context = context
        msg = f"{name}: {text}"
        if context:
            msg += f" ({context})"
        super().__init__(msg)

    def __reduce__(self) -> tuple:
        # rebuilt from its fields (args holds only the message), e.g. across processes
        return type(self), (self.name, self.text, self.context, self.code), self.__dict__


class KernelError(KaiojitError, RuntimeError):
    """A fault detected while a kernel ran: divergent barrier, out-of-bounds index (debug=True)."""


class LibdeviceNotFound(KaiojitError, RuntimeError):
    """A kernel needs libdevice and no CUDA toolkit or ``kaiojit[cu13]`` extra provides it."""


class PerformanceWarning(UserWarning):
    """A launch that works but costs extra, e.g. NumPy arrays copied to and from the device."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def is_kaiojit_code(filename: str) -> bool:
    """Whether ``filename`` (a code object's) is kaiojit's: a file of its package, or code it
    generated (``<kaiojit fast launch of ...>``)."""
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<kaiojit ")


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the user's line: the first frame outside kaiojit
    (a launch reaches the warning through a varying number of kaiojit frames)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and is_kaiojit_code(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
