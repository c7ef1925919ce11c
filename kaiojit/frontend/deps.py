"""What a compile consulted besides its arguments: the dependency record.

Typing reads the Python world through names only: a global or closure variable (``SCALE``),
an attribute reached through one (``cfg.SCALE``, ``Color.RED``, ``np.float32``), a device
function (typed in turn, with a record of its own), a foreign declaration. The typer records
each name it resolves to a Python object as it resolves it: the path from the function's
namespace and a fingerprint of the value (:func:`fingerprint`). A function's record also holds
a digest of its source text and where it starts (line numbers reach fault reports and debug
information). Nothing is listed by hand: what typing did not read cannot change the code, and
what it read is in the record.

The disk cache keys an entry on the record and, before using one, resolves every path again
in the running program and compares (:func:`still_holds`): a record that no longer holds is a
stale entry. A record is plain JSON::

    {"source": "<sha256>", "where": "file.py:12",
     "reads": [[["cfg", "SCALE"], "float:2.0", {}],
               [["twice"], "jit:kmod.twice:device:...", {"(float32,)": {<twice's record>}}]]}
"""

from __future__ import annotations

import builtins
import hashlib
import linecache
import os
import sys
import threading
from collections.abc import Callable

from .values import PyObj

_MISSING = object()


# --- source -----------------------------------------------------------------------------------

_DIGESTS: dict[int, tuple] = {}  # id(code) -> (code, file's stat, digest); code kept alive
_DIGESTS_LOCK = threading.Lock()


def source_digest(pyfunc) -> str | None:
    """A digest of ``pyfunc``'s source text as its file has it now (None: no source), read
    as the frontend reads it (linecache; a notebook cell's text too). Kept per code object
    while the file's size and time stay the same."""
    code = pyfunc.__code__
    filename = code.co_filename
    try:
        st = os.stat(filename)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None  # no file: linecache's text (a notebook cell) is all there is
    kept = _DIGESTS.get(id(code))
    if kept is not None and kept[0] is code and kept[1] == stamp:
        return kept[2]
    lines = _file_lines(filename) if stamp is not None else None
    if lines is None:
        if stamp is not None:
            linecache.checkcache(filename)
        lines = linecache.getlines(filename)
    digest = digest_of_lines(code, lines)
    with _DIGESTS_LOCK:
        _DIGESTS[id(code)] = (code, stamp, digest)
    return digest


def _file_lines(filename: str) -> list[str] | None:
    """The file's lines as linecache reads them (universal newlines), for a UTF-8 file
    without a coding declaration or BOM (None otherwise: linecache then reads it). A cache
    hit reads its sources this way: linecache's first read imports tokenize, whose patterns
    cost a hit more than all the rest of it."""
    try:
        with open(filename, "rb") as f:
            data = f.read()
        if data.startswith(b"\xef\xbb\xbf") or b"coding" in b"\n".join(data.split(b"\n", 2)[:2]):
            return None
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def digest_of_lines(code, lines: list[str]) -> str | None:
    """The digest of the function's text within ``lines`` (its file's lines): from its first
    line (its first decorator) through the last line its code reaches, and on over the lines
    indented deeper than its ``def`` (a trailing annotation has no code), so it holds all the
    text the frontend parses."""
    first = code.co_firstlineno
    if not 0 < first <= len(lines):
        return None
    last = max([end for _, end, _, _ in code.co_positions() if end is not None] + [first])
    indent = _indent(lines[first - 1])
    k = last + 1
    while k <= len(lines):
        text = lines[k - 1]
        if text.strip() and _indent(text) <= indent:
            break
        if text.strip():
            last = k
        k += 1
    return hashlib.sha256("".join(lines[first - 1:last]).encode()).hexdigest()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def where(pyfunc) -> str:
    """``file:line`` of the function's first line (what locations in its code start from)."""
    code = pyfunc.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"


# --- values -----------------------------------------------------------------------------------

def _qualified(obj) -> str:
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or "?"
    return f"{module}.{name}"


def fingerprint(value) -> str | None:
    """What of ``value`` a compile can depend on, as text equal across processes exactly when
    the compile would be the same; None for a value that has no such text (a record reading
    one is never cached). Attributes typing reads through a value are recorded as paths of
    their own, so a module, a class or a plain object is named by its identity only."""
    t = type(value)
    if value is None or t in (str, bytes):
        return f"{t.__name__}:{value!r}"
    if isinstance(value, (bool, int, float, complex)):  # IntEnum members and other subclasses
        base = next(b for b in (bool, int, float, complex) if isinstance(value, b))
        return f"{_qualified(t)}:{base.__repr__(value)}"
    if isinstance(value, tuple):  # a named tuple (kj.float32 is one) says its class too
        items = [fingerprint(v) for v in value]
        kind = "" if t is tuple else _qualified(t)
        return None if None in items else kind + "(" + ",".join(items) + ")"
    np = sys.modules.get("numpy")  # NumPy values exist only if the program imported NumPy
    if np is not None:
        if isinstance(value, np.generic):
            return f"numpy:{value.dtype.str}:{value.tobytes().hex()}"
        if isinstance(value, np.ndarray):
            data = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
            return f"ndarray:{value.dtype.descr!r}:{value.shape}:{value.strides}:{data}"
        if isinstance(value, np.dtype):
            return (f"dtype:{value.descr!r}:{value.itemsize}:{value.alignment}:"
                    f"{value.isalignedstruct}")
    if isinstance(value, type(sys)):
        return f"module:{value.__name__}"
    if isinstance(value, type):
        return f"class:{_qualified(value)}"
    if getattr(value, "_kaiojit_dispatcher", False):
        kind = "device" if value.device else "kernel"
        return f"jit:{_qualified(value.py_func)}:{kind}:{value.options!r}"
    if hasattr(value, "launch_info") or hasattr(value, "__cuda_array_interface__"):
        return None  # device memory: its address, this process's, is compiled in (captured.py)
    own = getattr(value, "kaiojit_fingerprint", None)  # kj.declare_device's declarations
    if own is not None:
        return f"{_qualified(t)}:{own()}"
    if getattr(value, "kaiojit_method", None) is not None:
        return None  # typed by code of its own, which no fingerprint covers
    if t.__module__.startswith("kaiojit.") or t.__module__ == "kaiojit":
        # kaiojit's own objects (types, builtins, kj.threadIdx): covered by its version
        text = repr(value)
        if " at 0x" in text:
            text = getattr(value, "name", None) or getattr(value, "__name__", None)
        return None if not isinstance(text, str) else f"kaiojit:{_qualified(t)}:{text}"
    if callable(value):
        return f"callable:{_qualified(t)}:{_qualified(value)}"
    return f"object:{_qualified(t)}"


