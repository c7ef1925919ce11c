"""The source text of functions built by ``exec()`` from a string, kept for the frontend.

kaiojit compiles kernels from their Python source. A function defined by ``exec(text)`` has
no file behind it (its ``co_filename`` is ``"<string>"``), so ``inspect`` cannot give its
source; numba, which reads bytecode, compiles such kernels, and numba's users (and numba's
own tests) build kernels that way. CPython announces every compile of a string (the audit
event ``compile``, with the text) and runs it right after (the event ``exec``, with the code
object): an audit hook, installed once at ``import kaiojit``, ties the text to the code
objects of the functions it defines. The table is weak: an entry lives as long as its
function's code object. Only texts under a pseudo-filename (``<...>``) are kept; files have
linecache.
"""

from __future__ import annotations

import sys
import weakref
from types import CodeType

class _CodeTable:
    """Code object -> (filename, source text), by identity and weakly. A WeakKeyDictionary
    would not do: code objects compare equal by content, so the second exec of one string
    would update the first one's entry, and that entry goes when the first code dies."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, tuple[str, str]]] = {}

    def __setitem__(self, code: CodeType, value: tuple[str, str]) -> None:
        key = id(code)

        def forget(ref: weakref.ref, key: int = key) -> None:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is ref:
                del self._entries[key]

        self._entries[key] = (weakref.ref(code, forget), value)

    def get(self, code: CodeType) -> tuple[str, str] | None:
        entry = self._entries.get(id(code))
        return entry[1] if entry is not None and entry[0]() is code else None


# code object of a function defined by an exec'd string -> (filename, source text)
_SOURCES = _CodeTable()
# the last string compiled under a pseudo-filename, until the exec of its code: (filename, text)
_pending: list[tuple[str, str] | None] = [None]
_installed = [False]


def _text(source: object) -> str | None:
    if isinstance(source, str):
        return source
    if isinstance(source, (bytes, bytearray)):
        try:
            return bytes(source).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None  # an AST (compile of a tree): no text to keep


def _audit(event: str, args: tuple) -> None:
    """The audit hook: cheap for every event but the two it looks at."""
    if event == "compile":
        filename = args[1]
        if isinstance(filename, str) and filename[:1] == "<":
            text = _text(args[0])
            keep = text is not None and ("def" in text or "lambda" in text)
            _pending[0] = (filename, text) if keep else None
        return
    if event == "exec" and _pending[0] is not None:
        code = args[0]
        filename, text = _pending[0]
        _pending[0] = None
        if isinstance(code, CodeType) and code.co_filename == filename:
            _remember(code, filename, text)


def _remember(code: CodeType, filename: str, text: str) -> None:
    """Tie ``text`` to every function code object nested in ``code``."""
    stack = [code]
    while stack:
        for const in stack.pop().co_consts:
            if isinstance(const, CodeType):
                try:
                    _SOURCES[const] = (filename, text)
                except TypeError:
                    return
                stack.append(const)


def remember_compiled(source: str, filename: str, code: CodeType) -> None:
    """Record ``source`` for the functions of ``code`` (what the hook does, for a code object
    compiled before the hook was installed or by a caller that knows its text)."""
    _remember(code, filename, source)


def exec_source(code: CodeType) -> tuple[str, str] | None:
    """``(filename, text)`` of the exec'd string that defined the function of ``code``, or
    of the program given on the command line (``python -c TEXT``), which runs before any
    hook can see it."""
    try:
        found = _SOURCES.get(code)
    except TypeError:
        return None
    if found is not None and found[0] != code.co_filename:
        found = None  # an equal code object (code objects compare without their filename)
    if found is None and code.co_filename == "<string>":
        found = _command_line_source(code)
    return found


def _command_line_source(code: CodeType) -> tuple[str, str] | None:
    """The ``python -c`` program, if ``code`` is one of its functions (compiled again from
    the text and compared, so a function of another string is never given this one)."""
    argv = getattr(sys, "orig_argv", [])
    try:
        text = argv[argv.index("-c") + 1]
    except (ValueError, IndexError):
        return None
    try:
        program = compile(text, "<string>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    stack = [program]
    while stack:
        for const in stack.pop().co_consts:
            if isinstance(const, CodeType):
                if (const.co_name == code.co_name and const.co_code == code.co_code
                        and const.co_firstlineno == code.co_firstlineno):
                    _SOURCES[code] = ("<string>", text)
                    return "<string>", text
                stack.append(const)
    return None


def install() -> None:
    """Install the audit hook (once a process; audit hooks cannot be removed)."""
    if not _installed[0]:
        _installed[0] = True
        sys.addaudithook(_audit)
