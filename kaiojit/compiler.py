"""The compile pipeline: per target kind, an ordered table of named stages.

    nvptx: python function -kir-> typed IR -llvm_unoptimized-> LLVM IR -llvm-> optimized -ptx-> PTX
    host:  python function -kir-> typed IR -llvm_unoptimized-> LLVM IR -llvm-> optimized
                                                                     -object-> native object code

A stage is ``(module, metadata) -> module`` and is named after what it produces. That one name
is what ``KAIOJIT_DUMP`` takes, the :class:`CompiledKernel` attribute holding the stage's text,
and where :func:`run_stages` can enter the pipeline. The last stage's module is the kernel's
image: PTX text for the driver, or a :class:`~kaiojit.target.HostImage` that the cpu backend
loads (``kaiojit/runtime/hostjit.py``). A compile is a pure function of (function, signature,
options, target): that is what the caches key on.

LLVM (llvmlite) is imported by the stages that use it, not by this module, so a program whose
kernels all come from the disk cache never loads it.
"""

from __future__ import annotations

import binascii
import dataclasses
import hashlib
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import kir
from . import types as T
from .errors import CompileError, UnsupportedError
from .frontend.source import function_source
from .frontend.typer import type_function
from .kir import coarsen
from .kir.analysis import (
    SWIZZLE_ALIGN, arch_specific, static_shared_bytes, uses_sync, written_params,
)
from .kir.intrinsics import lookup
from .logs import log
from .options import CONFIG, CompileOptions, Config, write_dump
from .target import FAULT_GLOBAL, HostImage, TargetSpec, coarse_entry, parse_arch


@dataclass(slots=True)
class CompiledKernel:
    """A kernel compiled for one signature and target: every stage's text, the image the
    runtime loads, and what a launch needs to know."""

    name: str  # the entry symbol (the Python name plus a signature hash; a device function's own name)
    py_name: str
    signature: T.Signature
    arg_names: tuple[str, ...]
    kir: str
    llvm_unoptimized: str
    llvm: str
    ptx: str  # "" for the host
    image: str | HostImage  # the last stage's module: PTX text, or the host's object code
    static_shared_bytes: int
    uses_sync: bool
    options: CompileOptions
    target: TargetSpec
    kfunc: kir.KFunction | None = None  # None when the kernel came from the disk cache
    timings: dict = field(default_factory=dict)
    fault_sites: tuple = ()  # nvptx, debug=True: where a recorded fault comes from
    resources: Any = None  # kaiojit.tools.resources.Resources, once kernel.resources() asked
    coarse: CoarseEntry | None = None  # nvptx: the coarse entry, compiled when first launched
    # the array parameters the kernel may write (a read-only NumPy array passed for one is an
    # error before the launch); None: not known (a disk-cache entry from before it was kept)
    written_arrays: frozenset | None = None

    @property
    def symbol(self) -> str:
        return self.name

    def stage(self, name: str) -> str | bytes:
        """The output of stage ``name`` of this kernel's pipeline (``object``: the bytes)."""
        if name not in stage_names(self.target.kind):
            raise ValueError(f"no stage {name!r} in the {self.target.kind} pipeline; its stages "
                             f"are {', '.join(stage_names(self.target.kind))}")
        if name == "object":
            return self.image.object_code
        return getattr(self, name)

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.py_name}{self.signature}>"

    def to_record(self) -> dict:
        """What a later process needs to launch and inspect this kernel without compiling it,
        as JSON values (the disk cache's entry): the image (the last stage's output) and the
        metadata. The typed IR and the unoptimized LLVM IR are not kept."""
        record = {"kind": self.target.kind, "name": self.name, "arg_names": list(self.arg_names),
                  "kir": self.kir, "llvm": self.llvm,
                  "static_shared_bytes": self.static_shared_bytes, "uses_sync": self.uses_sync,
                  "written_arrays": sorted(self.written_arrays or ())}
        if isinstance(self.image, HostImage):
            record.update(
                image=binascii.b2a_base64(self.image.object_code, newline=False).decode(),
                entry=self.image.entry, uses_block_mode=self.image.uses_block_mode,
                host_shared_bytes=self.image.static_shared_bytes, sites=self.image.sites,
                symbols=list(self.image.symbols))
        else:
            record.update(image=self.image, fault_sites=list(self.fault_sites),
                          coarse=self.coarse is not None,
                          arch=self.target.arch)  # sm_90a for arch-specific features
        return record

    @staticmethod
    def from_record(record: dict, pyfunc, signature: T.Signature, options: CompileOptions,
                    target: TargetSpec) -> CompiledKernel:
        """The kernel :meth:`to_record` described, for ``pyfunc`` compiled for ``signature``,
        ``options`` and ``target`` (no stage runs). ValueError if the record is not one: a
        field missing or of the wrong kind, another target's, or a host image calling a C
        function outside :func:`kaiojit.hostsyms.host_symbol_allowed`."""
        try:
            return _kernel_from_record(record, pyfunc, signature, options, target)
        except (KeyError, TypeError, AttributeError, binascii.Error) as e:
            raise ValueError(f"not a compiled kernel's record ({type(e).__name__}: {e})") from None


