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

The lookup key names one file holding the kernels compiled under it (the latest few), each
with its record. A lookup resolves each record's reads again in the running program; the
first record that still holds gives its kernel. A record that no longer holds is a stale
kernel and is never used; the compile adds its kernel and new record to the file. The file's
first line is its header (the lookup key and, per kernel, the record, a sha256, and where its
JSON lies in the rest), so a hit reads one file and parses and checks only the kernel it
takes.

Which files are trusted, how they are written and the size limit: kaiojit/cachefiles.py.
"""

from __future__ import annotations

import hashlib
import json
import sys

from .cache import load_json, store_json
from .cachefiles import entry_path, read_entry, touch, write_file
from .compiler import CompiledKernel
from .frontend.deps import source_digest, still_holds
from .options import CompileOptions
from .target import HostImage, TargetSpec

# 4: nvptx entries keep their debug fault sites; 5: L2 prefetches of streams; 6: block-mode host
# kernels without the loop vectorizer; 7: whether a kernel has a coarse entry; 8: PTX with
# 64-bit shifts left by 31 and half-precision min/max with a zero respelled (lower/ptxfix.py);
# 9: keys from dependency records, entries as CompiledKernel records
CACHE_VERSION = "9"
KERNELS_KEPT = 4  # kernels kept per lookup key (a global switched back and forth still hits)


def lines_matter(options: CompileOptions, target: TargetSpec) -> bool:
    """Whether line numbers reach the compiled code: debug information and fault reports on
    the GPU with ``debug``/``lineinfo``; on the host, fault reports always name the line."""
    return options.debug or options.lineinfo or target.kind == "host"


def lookup_key(pyfunc, signature, options: CompileOptions, target: TargetSpec,
               version: str) -> str | None:
    """The key of the kernel's file: what is known before compiling (None: no source)."""
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


def _digest(parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


# --- compiled kernels -------------------------------------------------------------------------------

def _kernels_file(lookup: str) -> tuple[str, dict, bytes] | None:
    """The file of the kernels compiled under ``lookup``: (path, header, rest), or None."""
    found = read_entry(lookup, ".kjc")
    return found if found is not None and isinstance(found[1].get("kernels"), list) else None


def _kernel_json(rest: bytes, kernel: dict) -> bytes | None:
    """One kernel's JSON in the file's body, if its digest matches."""
    try:
        at, size = int(kernel["at"]), int(kernel["size"])
        text = rest[at:at + size]
        return text if hashlib.sha256(text).hexdigest() == kernel["sha256"] else None
    except (KeyError, TypeError, ValueError):
        return None


def load_kernel(lookup: str, pyfunc, signature, options: CompileOptions,
                target: TargetSpec) -> tuple[CompiledKernel, str] | None:
    """The kernel cached under ``lookup`` whose dependency record still holds, with the key
    of its coarse entry; None if there is none. No stage runs (and LLVM is not loaded)."""
    found = _kernels_file(lookup)
    if found is None:
        return None
    path, meta, rest = found
    lines = lines_matter(options, target)
    for kernel in meta["kernels"]:
        if not isinstance(kernel, dict) or not still_holds(pyfunc, kernel.get("record"), lines):
            continue
        text = _kernel_json(rest, kernel)
        if text is None:
            return None
        try:
            ck = CompiledKernel.from_record(json.loads(text), pyfunc, signature, options, target)
        except ValueError:
            return None
        if isinstance(ck.image, HostImage) and not _calls_only_allowed(ck.image):
            return None
        touch(path)
        return ck, _coarse_key(lookup, kernel["sha256"])
    return None


def _coarse_key(lookup: str, sha256: str) -> str:
    return f"{lookup}-{sha256[:16]}-coarse"


def _calls_only_allowed(image: HostImage) -> bool:
    """Whether the object code leaves undefined only names kaiojit's code may call (MCJIT
    would otherwise resolve any function of the process: ``system``)."""
    from .hostsyms import host_symbol_allowed, undefined_symbols

    try:
        return all(host_symbol_allowed(n) for n in undefined_symbols(image.object_code))
    except ValueError:
        return False


def store_kernel(lookup: str, ck: CompiledKernel) -> str | None:
    """Cache a compiled kernel under its lookup key with its dependency record, before the
    kernels kept there already (the latest ``KERNELS_KEPT``); the key of its coarse entry
    (None: the compile read something no record can follow, and is not cached)."""
    record = ck.kfunc.deps if ck.kfunc is not None else None
    if record is None:
        return None
    text = json.dumps(ck.to_record()).encode()
    sha = hashlib.sha256(text).hexdigest()
    kept = [(record, sha, text)]
    found = _kernels_file(lookup)
    if found is not None:
        _, meta, rest = found
        for kernel in meta["kernels"]:
            old = _kernel_json(rest, kernel) if isinstance(kernel, dict) else None
            if old is not None and kernel.get("record") != record:
                kept.append((kernel["record"], kernel["sha256"], old))
    kernels, body, at = [], [], 0
    for rec, digest, data in kept[:KERNELS_KEPT]:
        kernels.append({"record": rec, "sha256": digest, "at": at, "size": len(data)})
        body.append(data)
        at += len(data)
    header = json.dumps({"key": lookup, "what": "kernel", "kind": ck.target.kind,
                         "name": ck.py_name, "kernels": kernels})
    write_file(entry_path(lookup, ".kjc"), header.encode() + b"\n" + b"".join(body))
    return _coarse_key(lookup, sha)


def keep_coarse_entry(key: str, ck: CompiledKernel) -> None:
    """Keep the kernel's coarse entry, once a launch has compiled it, under ``key``, and read
    it from there next time."""
    if ck.coarse is None:
        return

    def load_ptx() -> str | None:
        entry = load_json(key, suffix=".kjc")
        ptx = entry.get("ptx") if isinstance(entry, dict) else None
        return ptx if isinstance(ptx, str) and ck.coarse.name in ptx else None

    def store_ptx(ptx: str) -> None:
        store_json(key, {"name": ck.coarse.name, "ptx": ptx}, suffix=".kjc",
                   what="coarse entry", name=ck.py_name, kind=ck.target.kind)
    ck.coarse.keep_on_disk(load_ptx, store_ptx)


__all__ = ["CACHE_VERSION", "keep_coarse_entry", "lines_matter",
           "load_kernel", "lookup_key", "store_kernel"]
