"""LLVM IR -> optimized LLVM -> PTX, through llvmlite's NVPTX backend.

libdevice is linked only when a kernel calls into it; every function but the kernel is then
made internal before optimizing, so what the kernel does not use disappears.
"""

from __future__ import annotations

import functools
import threading

from llvmlite import binding as llvm

from ..errors import LibdeviceNotFound
from ..target import LLVM_MAX_PTX, parse_arch, ptx_version_for  # noqa: F401 (re-exported)
from .ptxfix import respell

_LOCK = threading.Lock()
_initialized = False

def initialize() -> None:
    global _initialized
    if not _initialized:
        with _LOCK:
            if not _initialized:
                llvm.initialize_all_targets()
                llvm.initialize_all_asmprinters()
                _initialized = True


@functools.lru_cache(maxsize=16)
def target_machine(arch: str, ptx_version: int, opt: int):
    initialize()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return target.create_target_machine(cpu=arch, features=f"+ptx{ptx_version}", opt=opt,
                                        codemodel="default")


@functools.lru_cache(maxsize=1)
def _libdevice_bitcode() -> bytes:
    try:
        from cuda.pathfinder import find_bitcode_lib
        path = find_bitcode_lib("device")
    except Exception as e:  # noqa: BLE001 - any failure means: not found
        raise LibdeviceNotFound(
            "this kernel uses math functions from libdevice, which was not found: install a CUDA "
            "toolkit or the extra: pip install 'kaiojit[cu13]'"
            f" ({type(e).__name__}: {e})"
        ) from None
    with open(path, "rb") as f:
        return f.read()


_SUBSETS: dict[tuple, bytes] = {}


def _libdevice_subset(names: tuple[str, ...], triple: str, data_layout: str):
    """A module of just the libdevice functions ``names`` and what they call.

    Parsing the whole library (~450 KB of bitcode) costs ~30 ms a compile, linking and
    dropping the rest ~10 ms more; the subset for a set of names parses in well under 1 ms.
    Subsets are kept for the process and as entries of kaiojit's disk cache (checked and
    trusted as every entry is: kaiojit/cachefiles.py), keyed by the library's bytes, the
    names and llvmlite's version, so a stale or foreign one cannot be used.
    """
    key = (names, triple, data_layout)
    bitcode = _SUBSETS.get(key)
    if bitcode is not None:
        return llvm.parse_bitcode(bitcode)
    import hashlib

    from ..cachefiles import load_entry, store_entry

    full = _libdevice_bitcode()
    digest = hashlib.sha256(b"\0".join(
        [_libdevice_digest().encode(), llvm.llvm_version_info.__repr__().encode(),
         triple.encode(), data_layout.encode(), *(n.encode() for n in names)])).hexdigest()[:32]
    bitcode = load_entry(digest, ".bc", "libdevice")  # keyed, checked, trusted
    subset = None
    if bitcode is not None:
        try:
            subset = llvm.parse_bitcode(bitcode)
        except RuntimeError:  # unreadable: build it again
            subset = None
    if subset is None:
        lib = llvm.parse_bitcode(full)
        lib.triple = triple
        lib.data_layout = data_layout
        wanted = set(names)
        for fn in lib.functions:
            if not fn.is_declaration and fn.name not in wanted:
                fn.linkage = "internal"
        for gv in lib.global_variables:
            if not gv.is_declaration:
                gv.linkage = "internal"
        tm = target_machine("sm_90", 80, 0)
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        dce = llvm.create_new_module_pass_manager()
        dce.add_global_dead_code_eliminate_pass()
        dce.run(lib, pb)
        bitcode = lib.as_bitcode()
        store_entry(digest, ".bc", bitcode, "libdevice", what="libdevice subset",
                               name=",".join(names))
        subset = lib
    _SUBSETS[key] = bitcode
    return subset


@functools.lru_cache(maxsize=1)
def _libdevice_digest() -> str:
    import hashlib

    return hashlib.sha256(_libdevice_bitcode()).hexdigest()


def optimize(module: llvm.ModuleRef, tm, opt: int, kernel_names: set[str], libdevice: bool,
             ftz: bool) -> None:
    """Link libdevice if needed, internalize, and run the O-level pipeline, in place."""
    if libdevice:
        names = tuple(sorted(fn.name for fn in module.functions
                             if fn.is_declaration and fn.name.startswith("__nv_")))
        module.link_in(_libdevice_subset(names, module.triple, module.data_layout))
    for fn in module.functions:
        if fn.is_declaration:
            continue
        # loops must make progress (CUDA C++'s rule, which ptxas applies anyway), in libdevice's
        # functions too (inlining one without it takes it off its caller): LLVM then deletes a
        # loop that has no effect, as ptxas would. ptxas 13.0 deleting one itself inverted the
        # branch around it (fuzzer seed 37203005904)
        fn.add_function_attribute("mustprogress")
        if fn.name not in kernel_names:
            fn.linkage = "internal"
    for gv in module.global_variables:  # kept: ones the runtime reads (kaiojit_fault) or resets
        if (not gv.is_declaration and gv.linkage == llvm.Linkage.external
                and gv.name not in kernel_names
                and gv.name != "kaiojit_grid_barrier"):  # (grid sync)
            gv.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=opt)
    pb = llvm.create_pass_builder(tm, pto)
    if libdevice:
        # drop the unreferenced (now internal) libdevice functions before the O-level
        # pipeline, which would otherwise optimize all of them first (~100 ms)
        dce = llvm.create_new_module_pass_manager()
        dce.add_global_dead_code_eliminate_pass()
        dce.run(module, pb)
    mpm = pb.getModulePassManager()
    mpm.run(module, pb)


def prepare_module(module, ftz: bool) -> None:
    """Set the module flag libdevice's __nvvm_reflect reads and, under fastmath, make every
    function flush float32 denormals to zero (so NVPTX writes the .ftz variants).

    ``module`` is an ``llvmlite.ir.Module``; metadata goes through it, so it never collides
    with metadata the lowering added (branch weights of bounds checks, for one)."""
    from llvmlite import ir

    i32 = ir.IntType(32)
    module.add_named_metadata(
        "llvm.module.flags", [i32(4), "nvvm-reflect-ftz", i32(1 if ftz else 0)])
    if ftz:
        for fn in module.functions:
            if not fn.is_declaration:
                set.add(fn.attributes, '"denormal-fp-math-f32"="preserve-sign,preserve-sign"')


def emit(module: llvm.ModuleRef, tm) -> str:
    return respell(tm.emit_assembly(module))