def _kernel_from_record(record: dict, pyfunc, signature: T.Signature, options: CompileOptions,
                        target: TargetSpec) -> CompiledKernel:
    if record["kind"] != target.kind:
        raise ValueError(f"a {record['kind']} kernel's record, not a {target.kind} one")
    name = _text(record["name"])
    if target.kind == "host":
        from .hostsyms import host_symbol_allowed

        symbols = tuple(_text(n) for n in record["symbols"])
        refused = [n for n in symbols if not host_symbol_allowed(n)]
        if refused:
            raise ValueError(f"the host code would call {', '.join(refused)}, which kaiojit's "
                             "code never calls")
        image = HostImage(
            object_code=binascii.a2b_base64(_text(record["image"]), strict_mode=True),
            entry=_text(record["entry"]), uses_block_mode=bool(record["uses_block_mode"]),
            static_shared_bytes=int(record["host_shared_bytes"]),
            sites=[dict(site) for site in record["sites"]], symbols=symbols)
        ptx, fault_sites, coarse = "", (), None
    else:
        image = ptx = _text(record["image"])
        fault_sites = tuple(dict(site) for site in record["fault_sites"])
        target = dataclasses.replace(target, arch=_text(record["arch"]))
        coarse = None
        if record["coarse"]:  # compiled when a launch first takes it, not kept
            coarse = CoarseEntry(pyfunc, signature, options, target, name)
    return CompiledKernel(
        name=name, py_name=pyfunc.__name__, signature=T.runtime_signature(signature),
        arg_names=tuple(_text(n) for n in record["arg_names"]), kir=_text(record["kir"]),
        llvm_unoptimized="", llvm=_text(record["llvm"]), ptx=ptx, image=image,
        static_shared_bytes=int(record["static_shared_bytes"]),
        uses_sync=bool(record["uses_sync"]), options=options, target=target,
        timings={"cache": True}, fault_sites=fault_sites, coarse=coarse,
        written_arrays=(frozenset(_text(n) for n in record["written_arrays"])
                        if "written_arrays" in record else None))


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


# --- what the stages know besides their module ----------------------------------------------------

@dataclass(slots=True)
class Metadata:
    """One compile's facts besides the module the stages hand on: what was asked (set before
    the first stage), what stages found that later ones need, and every stage's text and time.

    Entering the pipeline after ``kir`` needs only ``symbol``, ``options`` and ``target`` (and,
    at the host's ``object`` stage, the host facts a lowering would have recorded)."""

    symbol: str
    options: CompileOptions
    target: TargetSpec
    signature: T.Signature | None = None
    specialize_device: Callable | None = None  # types a device function a kernel calls
    device: bool = False  # a device function on its own (``.visible .func``), not a kernel
    kfunc: kir.KFunction | None = None
    uses_block_mode: bool = False  # host: blocks run block-synchronously (barriers, warps)
    host_shared_bytes: int = 0  # host: the static shared arrays, laid out 16-byte aligned
    sites: list[dict] = field(default_factory=list)  # host: where a reported fault comes from
    host_symbols: tuple[str, ...] = ()  # host: C functions the code calls (see HostImage)
    coarsenable: bool = False  # nvptx: the kernel can have a coarse entry (kir/coarsen.py)
    texts: dict[str, str | bytes] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Stage:
    """A named step of a pipeline, ``run(module, metadata) -> module``; ``suffix`` is the file
    extension of its dump."""

    name: str
    run: Callable[[Any, Metadata], Any]
    suffix: str