# --- recording --------------------------------------------------------------------------------

class DependencyRecorder:
    """The record of one function's typing, built as names resolve (see the module's doc)."""

    def __init__(self, pyfunc):
        self.pyfunc = pyfunc
        self._reads: dict[tuple[str, ...], list] = {}  # path -> [fingerprint, value, callees]
        self.complete = True  # False once something was read that no record can follow

    def read(self, path: tuple[str, ...] | None, value) -> None:
        """Typing resolved ``path`` (a name, then attributes) to ``value``."""
        if path is None:
            self.complete = False
            return
        if path not in self._reads:
            fp = fingerprint(value)
            if fp is None:
                self.complete = False
            self._reads[path] = [fp, value, {}]

    def callee(self, dispatcher, arg_types, record: dict | None) -> None:
        """A device function typing called, reached through a path read before."""
        for entry in self._reads.values():
            if entry[1] is dispatcher:
                if record is None:
                    self.complete = False
                else:
                    entry[2][str(tuple(str(t) for t in arg_types))] = record
                return
        self.complete = False

    def recording_callees(self, specialize_device: Callable) -> Callable:
        """``specialize_device`` that also records the callee's own record."""
        def specialize(dispatcher, arg_types, loc=None):
            kfunc = specialize_device(dispatcher, arg_types, loc)
            self.callee(dispatcher, arg_types, getattr(kfunc, "deps", None))
            return kfunc
        return specialize

    def record(self, lines: list[str]) -> dict | None:
        """The record, or None if one of the reads cannot be followed. ``lines`` are the
        file's lines the frontend parsed: the record's digest is of the text compiled (the
        file may have changed since; a record is checked against the file as it is now)."""
        source = digest_of_lines(self.pyfunc.__code__, lines)
        if not self.complete or source is None:
            return None
        return {"source": source, "where": where(self.pyfunc),
                "reads": [[list(path), fp, callees]
                          for path, (fp, _, callees) in self._reads.items()]}


def attribute_path(node) -> tuple[str, ...] | None:
    """``("cfg", "SCALE")`` for the expression ``cfg.SCALE`` (None unless names and
    attributes only)."""
    parts = []
    while node.__class__.__name__ == "Attribute":
        parts.append(node.attr)
        node = node.value
    if node.__class__.__name__ != "Name":
        return None
    parts.append(node.id)
    return tuple(reversed(parts))


class RecordingNames:
    """Mixin of the typer (before :class:`ExpressionTyping`): names and attributes that
    resolve to Python objects go into ``self.deps``. A constexpr parameter is the compile's
    argument, not a read."""

    def visit_Name(self, node):
        r = super().visit_Name(node)
        if isinstance(r, PyObj) and node.id not in self.constexprs:
            self.deps.read((node.id,), r.value)
        return r

    def visit_Attribute(self, node):
        r = super().visit_Attribute(node)
        if isinstance(r, PyObj):
            path = attribute_path(node)
            if path is None or path[0] not in self.constexprs:
                self.deps.read(path, r.value)
        return r


# --- checking ---------------------------------------------------------------------------------

def resolve(pyfunc, path) -> object:
    """What ``path`` names now, from ``pyfunc``'s namespace as the typer sees it (a closure
    variable, a global, a builtin), or ``_MISSING``."""
    name = path[0]
    value = _MISSING
    code = pyfunc.__code__
    if pyfunc.__closure__ and name in code.co_freevars:
        try:
            value = pyfunc.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            value = _MISSING
    if value is _MISSING:
        value = pyfunc.__globals__.get(name, _MISSING)
    if value is _MISSING:
        value = getattr(builtins, name, _MISSING)
    for attr in path[1:]:
        if value is _MISSING:
            break
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - whatever the attribute does now, it is not there
            value = _MISSING
    return value


def still_holds(pyfunc, record, lines: bool) -> bool:
    """Whether compiling ``pyfunc`` now would read what ``record`` says it read: the same
    source (and, with ``lines``, at the same place), every path resolving to a value of the
    same fingerprint, every device function called holding its own record."""
    try:
        if record["source"] != source_digest(pyfunc):
            return False
        if lines and record["where"] != where(pyfunc):
            return False
        for path, fp, callees in record["reads"]:
            value = resolve(pyfunc, path)
            if value is _MISSING or fingerprint(value) != fp:
                return False
            if callees:
                inner = getattr(value, "py_func", None)
                if inner is None or not all(still_holds(inner, r, lines)
                                            for r in callees.values()):
                    return False
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    return True


__all__ = ["DependencyRecorder", "RecordingNames", "attribute_path", "digest_of_lines",
           "fingerprint", "resolve", "source_digest", "still_holds", "where"]
