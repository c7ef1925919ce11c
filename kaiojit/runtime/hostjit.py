"""Loading host object code: a :class:`~kaiojit.target.HostImage` made callable in this process.

The compiler hands the cpu backend native object code (ELF on Linux), the same bytes whether
it was just compiled or read from the disk cache. Loading links it into memory with MCJIT's
runtime linker (``ExecutionEngine.add_object_file``): relocations are applied, libm and libc
calls resolved, and the entry's address becomes a ctypes function. No LLVM IR is compiled
here; the engine only owns the memory the code lives in.

An exported kernel (``kaiojit.aot``) is already linked into a shared library: its image names
the library, which the dynamic loader maps, and llvmlite is never imported.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from kaiojit.target import HostImage, link_c_functions, register_host_symbols

# void entry(slots, ctx, first_block, end_block); ctypes releases the GIL while it runs
RUN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64)

OWN_SYMBOL_PREFIX = "kaiojit_"  # native functions kaiojit itself defines (kaiojit.tma_host)
SANITIZER_PREFIX = "kaiojit_san_"  # those of the checked mode (kaiojit.runtime.sanitizer)
_LOAD_LOCK = threading.Lock()  # MCJIT's engine creation and linking are not thread-safe


@dataclass(frozen=True, slots=True)
class HostCode:
    """A loaded HostImage: what owns the code (an MCJIT engine, or a shared library, kept
    alive with it), the entry's address, and the entry as a ctypes function
    ``run(slots, ctx, first_block, end_block)``."""

    image: HostImage
    engine: Any
    address: int
    run: ctypes._CFuncPtr


def load_host_image(image: HostImage) -> HostCode:
    """Link ``image``'s object code into this process and return its callable entry."""
    if image.library:
        return _load_library(image)
    from llvmlite import binding as llvm

    register_host_symbols()
    own = [name for name in image.symbols if name.startswith(OWN_SYMBOL_PREFIX)]
    if any(name.startswith(SANITIZER_PREFIX) for name in own):
        from kaiojit.runtime import sanitizer  # the checked mode's shadow functions

        sanitizer.register_symbols()
    foreign = [name for name in own if name.startswith("kaiojit_cu_")]
    if foreign:  # foreign CUDA C compiled for the host (kaiojit/hostcu.py)
        from kaiojit import hostcu

        hostcu.register_symbols(foreign)
    if any(not name.startswith(SANITIZER_PREFIX) for name in own):
        from kaiojit import tma_host  # kaiojit's own native functions: the tensor copies

        tma_host.register_symbols()
    link_c_functions(tuple(n for n in image.symbols if not n.startswith(OWN_SYMBOL_PREFIX)))
    with _LOAD_LOCK:
        engine = llvm.create_mcjit_compiler(_empty_module(), _engine_target_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(image.object_code))
        engine.finalize_object()
        address = engine.get_function_address(image.entry)
    if not address:
        raise RuntimeError(f"host object code has no entry {image.entry!r}")
    return HostCode(image=image, engine=engine, address=address, run=RUN_TYPE(address))


def _load_library(image: HostImage) -> HostCode:
    """An exported kernel: its entry in the shared library the image names."""
    library = ctypes.CDLL(image.library)
    try:
        address = ctypes.cast(getattr(library, image.entry), ctypes.c_void_p).value
    except AttributeError:
        raise RuntimeError(f"{image.library} has no entry {image.entry!r}") from None
    return HostCode(image=image, engine=library, address=address, run=RUN_TYPE(address))


def _empty_module():
    """MCJIT is created around a module; the code comes from the object file, so it is empty."""
    from llvmlite import binding as llvm

    module = llvm.parse_assembly("")
    module.triple = llvm.get_process_triple()
    return module


def _engine_target_machine():
    """A target machine for one engine, which owns (and frees) it. Nothing is compiled with
    it, so it needs no CPU features (asking for them costs ~0.5 ms)."""
    from llvmlite import binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(codemodel="jitdefault", jit=True)


__all__ = ["HostCode", "load_host_image"]