# --- typing ---------------------------------------------------------------------------------------

def mangle(pyfunc, signature: T.Signature) -> str:
    digest = hashlib.blake2s(
        f"{pyfunc.__module__}.{pyfunc.__qualname__}{signature}".encode(), digest_size=6
    ).hexdigest()
    return f"{_identifier(pyfunc.__name__)}_{digest}"


def _identifier(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


def type_kernel(pyfunc, arg_types: tuple[T.Type, ...], specialize_device, is_kernel=True,
                options: CompileOptions | None = None) -> kir.KFunction:
    src = function_source(pyfunc)
    return type_function(pyfunc, src, arg_types, is_kernel, specialize_device, options)


def type_stage(pyfunc, meta: Metadata) -> kir.KFunction:
    """kir: the Python function typed for the signature's argument types."""
    sig = meta.signature
    if not meta.device and sig.return_type != T.void:
        raise TypeError(f"{pyfunc.__qualname__}: a kernel returns void, the signature says "
                        f"{sig.return_type} (compile a device function with device=True)")
    if meta.device:
        names = pyfunc.__code__.co_varnames[:pyfunc.__code__.co_argcount]
        for name, t in zip(names, sig.args):
            if isinstance(t, T.TensorMapType):
                raise TypeError(f"{pyfunc.__qualname__}(): parameter {name!r} is a tensormap, "
                                "which only a kernel takes (a __grid_constant__ parameter), "
                                "not a device function")
    kfunc = type_kernel(pyfunc, sig.args, meta.specialize_device, not meta.device, meta.options)
    if meta.device:
        if sig.return_type not in (T.void, kfunc.return_type):
            raise TypeError(f"the signature says {pyfunc.__qualname__} returns "
                            f"{sig.return_type}; it returns {kfunc.return_type}")
        kfunc.mangled = meta.symbol
        kfunc.inline = meta.options.inline
    meta.kfunc = kfunc
    return kfunc


# --- the nvptx stages -----------------------------------------------------------------------------

def lower_nvptx(kfunc: kir.KFunction, meta: Metadata) -> str:
    """llvm_unoptimized: the kernel (or device function) and its callees as NVPTX LLVM IR."""
    from .lower import ptx as ptx_stage
    from .lower.codegen import ModuleLowering
    from .lower.nvptx import NVPTXTarget

    meta.target = arch_specific_target(kfunc, meta.target)
    target = NVPTXTarget(meta.target.arch)
    mod = ModuleLowering(target, meta.options, name=meta.symbol)
    if meta.device:
        mod.lower_device_function(kfunc, meta.symbol)
    else:
        mod.lower_kernel(kfunc, meta.symbol)
        meta.coarsenable = _coarsens(kfunc, meta)
    meta.sites = target.sites
    if meta.target.arch.endswith("a"):
        _align_shared(mod.module, SWIZZLE_ALIGN)
    ptx_stage.prepare_module(mod.module, meta.options.fastmath)
    return str(mod.module)


def _coarsens(kfunc: kir.KFunction, meta: Metadata) -> bool:
    """Whether the kernel gets a coarse entry: asked for, no debug fault records (whose
    sites name the kernel's own blocks), and of the form kir/coarsen.py takes."""
    options = meta.options
    return options.coarsen and not options.debug and coarsen.coarsenable(kfunc)


def arch_specific_target(kfunc: kir.KFunction, spec: TargetSpec) -> TargetSpec:
    """The target a kernel compiles for: an arch-specific feature it uses (wgmma: 'sm_90a')
    turns its own arch (sm_90) into the arch-specific one; on any other arch the first use
    of one is a located error."""
    use = arch_specific(kfunc)
    if use is None:
        return spec
    need = lookup(use.attr).min_arch
    if parse_arch(spec.arch) != parse_arch(need):
        raise UnsupportedError(f"{lookup(use.attr).user_name}() needs exactly {need}; this "
                               f"kernel is compiled for {spec.arch}", use.loc)
    return dataclasses.replace(spec, arch=need)


def _align_shared(module, align: int) -> None:
    """Align every shared array to ``align`` bytes (the 128B swizzle's atom), as the host's
    layout does for the same kernel (``kir.analysis.shared_layout``)."""
    for gv in module.global_values:
        if getattr(gv, "addrspace", 0) == 3:
            gv.align = max(gv.align or 1, align)


def optimize_nvptx(module: str, meta: Metadata):
    """llvm: verified, libdevice linked where called, everything but the entry internal, and
    the O-level pipeline run for the arch."""
    from .lower import ptx as ptx_stage

    ref = parse_llvm(module, meta)
    libdevice = any(fn.is_declaration and fn.name.startswith("__nv_") for fn in ref.functions)
    keep = {meta.symbol, FAULT_GLOBAL}  # the entry, and the debug fault record if any
    ptx_stage.optimize(ref, _nvptx_machine(meta), meta.options.opt, keep, libdevice,
                       meta.options.fastmath)
    return ref


def emit_ptx(module, meta: Metadata) -> str:
    """ptx: LLVM's NVPTX backend, plus ``.maxnreg`` for ``max_registers``."""
    from .lower import ptx as ptx_stage

    text = ptx_stage.emit(parse_llvm(module, meta), _nvptx_machine(meta))
    if meta.options.max_registers:
        text = _with_maxnreg(text, meta.symbol, meta.options.max_registers)
    elif "setmaxnreg." in text:
        from .errors import PerformanceWarning, warn_user

        warn_user(f"kaiojit: kernel {meta.symbol!r} reallocates registers "
                  "(kj.warpgroup.reg_alloc / reg_dealloc), which ptxas ignores unless it knows "
                  "the kernel's register count at entry: pass @kj.jit(max_registers=...) (65536 "
                  "/ the block's threads, rounded down to a multiple of 8)", PerformanceWarning)
    bounds = meta.options.launch_bounds
    if bounds and not meta.device:
        directives = [f".maxntid {bounds[0]}, 1, 1"]
        if len(bounds) > 1:
            directives.append(f".minnctapersm {bounds[1]}")
        if len(bounds) > 2:
            directives.append(f".maxclusterrank {bounds[2]}")
        text = _with_directives(text, meta.symbol, directives)
    return text


def _nvptx_machine(meta: Metadata):
    from .lower import ptx as ptx_stage

    spec = meta.target
    return ptx_stage.target_machine(spec.arch, spec.ptx_version, min(meta.options.opt, 3))


def _with_maxnreg(ptx_text: str, symbol: str, n: int) -> str:
    """Put ``.maxnreg n`` after the kernel's parameter list (before its body)."""
    return _with_directives(ptx_text, symbol, [f".maxnreg {int(n)}"])


def _with_directives(ptx_text: str, symbol: str, directives: list[str]) -> str:
    """Put performance-tuning directives after the kernel's parameter list, each on a line."""
    start = ptx_text.find(f".entry {symbol}(")
    if start < 0:
        return ptx_text
    close = ptx_text.find(")", start)
    lines = "".join(f"\n{d}" for d in directives)
    return ptx_text[: close + 1] + lines + ptx_text[close + 1:]


# --- the host stages ------------------------------------------------------------------------------

def lower_host(kfunc: kir.KFunction, meta: Metadata) -> str:
    """llvm_unoptimized: the kernel, its device functions and its driver ``<symbol>_run``,
    lowered for this CPU (``kaiojit/lower/host.py``)."""
    from .lower.host import HostTarget
    from .lower.host_module import HostModule

    if meta.device:
        raise ValueError("a device function on its own compiles for nvptx only")
    sanitize = meta.target.sanitize and _checkable(kfunc, meta)
    target = HostTarget(sanitize=sanitize)
    mod = HostModule(target, meta.options, meta.symbol, kfunc)
    mod.lower_kernel(kfunc, meta.symbol)
    meta.uses_block_mode = mod.needs_block(kfunc)
    meta.host_shared_bytes = mod.static_shared_bytes
    meta.sites = mod.sites
    meta.host_symbols = tuple(sorted(target.symbols))
    return str(mod.module)


def _checkable(kfunc: kir.KFunction, meta: Metadata) -> bool:
    """Whether the checked variant instruments this kernel: one with more array accesses
    (after unrolling) than ``MAX_CHECKED_ACCESSES`` would take minutes to compile checked; it
    runs unchecked, with a warning that says so (docs/sanitizer.md)."""
    import warnings

    from .errors import PerformanceWarning
    from .lower.host_sanitize import MAX_CHECKED_ACCESSES, access_count

    n = access_count(kfunc)
    if n <= MAX_CHECKED_ACCESSES:
        return True
    warnings.warn(f"kaiojit: kernel {kfunc.name!r} has {n} array accesses after unrolling "
                  f"(more than {MAX_CHECKED_ACCESSES}): the cpu backend's checked mode runs it "
                  "unchecked", PerformanceWarning, stacklevel=2)
    return False


def optimize_host(module: str, meta: Metadata):
    """llvm: everything but the driver internal, then the O-level pipeline for this CPU."""
    from llvmlite import binding as llvm

    from .target import host_target_machine

    ref = parse_llvm(module, meta)
    entry = host_entry(meta.symbol)
    for fn in ref.functions:
        if not fn.is_declaration and fn.name != entry:
            fn.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=min(meta.options.opt, 3))
    if meta.uses_block_mode:
        # LLVM 22's loop vectorizer miscompiles the block's per-thread loops: a trapping
        # instruction of loop-invariant operands (a division by a kernel argument) under a
        # thread's "active" test is computed only when the vector's first lane is active,
        # and the other lanes then load through a poison address (fuzzer seed 41200000695:
        # a segfault where lane 0 of each warp skipped an `any_sync`)
        pto.loop_vectorization = False
    if meta.target.sanitize:
        # the checked variant is a debugging run, whose time goes to its checks: LLVM's loop
        # unrolling gains it nothing measurable, and copies whole segments of a block-mode
        # kernel (the attention forward's block function doubled, and LLVM's register
        # coalescer then took 3x as long on it: 53 s to compile, 17 s without)
        pto.loop_unrolling = False
    pb = llvm.create_pass_builder(host_target_machine(), pto)
    pb.getModulePassManager().run(ref, pb)
    return ref


