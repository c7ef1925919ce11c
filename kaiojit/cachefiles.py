"""The files of kaiojit's disk cache: where they live, which are trusted, how they are written,
and the size limit.

Every file is an *entry*: a JSON header line (its key, a sha256 of the rest, and what it
holds) and a payload. Trust is the file system's: kaiojit reads only directories and files
that the user owns and that no one else can write (created 0700 and 0600), opened without
following links; anything else is refused, and the compile that follows writes over it. The
key and digest catch a damaged or misplaced file, not an attacker (anyone can recompute
them): see docs/cache.md.

Writes are atomic (a temporary file in the same directory, renamed), and a failed one removes
its temporary file. The cache is bounded (``KAIOJIT_CACHE_SIZE``, default 1G): when a write
takes it past the limit, the least recently used entries (a hit refreshes an entry's time)
are deleted until it is back under 90% of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import warnings
from collections.abc import Iterator

from .options import cache_dir

DEFAULT_SIZE_LIMIT = 1 << 30
SIZE_ENV = "KAIOJIT_CACHE_SIZE"
# kernels, libdevice subsets, autotuned choices
SUFFIXES = (".kjc", ".bc", ".json")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_LOCK = threading.Lock()
_TRUSTED_DIRS: set[str] = set()
_WARNED: set[str] = set()
_unmeasured = [None]  # bytes this process wrote since it last measured the cache (None: never)


class CacheTrustWarning(UserWarning):
    """A cache directory kaiojit will not read or write (owned by someone else, or writable by
    others): kernels are compiled instead."""


# --- the size limit -----------------------------------------------------------------------------

def parse_size(text: str) -> int:
    """``KAIOJIT_CACHE_SIZE``'s value in bytes: a whole number with an optional K, M, G or T
    suffix (powers of 1024; ``2G``, ``500M``, ``1048576``)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    digits = t[:len(t) - len(unit)]
    if not digits.isdigit() or int(digits) <= 0:
        raise ValueError(f"{SIZE_ENV}={text!r}: give the disk cache's size limit as a positive "
                         "whole number of bytes with an optional K, M, G or T suffix (500M, "
                         "2G); the default is 1G")
    return int(digits) * _UNITS[unit]


def size_limit() -> int:
    """The cache's size limit in bytes (``KAIOJIT_CACHE_SIZE``; ValueError naming it if it
    is not a size)."""
    text = os.environ.get(SIZE_ENV)
    return DEFAULT_SIZE_LIMIT if text is None or not text.strip() else parse_size(text)


# --- trust --------------------------------------------------------------------------------------

def _mode_is_private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def trusted_dir(path: str, create: bool) -> bool:
    """Whether ``path`` is a directory kaiojit may use: created 0700 if absent (with
    ``create``), the user's own, writable by no one else, not a link. Warns once per refused
    directory."""
    if path in _TRUSTED_DIRS:
        return True
    try:
        if create and not os.path.isdir(path):
            os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    why = None
    if not stat.S_ISDIR(st.st_mode):
        why = "is not a directory"
    elif st.st_uid != os.geteuid():
        why = "belongs to another user"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = "can be written by other users"
    if why is None:
        with _LOCK:
            _TRUSTED_DIRS.add(path)
        return True
    if path not in _WARNED:
        _WARNED.add(path)
        warnings.warn(f"kaiojit's disk cache does not use {path}: it {why} (see docs/cache.md); "
                      "kernels are compiled instead", CacheTrustWarning, stacklevel=2)
    return False


def _trusted_parent(path: str, create: bool) -> bool:
    root = cache_dir()
    parent = os.path.dirname(path)
    if not trusted_dir(root, create):
        return False
    return parent == root or trusted_dir(parent, create)


def read_trusted(path: str) -> bytes | None:
    """The file's bytes if kaiojit trusts it (a regular file the user owns, writable by no
    one else, in trusted directories, not reached through a link), else None."""
    if not _trusted_parent(path, create=False):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _mode_is_private(st):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


# --- entries ------------------------------------------------------------------------------------

def entry_path(key: str, suffix: str, folder: str | None = None) -> str:
    """Where the entry ``key`` lives: ``<cache>/<folder or key[:2]>/<key><suffix>``."""
    return os.path.join(cache_dir(), folder or key[:2], key + suffix)


def read_entry(key: str, suffix: str, folder: str | None = None) -> tuple[str, dict, bytes] | None:
    """The trusted file of the entry ``key``: its path, its header (a dict naming ``key``) and
    the rest, or None (absent, untrusted, another key's, a damaged header)."""
    path = entry_path(key, suffix, folder)
    data = read_trusted(path)
    if data is None:
        return None
    header, _, rest = data.partition(b"\n")
    try:
        meta = json.loads(header)
    except ValueError:
        return None
    return (path, meta, rest) if isinstance(meta, dict) and meta.get("key") == key else None


