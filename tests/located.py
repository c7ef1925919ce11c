"""Checks that a compile error points at the user's source: file:line:col, line, caret."""

from __future__ import annotations

import inspect
import os
import re
import traceback

import pytest

import kaiojit as kj

KAIOJIT_DIR = os.path.dirname(os.path.abspath(kj.__file__))
_SOURCE_PATH = re.compile(r"kaiojit[/\\]([\w/\\.-]+?\.py)\b")


def is_kaiojit_file(filename: str) -> bool:
    """Whether ``filename`` is one of kaiojit's own source files (under its package directory;
    a checkout in a folder named ``kaiojit`` holds user-side files too: tests, examples)."""
    return os.path.abspath(filename).startswith(KAIOJIT_DIR + os.sep)


def names_kaiojit_source(text: str) -> bool:
    """Whether ``text`` names a file of kaiojit's package: by its absolute path, or as
    ``kaiojit/<file>.py`` where that file exists in the package (not a user file of a
    checkout named ``kaiojit``)."""
    if KAIOJIT_DIR + os.sep in text:
        return True
    return any(os.path.isfile(os.path.join(KAIOJIT_DIR, m.group(1).replace("\\", "/")))
               for m in _SOURCE_PATH.finditer(text))


def position_of(pyfunc, snippet: str, occurrence: int = 0) -> tuple[str, int, int]:
    """(file, line, 1-based column) of ``snippet`` in ``pyfunc``'s source, found with inspect."""
    lines, first = inspect.getsourcelines(pyfunc)
    seen = 0
    body_from = next(i for i, t in enumerate(lines) if t.lstrip().startswith("def ")) + 1
    for i, text in enumerate(lines):
        if i < body_from:
            continue  # the snippet is looked for in the body, not among the parameters
        col = text.find(snippet)
        while col >= 0:
            if seen == occurrence:
                return inspect.getsourcefile(pyfunc), first + i, col + 1
            seen += 1
            col = text.find(snippet, col + 1)
    raise AssertionError(f"{snippet!r} not in the source of {pyfunc.__name__}")


def assert_located(err: BaseException, pyfunc, snippet: str, occurrence: int = 0) -> None:
    """``err`` names file:line:col of ``snippet``, shows its line with a caret under it, and
    neither its message nor its traceback shows kaiojit's own code."""
    filename, line, col = position_of(pyfunc, snippet, occurrence)
    text = str(err)
    head, *rest = text.split("\n")
    assert head.startswith(f"{filename}:{line}:{col}: "), text
    assert len(rest) == 2, text
    src_line, caret_line = rest
    source_text = inspect.getsourcelines(pyfunc)[0][line - inspect.getsourcelines(pyfunc)[1]]
    assert src_line.strip() == source_text.strip(), text
    caret_at = caret_line.index("^")
    assert src_line[caret_at:].startswith(snippet), text
    assert caret_line[caret_at:].strip("^") == "", text
    assert_no_internals(err)


def assert_no_internals(err: BaseException) -> None:
    """No kaiojit file name in the message, and no kaiojit frame in the traceback but the
    public entry point that re-raised it."""
    assert not names_kaiojit_source(str(err)), str(err)
    frames = [f for f in traceback.extract_tb(err.__traceback__) if is_kaiojit_file(f.filename)]
    assert len(frames) <= 1, [f"{f.filename}:{f.lineno} {f.name}" for f in frames]
    assert err.__cause__ is None and err.__suppress_context__


def compile_error(pyfunc, sig: str, cls=kj.CompileError, **options) -> BaseException:
    """The error compiling ``pyfunc`` for ``sig`` raises (of class ``cls``)."""
    with pytest.raises(cls) as info:
        kj.compile_ptx(pyfunc, sig, **options)
    return info.value