def emit_host_object(module, meta: Metadata) -> HostImage:
    """object: native object code for this CPU, with what the cpu backend needs to run it."""
    from .target import host_target_machine

    code = host_target_machine().emit_object(parse_llvm(module, meta))
    return HostImage(object_code=code, entry=host_entry(meta.symbol),
                     uses_block_mode=meta.uses_block_mode,
                     static_shared_bytes=meta.host_shared_bytes, sites=meta.sites,
                     symbols=meta.host_symbols)


def host_entry(symbol: str) -> str:
    """The host driver's symbol: ``void <symbol>_run(slots, ctx, first_block, end_block)``."""
    return f"{symbol}_run"


# --- the table --------------------------------------------------------------------------------------

def parse_llvm(module, meta: Metadata):
    """``module`` as an llvmlite ModuleRef: text is parsed and verified (the optimizing
    stages take text; later ones take the ModuleRef, or text when a caller enters there)."""
    from llvmlite import binding as llvm

    if not isinstance(module, str):
        return module
    if meta.target.kind == "nvptx":
        from .lower.ptx import initialize
        initialize()
    try:
        ref = llvm.parse_assembly(module)
        ref.verify()
    except RuntimeError as e:  # an internal bug: say so plainly, with the IR's complaint
        raise CompileError(f"internal error: kaiojit produced invalid LLVM IR for "
                           f"{meta.symbol} ({meta.target.kind}): {e}") from None
    return ref


