"""Foreign CUDA C on the cpu backend: ``.cu`` files compiled for the host by a C++ compiler.

A device function declared with ``kj.declare_device(name, sig, link=["f.cu"])`` (numba's
``cuda.declare_device`` with ``cuda.CUSource``) runs on the GPU as NVRTC compiles it. On the
cpu backend the same files are compiled as C++ for the host: a short prelude defines CUDA's
function qualifiers away (``__device__``, ``__host__``, ``__forceinline__``,
``__noinline__``), so a self-contained device function (arithmetic, pointers, calls of other
functions of the files) builds and runs as it would on the GPU. What has no host meaning
(``threadIdx``, ``__syncthreads()``, CUDA's headers) fails to compile, and the compiler's
message is the error, located at the kernel's call.

The files a call links (its declaration's, then the kernel's ``link=`` ``.cu`` files) are
compiled together into one shared library, named by the digest of their contents, the
prelude and the compiler, kept in kaiojit's cache directory (when it is trusted: see
kaiojit/cachefiles.py) or a private temporary one. Each library is loaded ``RTLD_LOCAL``, so
two libraries may define one name (``times2`` in numba's ABI and in C's); the declared
function is made known to MCJIT as ``kaiojit_cu_<digest>_<name>``, which host code calls and
which :func:`register_symbols` finds again when a kernel comes from the disk cache.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

from .errors import CompileError

SYMBOL_PREFIX = "kaiojit_cu_"
PRELUDE = b"""// kaiojit: CUDA C compiled for the host (the cpu backend)
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
"""
_COMPILERS = ("c++", "g++", "clang++")
_LOCK = threading.Lock()
_LIBRARIES: dict[str, ctypes.CDLL] = {}  # digest -> the loaded library (kept for the process)
_FOLDER: list[str] = []


def compiler() -> str | None:
    """The host C++ compiler: ``$CXX``, else the first of c++, g++, clang++ on PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx) or cxx
    return next((p for p in map(shutil.which, _COMPILERS) if p), None)


def _folder() -> str:
    """Where the libraries live: kaiojit's cache directory if trusted, else a private
    temporary directory of this process."""
    if not _FOLDER:
        from .cachefiles import trusted_dir
        from .options import cache_dir

        folder = os.path.join(cache_dir(), "hostcu")
        if not trusted_dir(folder, create=True):
            folder = tempfile.mkdtemp(prefix="kaiojit-hostcu-")
        _FOLDER.append(folder)
    return _FOLDER[0]


def _digest(sources: list[bytes], cxx: str) -> str:
    h = hashlib.blake2s(digest_size=10)
    for part in (PRELUDE, cxx.encode(), *sources):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _build(paths: tuple[str, ...], sources: list[bytes], cxx: str, digest: str) -> str:
    """Compile ``paths`` into ``<folder>/<digest>.so`` (once; an existing one is reused)."""
    folder = _folder()
    target = os.path.join(folder, f"{digest}.so")
    if os.path.isfile(target):
        return target
    with tempfile.TemporaryDirectory(prefix="kaiojit-hostcu-build-") as work:
        prelude = os.path.join(work, "kaiojit_cuda_host.h")
        with open(prelude, "wb") as f:
            f.write(PRELUDE)
        out = os.path.join(work, "lib.so")
        cmd = [cxx, "-x", "c++", "-std=c++17", "-O2", "-fPIC", "-shared", "-Wl,-Bsymbolic",
               "-include", prelude, *paths, "-o", out]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CompileError(f"could not run the host C++ compiler {cxx}: {e}") from None
        if done.returncode != 0:
            names = ", ".join(os.path.basename(p) for p in paths)
            raise CompileError(
                f"the cpu backend runs foreign CUDA C on the host, compiled as C++ by {cxx} "
                f"(with __device__, __host__, __forceinline__ and __noinline__ defined away), "
                f"and {names} does not compile there:\n{done.stderr.strip()[-2000:]}")
        tmp = f"{target}.{os.getpid()}.{threading.get_ident()}"
        shutil.copyfile(out, tmp)
        os.replace(tmp, target)
    return target


def library(paths: tuple[str, ...]) -> tuple[str, ctypes.CDLL]:
    """``(digest, library)`` of the ``.cu`` files ``paths`` compiled together for the host."""
    cxx = compiler()
    if cxx is None:
        raise CompileError("the cpu backend compiles foreign CUDA C (.cu) for the host with a "
                           "C++ compiler, and none was found: install g++ or clang++, or set "
                           "CXX")
    sources = []
    for p in paths:
        with open(p, "rb") as f:
            sources.append(f.read())
    digest = _digest(sources, cxx)
    with _LOCK:
        lib = _LIBRARIES.get(digest)
        if lib is None:
            lib = _LIBRARIES[digest] = ctypes.CDLL(_build(paths, sources, cxx, digest))
    return digest, lib


def symbol(name: str, paths: tuple[str, ...]) -> str:
    """The MCJIT symbol of the C function ``name`` that the ``.cu`` files ``paths`` define,
    compiled and registered. CompileError when they do not compile or do not define it."""
    from llvmlite import binding as llvm

    digest, lib = library(paths)
    try:
        fn = getattr(lib, name)
    except AttributeError:
        names = ", ".join(os.path.basename(p) for p in paths)
        raise CompileError(f"{names} define no function {name!r} (a declared device function "
                           "is looked up by its C name: define it extern \"C\")") from None
    registered = f"{SYMBOL_PREFIX}{digest}_{name}"
    llvm.add_symbol(registered, ctypes.cast(fn, ctypes.c_void_p).value)
    return registered


def register_symbols(names) -> None:
    """Make the ``kaiojit_cu_*`` symbols of host code read back from the disk cache known to
    MCJIT again: their libraries, by digest, from this process or the library folder."""
    from llvmlite import binding as llvm

    for registered in names:
        digest, _, name = registered[len(SYMBOL_PREFIX):].partition("_")
        with _LOCK:
            lib = _LIBRARIES.get(digest)
            path = os.path.join(_folder(), f"{digest}.so")
            if lib is None and os.path.isfile(path):
                lib = _LIBRARIES[digest] = ctypes.CDLL(path)
        if lib is None or not hasattr(lib, name):
            raise CompileError(f"cached host code calls the foreign function {name!r}, whose "
                               "compiled CUDA C is gone: clear kaiojit's cache "
                               "(python -m kaiojit cache clear) and run again")
        llvm.add_symbol(registered, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)


__all__ = ["PRELUDE", "SYMBOL_PREFIX", "compiler", "library", "register_symbols", "symbol"]
