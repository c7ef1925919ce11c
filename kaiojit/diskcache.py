"""The on-disk cache of compiled kernels (``@kj.jit(cache=True)``).

An entry is the PTX and what a launch needs (entry name, signature, parameter names, static
shared bytes), stored under a key that covers everything the compile depended on: the
kernel's source, the values of the module-level constants it reads, the source of every
device function it calls (recursively), the signature, the options, the target and kaiojit's
version. A stale entry therefore cannot be hit; entries are written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import sys
import types as pytypes

CACHE_VERSION = "1"


def cache_dir() -> str:
    root = os.environ.get("KAIOJIT_CACHE_DIR")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kaiojit")


def _describe_global(value, seen: set) -> str | None:
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


def function_fingerprint(pyfunc, seen: set | None = None) -> str:
    """A digest of a function's code and of the globals it reads, device functions included."""
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


def entry_key(pyfunc, signature, options, target, version: str) -> str:
    h = hashlib.sha256()
    for part in (CACHE_VERSION, version, function_fingerprint(pyfunc), str(signature),
                 repr(options), repr(target)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _path(key: str) -> str:
    return os.path.join(cache_dir(), key[:2], key + ".json")


def load(key: str) -> dict | None:
    try:
        with open(_path(key), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    return entry if entry.get("key") == key else None


def store(key: str, entry: dict) -> None:
    """Write an entry atomically (a failure to write only costs the next process a compile)."""
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(dict(entry, key=key), f)
        os.replace(tmp, path)
    except OSError:
        pass


def store_bytes(path: str, data: bytes) -> None:
    """Write a file of the cache atomically (a failure only costs a later rebuild)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass
