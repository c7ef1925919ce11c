"""The disk cache as a kernel library sees it: small JSON records under keys of its own, and
a fingerprint of a Python function.

A library that remembers a choice across processes (``kj.autotune`` keeps each key's fastest
configuration) stores it here instead of reaching into the cache's files: ``store_json`` writes
a record atomically into a folder of the cache directory, ``load_json`` reads it back (None when
absent, untrusted or damaged, as for a compiled kernel: the same trust and size rules, see
docs/cache.md), and ``function_fingerprint`` is what the record's key should depend on so that
editing the kernel (or a global it reads) makes the old record unreachable. The files are those
of :mod:`kaiojit.cachefiles`: ``python -m kaiojit cache list`` shows them, ``clear`` removes
them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import types as pytypes
from typing import Any

from .cachefiles import load_entry, store_entry


def load_json(key: str, folder: str | None = None, *, suffix: str = ".json") -> Any:
    """The value stored under ``key`` in ``folder``, or None: never stored, untrusted, damaged,
    or not JSON. A hit marks the record used (for the size limit's eviction). ``suffix`` is
    for kaiojit's own records (a kernel's coarse entry is a ``.kjc`` file)."""
    payload = load_entry(key, suffix, folder)
    if payload is None:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return None


def store_json(key: str, value: Any, folder: str | None = None, *, suffix: str = ".json",
               **about: str) -> None:
    """Store ``value`` (JSON) under ``key`` in ``folder``, atomically; ``about`` (``what=``,
    ``name=``) is what ``python -m kaiojit cache list`` shows. A failed write costs a later
    process the work again, nothing more."""
    store_entry(key, suffix, json.dumps(value).encode(), folder, **about)


def _describe_global(value: Any, seen: set) -> str | None:
    """What a referenced global contributes to the key (None: it cannot change the code)."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return repr(value)
    np = sys.modules.get("numpy")  # NumPy values exist only if the program imported NumPy
    if np is not None and isinstance(value, np.generic):
        return f"{value.dtype}:{value!r}"
    if isinstance(value, tuple):
        return "(" + ",".join(str(_describe_global(v, seen)) for v in value) + ")"
    if np is not None and isinstance(value, np.ndarray):
        return f"ndarray:{value.dtype}:{value.shape}:{hashlib.sha256(value.tobytes()).hexdigest()}"
    if isinstance(value, pytypes.ModuleType):
        return f"module:{value.__name__}"
    if getattr(value, "_kaiojit_dispatcher", False):
        return "device:" + function_fingerprint(value.py_func, seen)
    return None


def function_fingerprint(pyfunc: Any, seen: set | None = None) -> str:
    """A digest of a function's code and of the globals it reads, device functions included:
    what a stored choice about a kernel (or a grid function) depends on."""
    seen = set() if seen is None else seen
    code = pyfunc.__code__
    if code in seen:
        return "recursive"
    seen.add(code)
    h = hashlib.sha256()
    h.update(code.co_filename.encode())
    h.update(code.co_code)
    h.update(repr(code.co_consts).encode())
    h.update(repr(code.co_names).encode())
    namespace = pyfunc.__globals__
    names = set(code.co_names)
    for const in code.co_consts:  # nested code objects (none in kernels, but be safe)
        if isinstance(const, pytypes.CodeType):
            names.update(const.co_names)
    for name in sorted(names):
        if name in namespace:
            desc = _describe_global(namespace[name], seen)
            if desc is not None:
                h.update(f"{name}={desc};".encode())
    if pyfunc.__closure__:
        for name, cell in zip(code.co_freevars, pyfunc.__closure__):
            try:
                desc = _describe_global(cell.cell_contents, seen)
            except ValueError:
                desc = "empty"
            h.update(f"{name}~{desc};".encode())
    return h.hexdigest()


__all__ = ["function_fingerprint", "load_json", "store_json"]
