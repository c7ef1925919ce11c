"""The on-disk cache of compiled kernels (``@kj.jit(cache=True)``).

An entry is a compiled kernel's record (:meth:`CompiledKernel.to_record`: the last stage's
output and what a launch and inspection need), keyed on everything the compile depended on:

* what is known before compiling (the *lookup key*): the kernel's module, name, file and
  source, the signature, the options, the target (for the host: this CPU and LLVM's version),
  Python's and kaiojit's versions;
* what typing read (the *dependency record*, kaiojit/frontend/deps.py): every global and
  attribute it resolved with a fingerprint of its value, every device function compiled in
  with its source and its own reads, every foreign declaration, and where each function
  starts, which matters where line numbers reach the output (``debug``, ``lineinfo``, and
  the host's fault reports).

The lookup key names an index of the records compiled under it (the latest few). A lookup
resolves each record's reads again in the running program; the first record that still holds
names the entry (its key is the lookup key and the record's digest). A record that no longer
holds is a stale entry and is never used; the compile adds its new record to the index.

Which files are trusted, how they are written and the size limit: kaiojit/cachefiles.py.
"""

from __future__ import annotations

import hashlib
import json
import sys
import types as pytypes

from .cachefiles import load_entry, store_entry
from .compiler import CompiledKernel
from .frontend.deps import source_digest, still_holds
from .options import CompileOptions
from .target import HostImage, TargetSpec

# 4: nvptx entries keep their debug fault sites; 5: L2 prefetches of streams; 6: block-mode host
# kernels without the loop vectorizer; 7: whether a kernel has a coarse entry; 8: PTX with
# 64-bit shifts left by 31 and half-precision min/max with a zero respelled (lower/ptxfix.py);
# 9: keys from dependency records, entries as CompiledKernel records
CACHE_VERSION = "9"
INDEX_RECORDS = 8  # records kept per lookup key (a global switched back and forth still hits)


def lines_matter(options: CompileOptions, target: TargetSpec) -> bool:
    """Whether line numbers reach the compiled code: debug information and fault reports on
    the GPU with ``debug``/``lineinfo``; on the host, fault reports always name the line."""
    return options.debug or options.lineinfo or target.kind == "host"


def lookup_key(pyfunc, signature, options: CompileOptions, target: TargetSpec,
               version: str) -> str | None:
    """The key of the kernel's index: what is known before compiling (None: no source)."""
    source = source_digest(pyfunc)
    if source is None:
        return None
    code = pyfunc.__code__
    parts = [CACHE_VERSION, version, sys.version, pyfunc.__module__, pyfunc.__qualname__,
             code.co_filename, source, str(signature), repr(options), repr(target)]
    if target.kind == "host":
        from .target import host_machine_id
        parts.append(host_machine_id())
    return _digest(parts)


def entry_key(lookup: str, record: dict) -> str:
    """The key of the entry compiled under ``lookup`` with dependency record ``record``."""
    return _digest([lookup, json.dumps(record, sort_keys=True)])


def _digest(parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


# --- JSON entries -----------------------------------------------------------------------------

def load(key: str, suffix: str = ".kjc"):
    """The JSON payload stored under ``key``, or None (absent, untrusted, damaged or stale)."""
    payload = load_entry(key, suffix)
    if payload is None:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return None


def store(key: str, value, suffix: str = ".kjc", **about) -> None:
    store_entry(key, suffix, json.dumps(value).encode(), **about)


# --- compiled kernels -------------------------------------------------------------------------------

def load_kernel(lookup: str, pyfunc, signature, options: CompileOptions,
                target: TargetSpec) -> tuple[CompiledKernel, str] | None:
    """The kernel cached under ``lookup`` whose dependency record still holds, with its entry
    key; None if there is none. No stage runs (and LLVM is not loaded)."""
    index = load(lookup, ".idx")
    if not isinstance(index, list):
        return None
    lines = lines_matter(options, target)
    for candidate in index:
        try:
            record, key = candidate["record"], candidate["entry"]
        except (TypeError, KeyError):
            return None
        if not still_holds(pyfunc, record, lines) or key != entry_key(lookup, record):
            continue
        entry = load(key)
        if not isinstance(entry, dict):
            return None
        try:
            ck = CompiledKernel.from_record(entry, pyfunc, signature, options, target)
        except ValueError:
            return None
        if isinstance(ck.image, HostImage) and not _calls_only_allowed(ck.image):
            return None
        return ck, key
    return None


def _calls_only_allowed(image: HostImage) -> bool:
    """Whether the object code leaves undefined only names kaiojit's code may call (MCJIT
    would otherwise resolve any function of the process: ``system``)."""
    from .hostsyms import host_symbol_allowed, undefined_symbols

    try:
        return all(host_symbol_allowed(n) for n in undefined_symbols(image.object_code))
    except ValueError:
        return False


def store_kernel(lookup: str, ck: CompiledKernel) -> str | None:
    """Cache a compiled kernel under its lookup key and dependency record; the entry's key
    (None: the compile read something no record can follow, and is not cached)."""
    record = ck.kfunc.deps if ck.kfunc is not None else None
    if record is None:
        return None
    key = entry_key(lookup, record)
    store(key, ck.to_record(), what="kernel", name=ck.py_name, kind=ck.target.kind)
    index = load(lookup, ".idx")
    index = [c for c in index if isinstance(c, dict) and c.get("entry") != key] \
        if isinstance(index, list) else []
    store(lookup, [{"record": record, "entry": key}, *index][:INDEX_RECORDS], ".idx",
          what="index", name=ck.py_name, kind=ck.target.kind)
    return key


def keep_coarse_entry(key: str, ck: CompiledKernel) -> None:
    """Keep the kernel's coarse entry, once a launch has compiled it, beside the kernel's
    own cache entry (under ``key`` with a suffix), and read it from there next time."""
    if ck.coarse is None:
        return
    coarse_key = key + "-coarse"

    def load_ptx() -> str | None:
        entry = load(coarse_key)
        ptx = entry.get("ptx") if isinstance(entry, dict) else None
        return ptx if isinstance(ptx, str) and ck.coarse.name in ptx else None

    def store_ptx(ptx: str) -> None:
        store(coarse_key, {"name": ck.coarse.name, "ptx": ptx}, what="coarse entry",
              name=ck.py_name, kind=ck.target.kind)
    ck.coarse.keep_on_disk(load_ptx, store_ptx)


# --- the autotuner's key ----------------------------------------------------------------------

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
    """A digest of a function's code and of the globals it reads, device functions included
    (the autotuner's key of a kernel's tuned choice)."""
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


__all__ = ["CACHE_VERSION", "entry_key", "function_fingerprint", "keep_coarse_entry",
           "lines_matter", "load", "load_kernel", "lookup_key", "store", "store_kernel"]