PIPELINES: dict[str, tuple[Stage, ...]] = {
    "nvptx": (
        Stage("kir", type_stage, "kir"),
        Stage("llvm_unoptimized", lower_nvptx, "ll"),
        Stage("llvm", optimize_nvptx, "ll"),
        Stage("ptx", emit_ptx, "ptx"),
    ),
    "host": (
        Stage("kir", type_stage, "kir"),
        Stage("llvm_unoptimized", lower_host, "ll"),
        Stage("llvm", optimize_host, "ll"),
        Stage("object", emit_host_object, "o"),
    ),
}


def stages_of(kind: str) -> tuple[Stage, ...]:
    try:
        return PIPELINES[kind]
    except KeyError:
        raise ValueError(f"no pipeline for target kind {kind!r}; the kinds are "
                         f"{', '.join(PIPELINES)}") from None


def stage_names(kind: str) -> tuple[str, ...]:
    return tuple(s.name for s in stages_of(kind))


def run_stages(module: Any, meta: Metadata, start: str = "kir", stop: str | None = None,
               config: Config = CONFIG) -> Any:
    """Run the stages of ``meta.target.kind``'s pipeline from ``start`` through ``stop`` (the
    last stage by default) and return the last module. ``module`` is what the stage before
    ``start`` produces: the Python function for ``kir``, LLVM IR text for ``llvm``, and so on.
    Each stage's text goes into ``meta.texts``, its time into ``meta.timings``, and its dump
    into ``config.dump_dir`` when ``config.dump`` names it."""
    stages = stages_of(meta.target.kind)
    names = [s.name for s in stages]
    for name in (start, stop):
        if name is not None and name not in names:
            raise ValueError(f"no stage {name!r} in the {meta.target.kind} pipeline; its "
                             f"stages are {', '.join(names)}")
    first = names.index(start)
    last = names.index(stop) if stop is not None else len(stages) - 1
    for stage in stages[first:last + 1]:
        t0 = time.perf_counter()
        module = stage.run(module, meta)
        text = module.object_code if isinstance(module, HostImage) else module
        meta.texts[stage.name] = text if isinstance(text, (str, bytes)) else str(text)
        meta.timings[stage.name] = time.perf_counter() - t0
        if stage.name in config.dump:
            _dump(stage, meta, config.dump_dir)
    return module


