"""Errors a user meets: compile errors located in their source, launch and driver errors.

Every error names the user's code, never kaiojit's: a place in a file is ``file:line:col``; in a
notebook cell it is ``Cell In[6], line 5, column 18``, as IPython's own tracebacks name cells
(:func:`source_position`). Entry points re-raise kaiojit's errors without the frames below
them and mark their own frame hidden (``__tracebackhide__``, which pytest honours); in IPython
and Jupyter, :meth:`KaiojitError._render_traceback_` shows the traceback without any frame of
kaiojit's code, so the last frame shown is the user's line.
"""

from __future__ import annotations

import functools
import os
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KAIOJIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def notebook_cell(filename: str) -> int | None:
    """The execution count of the IPython cell compiled under ``filename``, or None (not a
    cell, or no IPython running)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
        return None if shell is None else shell.compile._filename_map.get(filename)
    except Exception:  # noqa: BLE001 - any other IPython: a plain file name
        return None


def source_position(filename: str, line: int, col: int | None = None) -> str:
    """A place in the user's source as kaiojit's messages name it: ``file:line[:col]`` (col
    1-based), or ``Cell In[n], line l[, column c]`` in a notebook cell."""
    cell = notebook_cell(filename)
    if cell is not None:
        return f"Cell In[{cell}], line {line}" + ("" if col is None else f", column {col}")
    return f"{filename}:{line}" + ("" if col is None else f":{col}")


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the frames of kaiojit's own code."""
    frames = []
    while tb is not None:
        if not is_kaiojit_code(tb.tb_frame.f_code.co_filename):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(frames):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A position in the user's kernel source: file, 1-based line, 0-based column."""

    filename: str
    line: int
    col: int
    source_line: str = ""
    end_col: int | None = None

    def __str__(self) -> str:
        return source_position(self.filename, self.line, self.col + 1)

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

    def _render_traceback_(self) -> list[str]:
        """IPython's hook: the traceback as IPython shows it, less kaiojit's frames."""
        from IPython import get_ipython

        tb = user_traceback(self.__traceback__)
        shell = get_ipython()
        if shell is None:  # called outside a shell: Python's own format
            import traceback

            return traceback.format_exception(type(self), self, tb)
        return shell.InteractiveTB.structured_traceback(type(self), self, tb)


def user_facing(function: Callable | None = None, *,
                errors: tuple[type[BaseException], ...] | None = None) -> Any:
    """Mark a public entry point (the one way kaiojit strips its frames): an error of
    ``errors`` (kaiojit's own by default; a launch adds the ``TypeError`` and ``ValueError`` a
    bad argument raises) leaves it with no frame of kaiojit's code below, and its own frame is
    hidden from pytest's report (``__tracebackhide__``), so the failure is reported at the
    user's line. ``@user_facing`` or ``@user_facing(errors=(...))``."""
    caught = errors if errors is not None else (KaiojitError,)

    def mark(function: Callable) -> Callable:
        @functools.wraps(function)
        def entry_point(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841
            try:
                return function(*args, **kwargs)
            except caught as e:
                raise e.with_traceback(None) from None
        return entry_point

    return mark if function is None else mark(function)


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


class ArgumentError(KaiojitError, TypeError):
    """A launch's arguments that do not fit the kernel: the wrong number, a value kaiojit cannot
    pass, or one no compiled signature accepts (a TypeError, as Python's own for a call)."""


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


# --- exceptions a kernel raises (``raise ValueError("...")`` under debug=True) ----------------
# classes by ``module:qualname``, the key a fault site keeps (plain text: it may come from the
# disk cache), registered when a kernel that raises them is typed
_RAISED: dict[str, type] = {}
_AS_KERNEL_ERROR: dict[type, type] = {}


def raised_class_key(cls: type) -> str:
    """Register an exception class a kernel raises; the key its fault site names it by."""
    key = f"{cls.__module__}:{cls.__qualname__}"
    _RAISED[key] = cls
    return key


def raised_exception(key: str, args: tuple, prefix: str) -> BaseException:
    """The exception a kernel raised, as numba reports it: its class, the first argument
    prefixed with where and in which thread it was raised. The class is made a
    :class:`KernelError` too (so a launch reports it without kaiojit's frames, and
    ``except MyError`` and ``except kj.KernelError`` both catch it)."""
    cls = _RAISED.get(key)
    if cls is None:
        import importlib

        module, _, qualname = key.partition(":")
        try:
            cls = importlib.import_module(module)
            for part in qualname.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            return KernelError(f"{prefix}: the kernel raised {qualname} "
                               f"{', '.join(map(repr, args))}".rstrip())
    both = _AS_KERNEL_ERROR.get(cls)
    if both is None:
        try:
            both = type(cls.__name__, (cls, KernelError), {"__module__": cls.__module__,
                                                           "__qualname__": cls.__qualname__})
        except TypeError:  # a class that cannot be combined (its layout): raised as it is
            both = cls
        _AS_KERNEL_ERROR[cls] = both
    first = f"{prefix}: {args[0]}" if args else prefix
    return both(first, *args[1:])


class DeviceFunctionError(KaiojitError, TypeError, RuntimeError):
    """A device function used as a kernel: launched, or compiled or inspected on its own as
    one (a TypeError; numba raises a RuntimeError, so it is one too)."""


class LibdeviceNotFound(KaiojitError, RuntimeError):
    """A kernel needs libdevice and no CUDA toolkit or ``kaiojit[cu13]`` extra provides it."""


class PerformanceWarning(UserWarning):
    """A launch that works but costs extra, e.g. NumPy arrays copied to and from the device."""


_PACKAGE_DIR = KAIOJIT_DIR


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
