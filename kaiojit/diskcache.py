"""The on-disk cache of compiled kernels (``@kj.jit(cache=True)``).

An entry is the last stage's output of the target's pipeline (PTX, or the host's object code)
with what a launch and inspection need (entry name, parameter names, shared bytes, the kir and
optimized LLVM text, and for the host its block mode and fault sites). Its key covers
everything the compile depended on: the kernel's source, the values of the module-level
constants it reads, the source of every device function it calls (recursively), the
signature, the options, the target (for the host: this CPU and LLVM's version) and kaiojit's
version, so a stale entry cannot be hit. An entry is a header line (key and a digest of the
rest) and a JSON payload; one that fails either check is a miss, and the compile rewrites it.
Entries are written atomically.
"""

from __future__ import annotations

import binascii
import dataclasses
import hashlib
import json
import os
import sys
import types as pytypes

from .compiler import CoarseEntry, CompiledKernel
from .options import CompileOptions, cache_dir, store_bytes
from .target import HostImage, TargetSpec
from .types import runtime_signature

# 4: nvptx entries keep their debug fault sites; 5: L2 prefetches of streams; 6: block-mode host
# kernels without the loop vectorizer; 7: whether a kernel has a coarse entry; 8: PTX with
# 64-bit shifts left by 31 and half-precision min/max with a zero respelled (lower/ptxfix.py)
CACHE_VERSION = "8"


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
    parts = [CACHE_VERSION, version, function_fingerprint(pyfunc), str(signature),
             repr(options), repr(target)]
    if target.kind == "host":
        from .target import host_machine_id
        parts.append(host_machine_id())
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def _path(key: str) -> str:
    return os.path.join(cache_dir(), key[:2], key + ".kjc")


def load(key: str) -> dict | None:
    """The payload stored under ``key``, or None (absent, unreadable, damaged or stale)."""
    try:
        with open(_path(key), "rb") as f:
            data = f.read()
        header, _, payload = data.partition(b"\n")
        meta = json.loads(header)
        if meta.get("key") != key or meta.get("sha256") != hashlib.sha256(payload).hexdigest():
            return None
        entry = json.loads(payload)
    except (OSError, ValueError, AttributeError):
        return None
    return entry if isinstance(entry, dict) else None


def store(key: str, entry: dict) -> None:
    """Write an entry atomically (a failure to write only costs the next process a compile)."""
    payload = json.dumps(entry).encode()
    header = json.dumps({"key": key, "sha256": hashlib.sha256(payload).hexdigest()}).encode()
    store_bytes(_path(key), header + b"\n" + payload)


# --- compiled kernels -------------------------------------------------------------------------------

def store_kernel(key: str, ck: CompiledKernel) -> None:
    """Cache a compiled kernel: its image (the last stage's output) and its metadata."""
    entry = {"kind": ck.target.kind, "name": ck.name, "arg_names": list(ck.arg_names),
             "kir": ck.kir, "llvm": ck.llvm, "static_shared_bytes": ck.static_shared_bytes,
             "uses_sync": ck.uses_sync, "written_arrays": sorted(ck.written_arrays or ())}
    if isinstance(ck.image, HostImage):
        entry.update(image=binascii.b2a_base64(ck.image.object_code, newline=False).decode(),
                     entry=ck.image.entry, uses_block_mode=ck.image.uses_block_mode,
                     host_shared_bytes=ck.image.static_shared_bytes, sites=ck.image.sites,
                     symbols=list(ck.image.symbols))
    else:
        entry.update(image=ck.image, fault_sites=list(ck.fault_sites), coarse=bool(ck.coarse))
        entry["arch"] = ck.target.arch  # sm_90a for a kernel with arch-specific features
    store(key, entry)


def keep_coarse_entry(key: str, ck: CompiledKernel) -> None:
    """Keep the kernel's coarse entry, once a launch has compiled it, beside the kernel's
    own cache entry (under ``key`` with a suffix), and read it from there next time."""
    if ck.coarse is None:
        return
    coarse_key = key + "-coarse"

    def load_ptx() -> str | None:
        entry = load(coarse_key)
        ptx = entry.get("ptx") if entry is not None else None
        return ptx if isinstance(ptx, str) and ck.coarse.name in ptx else None

    def store_ptx(ptx: str) -> None:
        store(coarse_key, {"name": ck.coarse.name, "ptx": ptx})
    ck.coarse.keep_on_disk(load_ptx, store_ptx)


def load_kernel(key: str, pyfunc, signature, options: CompileOptions,
                target: TargetSpec) -> CompiledKernel | None:
    """The kernel cached under ``key``, or None; no stage runs (and LLVM is not loaded)."""
    entry = load(key)
    if entry is None or entry.get("kind") != target.kind:
        return None
    try:
        if target.kind == "host":
            image = HostImage(
                object_code=binascii.a2b_base64(entry["image"], strict_mode=True),
                entry=str(entry["entry"]), uses_block_mode=bool(entry["uses_block_mode"]),
                static_shared_bytes=int(entry["host_shared_bytes"]), sites=list(entry["sites"]),
                symbols=tuple(str(n) for n in entry["symbols"]))
            ptx, fault_sites, coarse = "", (), None
        else:
            image = ptx = str(entry["image"])
            fault_sites = tuple(dict(site) for site in entry["fault_sites"])
            target = dataclasses.replace(target, arch=str(entry.get("arch", target.arch)))
            coarse = None
            if entry.get("coarse"):  # compiled when a launch first takes it, not cached
                coarse = CoarseEntry(pyfunc, signature, options, target, str(entry["name"]))
        return CompiledKernel(
            name=str(entry["name"]), py_name=pyfunc.__name__,
            signature=runtime_signature(signature),
            arg_names=tuple(entry["arg_names"]), kir=str(entry["kir"]), llvm_unoptimized="",
            llvm=str(entry["llvm"]), ptx=ptx, image=image,
            static_shared_bytes=int(entry["static_shared_bytes"]),
            uses_sync=bool(entry["uses_sync"]), options=options, target=target,
            timings={"cache": True}, fault_sites=fault_sites, coarse=coarse,
            written_arrays=(frozenset(entry["written_arrays"]) if "written_arrays" in entry
                            else None))
    except (KeyError, TypeError, ValueError):
        return None