_ANNOUNCED: set[str] = set()  # the dump directories this process has announced


def dump_name(meta: Metadata, stage: str) -> str:
    """A dump's file name, ``kernel.signature.stage`` (``kernel.signature.host.stage`` for the
    cpu backend's pipeline): the signature's argument types with every run of other characters
    than letters and digits as one ``_`` (``scale(float32[::1], float32)`` -> ``scale.float32_1_
    float32``), shortened with a hash past 80 characters."""
    kernel = getattr(meta.kfunc, "name", None) or meta.symbol
    args = ",".join(str(a) for a in meta.signature.args)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", args).strip("_") or "noargs"
    if len(slug) > 80:
        slug = slug[:64] + "_" + hashlib.blake2s(args.encode(), digest_size=6).hexdigest()
    target = ".host" if meta.target.kind == "host" else ""
    return f"{kernel}.{slug}{target}.{stage}"


def _dump(stage: Stage, meta: Metadata, directory: str) -> None:
    write_dump(directory, dump_name(meta, stage.name), meta.texts[stage.name])
    where = os.path.abspath(directory)
    if where not in _ANNOUNCED:  # the first dump says where they go
        _ANNOUNCED.add(where)
        sys.stderr.write(f"kaiojit: KAIOJIT_DUMP writes kernel.signature.stage files to "
                         f"{where}\n")


def _log_compile(name: str, signature: T.Signature, spec: TargetSpec,
                 timings: dict[str, float]) -> None:
    """The ``kaiojit`` logger's line for a compile: what, for which target, how long."""
    target = spec.arch if spec.kind == "nvptx" else "the host"
    stages = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in timings.items())
    args = ", ".join(str(a) for a in signature.args)
    log.info("compiled %s(%s) for %s in %.1f ms (%s ms)", name, args, target,
             sum(timings.values()) * 1e3, stages)


# --- compiling ----------------------------------------------------------------------------------------