def load_entry(key: str, suffix: str, folder: str | None = None) -> bytes | None:
    """The payload of the entry ``key``, or None: absent, untrusted, of another key, or
    damaged. A hit marks the entry used (for the size limit's eviction)."""
    found = read_entry(key, suffix, folder)
    if found is None or found[1].get("sha256") != hashlib.sha256(found[2]).hexdigest():
        return None
    touch(found[0])
    return found[2]


def store_entry(key: str, suffix: str, payload: bytes, folder: str | None = None,
                **about) -> None:
    """Write the entry ``key`` atomically; ``about`` goes into its header (what ``python -m
    kaiojit cache list`` shows). A failure costs a later process a compile, nothing more."""
    header = json.dumps({"key": key, "sha256": hashlib.sha256(payload).hexdigest(), **about})
    write_file(entry_path(key, suffix, folder), header.encode() + b"\n" + payload)


def write_file(path: str, data: bytes) -> None:
    """Write a file of the cache atomically, in a trusted directory (made if absent): a
    temporary file (mode 0600) renamed into place, removed if anything fails."""
    if not _trusted_parent(path, create=True):
        return
    import tempfile  # (here: a hit, which writes nothing, need not import it)

    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _account(len(data), keep=path)


def touch(path: str) -> None:
    """Mark a file used now (the size limit evicts the least recently used)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _account(nbytes: int, keep: str) -> None:
    """Count a write. A process measures the cache at its first write and again each time it
    has written a tenth of the limit, and evicts if the cache is past the limit."""
    limit = size_limit()
    with _LOCK:
        written = _unmeasured[0]
        if written is not None and written + nbytes <= limit // 10:
            _unmeasured[0] = written + nbytes
            return
        _unmeasured[0] = 0
    if total_size() > limit:
        evict(limit, keep=keep)


# --- listing, eviction, clearing ------------------------------------------------------------

class CacheFile:
    """One file of the cache: its path, size, last use (mtime), and its header's fields.
    (A plain class: making a dataclass would cost every cache hit's import a millisecond.)"""

    __slots__ = ("about", "path", "size", "used")

    def __init__(self, path: str, size: int, used: float, about: dict):
        self.path, self.size, self.used, self.about = path, size, used, about


def files(read_headers: bool = False) -> Iterator[CacheFile]:
    """Every entry (and leftover temporary file) under the cache directory."""
    root = cache_dir()
    try:
        folders = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for folder in folders:
        try:
            listing = list(os.scandir(folder.path))
        except OSError:
            continue
        for e in listing:
            if not e.is_file(follow_symlinks=False) or not e.name.endswith((*SUFFIXES, ".tmp")):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            yield CacheFile(e.path, st.st_size, st.st_mtime,
                            _header(e.path) if read_headers else {})


def _header(path: str) -> dict:
    data = read_trusted(path)
    if data is None:
        return {"untrusted": True}
    try:
        about = json.loads(data.partition(b"\n")[0])
    except ValueError:
        return {"damaged": True}
    return about if isinstance(about, dict) else {"damaged": True}


def total_size() -> int:
    return sum(f.size for f in files())


def evict(limit: int, keep: str | None = None) -> int:
    """Delete the least recently used files until the cache is under 90% of ``limit``
    (never ``keep``); the bytes deleted."""
    found = sorted(files(), key=lambda f: f.used)
    total = sum(f.size for f in found)
    target, freed = limit * 9 // 10, 0
    for f in found:
        if total - freed <= target:
            break
        if f.path == keep:
            continue
        try:
            os.unlink(f.path)
        except OSError:
            continue
        freed += f.size
    return freed


def clear() -> int:
    """Delete every file of the cache (and the folders left empty); the bytes deleted."""
    freed = 0
    for f in list(files()):
        try:
            os.unlink(f.path)
        except OSError:
            continue
        freed += f.size
    try:
        for e in os.scandir(cache_dir()):
            if e.is_dir(follow_symlinks=False):
                try:
                    os.rmdir(e.path)
                except OSError:
                    pass
    except OSError:
        pass
    return freed


__all__ = ["DEFAULT_SIZE_LIMIT", "SIZE_ENV", "CacheFile", "CacheTrustWarning", "clear",
           "entry_path", "evict", "files", "load_entry", "parse_size", "read_entry", "read_trusted",
           "size_limit", "store_entry", "total_size", "touch", "trusted_dir", "write_file"]