def compile_kernel(pyfunc, signature: T.Signature, options: CompileOptions, spec: TargetSpec,
                   specialize_device, *, device: bool = False) -> CompiledKernel:
    """Run ``spec.kind``'s whole pipeline for one signature. With ``device=True`` the function
    is compiled on its own as a device function, visible under its Python name."""
    symbol = _identifier(pyfunc.__name__) if device else mangle(pyfunc, signature)
    meta = Metadata(symbol=symbol, options=options, target=spec, signature=signature,
                    specialize_device=specialize_device, device=device)
    image = run_stages(pyfunc, meta)
    kfunc = meta.kfunc
    texts = meta.texts
    if log.isEnabledFor(logging.INFO):
        _log_compile(pyfunc.__name__, signature, spec, meta.timings)
    return CompiledKernel(
        name=symbol, py_name=pyfunc.__name__,
        signature=kfunc.signature if device else T.runtime_signature(signature),
        arg_names=tuple(n for n, _ in kfunc.params), kir=texts["kir"],
        llvm_unoptimized=texts["llvm_unoptimized"], llvm=texts["llvm"],
        ptx=image if spec.kind == "nvptx" else "", image=image,
        static_shared_bytes=static_shared_bytes(kfunc), uses_sync=uses_sync(kfunc),
        options=options, target=meta.target, kfunc=kfunc, timings=meta.timings,
        fault_sites=tuple(meta.sites) if spec.kind == "nvptx" else (),
        coarse=(CoarseEntry(pyfunc, signature, options, meta.target, symbol, specialize_device,
                            kfunc) if meta.coarsenable else None),
        written_arrays=frozenset(written_params(kfunc)),
    )


class CoarseEntry:
    """A kernel's coarse entry (kir/coarsen.py): one block does ``COARSE_FACTOR`` of the
    user's blocks. It is compiled, into a PTX module of its own, the first time a launch large
    enough to take it asks for ``ptx`` (most kernels never run such a launch, and it costs
    about twice the kernel's own compile); its last parameter is the user's grid extent."""

    def __init__(self, pyfunc, signature: T.Signature, options: CompileOptions,
                 spec: TargetSpec, symbol: str, specialize_device=None,
                 kfunc: kir.KFunction | None = None):
        self.name = coarse_entry(symbol)
        self._args = (pyfunc, signature, options, spec, specialize_device)
        self._kfunc = kfunc  # the kernel's KIR; None for a disk-cache hit (typed again)
        self._ptx: str | None = None
        self._lock = threading.Lock()
        # cache=True: where the PTX is kept on disk, ``(load() -> str | None, store(ptx))``
        self._disk: tuple[Callable[[], str | None], Callable[[str], None]] | None = None

    def keep_on_disk(self, load: Callable[[], str | None], store: Callable[[str], None]) -> None:
        """Read the PTX with ``load()`` before compiling it, and ``store`` what is compiled
        (at once, if it is compiled already)."""
        with self._lock:
            self._disk = (load, store)
            if self._ptx is not None:
                store(self._ptx)

    @property
    def ptx(self) -> str:
        if self._ptx is None:
            with self._lock:
                if self._ptx is None:
                    self._ptx = self._load_or_compile()
        return self._ptx

    def _load_or_compile(self) -> str:
        if self._disk is None:
            return self._compile()
        load, store = self._disk
        ptx = load()
        if ptx is None:
            ptx = self._compile()
            store(ptx)
        return ptx

    def _compile(self) -> str:
        pyfunc, signature, options, spec, specialize_device = self._args
        meta = Metadata(symbol=self.name, options=options, target=spec, signature=signature,
                        specialize_device=specialize_device)
        kfunc = self._kfunc or run_stages(pyfunc, meta, stop="kir")
        return run_stages(coarsen.coarsen(kfunc), meta, start="llvm_unoptimized")

    def __repr__(self) -> str:
        state = "compiled" if self._ptx is not None else "not compiled yet"
        return f"<CoarseEntry {self.name}, {state}>"


__all__ = [
    "PIPELINES",
    "CompileOptions",
    "CoarseEntry",
    "CompiledKernel",
    "Metadata",
    "Stage",
    "TargetSpec",
    "compile_kernel",
    "run_stages",
    "stage_names",
]
