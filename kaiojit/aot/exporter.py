"""Export compiled kernels: images, a manifest and a C launcher, for use without the JIT.

``export(out_dir, {kernel: [signature, ...]}, archs=[...])`` compiles each kernel for each
signature. For the GPU (``target="nvptx"``) every arch gets its PTX and a cubin made by ptxas;
for the host (``target="host"``) the kernels' host code is compiled position-independent and
linked into one shared library. Either way ``manifest.json`` says what is there, and
``kaiojit_kernels.h`` / ``kaiojit_kernels.c`` give C one typed launch function per signature
(:mod:`kaiojit.aot.cheader`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping

from kaiojit import types as kt
from kaiojit.aot.autotuned import call_signature, config_signature, is_autotuned, tuning_record
from kaiojit.aot.cheader import record_tag, write_c_launcher
from kaiojit.aot.cubin import DriverLinker, Ptxas, cubin_compiler
from kaiojit.aot.manifest import ArtifactError, Entry, ExportError, Manifest
from kaiojit.options import VERSION
from kaiojit.runtime.slots import SlotLayout
from kaiojit.target import TargetSpec, host_cpu_features, parse_arch, ptx_version_for

LIBRARY = "libkaiojit_kernels.so"


def export(out_dir: str, kernels: Mapping, archs: Iterable[str] = ("sm_90",),
           target: str = "nvptx", compiler: str = "auto") -> Manifest:
    """Export ``kernels`` (``{dispatcher: [signature, ...]}``) into ``out_dir``.

    ``target`` is ``"nvptx"`` (a cubin and the PTX per arch in ``archs``) or ``"host"`` (one
    shared library of host code, for the cpu backend and the C launcher without a GPU). An
    autotuned kernel's signatures are those it is called with; each is exported once per
    config, with the tuner's choices so far (:mod:`kaiojit.aot.autotuned`). ``compiler``
    makes the cubins: ``"ptxas"``, ``"driver"`` (the CUDA driver's linker) or ``"auto"``
    (ptxas where found, else the driver; :mod:`kaiojit.aot.cubin`).
    """
    if target not in ("nvptx", "host"):
        raise ValueError(f"target must be 'nvptx' or 'host', got {target!r}")
    archs = [a.strip() for a in archs if a.strip()] if target == "nvptx" else []
    for arch in archs:
        try:
            parse_arch(arch)
        except ValueError as e:
            raise ExportError(str(e)) from None
    if target == "nvptx" and not archs:
        raise ExportError("no arch to export for: give at least one, e.g. sm_90")
    maker = cubin_compiler(compiler) if target == "nvptx" else None
    os.makedirs(out_dir, exist_ok=True)
    entries: list[Entry] = []
    objects: list[bytes] = []
    tuned: dict[str, dict] = {}

    def one(dispatcher, sig) -> Entry:
        if target == "nvptx":
            entries.append(_export_nvptx(out_dir, dispatcher, sig, archs, maker))
        else:
            entry, obj = _export_host(dispatcher, sig)
            entries.append(entry)
            objects.append(obj)
        return entries[-1]

    for dispatcher, signatures in kernels.items():
        if isinstance(signatures, (str, kt.Signature)):
            signatures = [signatures]
        if not signatures:
            raise ExportError(f"kernel {dispatcher.__name__!r}: no signature to export; give "
                              'one, e.g. "void(float32[::1], int32)"')
        if not is_autotuned(dispatcher):
            for sig in signatures:
                one(dispatcher, sig)
            continue
        calls = [call_signature(dispatcher, sig) for sig in signatures]
        for call in calls:
            for index, config in enumerate(dispatcher.configs):
                entry = one(dispatcher.kernel, config_signature(dispatcher, call, config))
                entry.c_name += f"__config{index}"
                entry.autotune = {"index": index, "call_signature": str(call)}
        tuned[dispatcher.__name__] = tuning_record(dispatcher, calls)
    _check_unique(entries)
    manifest = Manifest(target=target, kaiojit_version=VERSION, entries=entries, archs=archs,
                        autotuned=tuned)
    if maker is not None:
        manifest.compiler, manifest.compiler_version = maker.name, maker.version
    if target == "host":
        manifest.library = LIBRARY
        manifest.host_triple = _host_triple()
        _link_library(os.path.join(out_dir, LIBRARY), objects)
    manifest.write(out_dir)
    write_c_launcher(out_dir, manifest)
    return manifest


def _compile(dispatcher, sig, spec: TargetSpec):
    ck = dispatcher.compile(sig, spec)
    if ck.options.link or (spec.kind == "nvptx" and ".extern .func" in ck.ptx):
        raise ExportError(f"kernel {dispatcher.__name__!r}: {ck.signature}: it links foreign "
                          "device code (link= or kj.declare_device), which export does not "
                          "carry yet")
    return ck


def _entry(ck, c_name: str, cooperative: bool) -> Entry:
    kinds: list[str] = []
    for t in ck.signature.args:
        kinds.extend(kt.param_parts(t))
    layout = SlotLayout.for_kinds(kinds)
    options = {k: v for k, v in dataclasses.asdict(ck.options).items()
               if isinstance(v, (bool, int, float, str, type(None)))}
    return Entry(kernel=ck.py_name, symbol=ck.name, c_name=c_name, signature=str(ck.signature),
                 arg_names=list(ck.arg_names), param_kinds=list(layout.kinds),
                 first_slot=list(layout.first_slot), slot_count=layout.slot_count,
                 static_shared_bytes=ck.static_shared_bytes, cooperative=cooperative,
                 options=options,
                 written_arrays=(None if ck.written_arrays is None
                                 else sorted(ck.written_arrays)))


def _export_nvptx(out_dir: str, dispatcher, sig, archs: list[str],
                  maker: Ptxas | DriverLinker) -> Entry:
    """Per arch: the PTX and its cubin, and the same of the kernel's coarse entry where it has
    one (the JIT launches it for large grids; so does the loader)."""
    from kaiojit.runtime.cooperative import GRID_BARRIER_SYMBOL

    entry = None
    for arch in archs:
        ck = _compile(dispatcher, sig, TargetSpec("nvptx", arch,
                                                  ptx_version_for(arch, maker.ptx_limit)))
        if entry is None:
            entry = _entry(ck, c_function_name(ck.py_name, ck.signature),
                           GRID_BARRIER_SYMBOL in ck.ptx)
        what = f"{ck.py_name}: {ck.signature}"
        entry.ptx[arch], entry.cubins[arch] = _write_image(out_dir, ck.name, ck.ptx, arch,
                                                           maker, what)
        if ck.coarse is not None:
            entry.coarse_symbol = ck.coarse.name
            entry.coarse_ptx[arch], entry.coarse_cubins[arch] = _write_image(
                out_dir, ck.coarse.name, ck.coarse.ptx, arch, maker, f"{what} (coarse entry)")
    return entry


def _write_image(out_dir: str, symbol: str, ptx: str, arch: str, maker: Ptxas | DriverLinker,
                 what: str) -> tuple[str, str]:
    """``SYMBOL.ARCH.ptx`` and the cubin ``maker`` makes of it; their file names."""
    stem = f"{symbol}.{arch}"
    ptx_file, cubin_file = stem + ".ptx", stem + ".cubin"
    ptx_path = os.path.join(out_dir, ptx_file)
    with open(ptx_path, "w") as f:
        f.write(ptx)
    maker.make(ptx, ptx_path, os.path.join(out_dir, cubin_file), arch, what)
    return ptx_file, cubin_file


def _export_host(dispatcher, sig) -> tuple[Entry, bytes]:
    from kaiojit.runtime.hostjit import OWN_SYMBOL_PREFIX

    ck = _compile(dispatcher, sig, TargetSpec("host"))
    image = ck.image
    own = [s for s in image.symbols if s.startswith(OWN_SYMBOL_PREFIX)]
    if own:
        raise ExportError(f"kernel {ck.py_name}: {ck.signature}: its host code calls kaiojit's "
                          f"own native functions ({', '.join(own)}: tensor copies), which a "
                          "shared library cannot carry; export it for nvptx")
    from kaiojit.runtime.cooperative import GRID_SYNC_SITE

    cooperative = any(site.get("kind") == GRID_SYNC_SITE for site in image.sites)
    entry = _entry(ck, c_function_name(ck.py_name, ck.signature), cooperative)
    entry.symbol = image.entry
    entry.uses_block_mode = image.uses_block_mode
    entry.static_shared_bytes = image.static_shared_bytes
    entry.sites = [dict(site) for site in image.sites]
    return entry, _pic_object(ck.llvm)


def _pic_object(llvm_ir: str) -> bytes:
    """The kernel's optimized LLVM IR compiled again as position-independent code (the JIT's
    object code is for one process's address space, not a shared library)."""
    from llvmlite import binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                           features=host_cpu_features(),
                                           opt=3, reloc="pic", codemodel="default")
    module = llvm.parse_assembly(llvm_ir)
    module.verify()
    return machine.emit_object(module)


def _host_triple() -> str:
    from llvmlite import binding as llvm

    return llvm.get_process_triple()


def _link_library(path: str, objects: list[bytes]) -> None:
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory(prefix="kaiojit-aot-") as tmp:
        files = []
        for i, obj in enumerate(objects):
            name = os.path.join(tmp, f"k{i}.o")
            with open(name, "wb") as f:
                f.write(obj)
            files.append(name)
        try:
            done = subprocess.run([cc, "-shared", "-o", path, *files, "-lm"],
                                  capture_output=True, text=True)
        except FileNotFoundError:
            raise ExportError(f"export for the host links a shared library with a C compiler; "
                              f"{cc!r} was not found (set CC)") from None
        if done.returncode != 0:
            raise ExportError(f"linking {path} failed:\n{done.stderr.strip()}")


def _check_unique(entries: list[Entry]) -> None:
    seen: dict[str, str] = {}
    for e in entries:
        if e.c_name in seen:
            raise ExportError(f"{e.kernel}: {e.signature} is exported twice (C name {e.c_name})")
        seen[e.c_name] = e.signature


def _short(t: kt.ScalarType) -> str:
    """``f32``, ``i64``, ``u8``, ``c64``, ``b1``; a format kaiojit encodes itself by its name
    (``bf16``, ``f8e4m3fn``)."""
    if t.is_bool:
        return "b1"
    if t.facts.encode is not None:
        return t.name.replace("bfloat", "bf").replace("float", "f").replace("_", "")
    return f"{t.kind}{t.bits}"


def c_function_name(py_name: str, signature: kt.Signature) -> str:
    """``kaiojit_<kernel>__<param>__...``: one C identifier per kernel and signature, readable
    (``f32_1dC`` is a C-contiguous 1-D float32 array, ``f32_1dCa16`` one of 16-byte aligned
    data, ``align=16``)."""
    parts = []
    for t in signature.args:
        if isinstance(t, kt.ArrayType):
            dtype = _short(t.dtype) if isinstance(t.dtype, kt.ScalarType) else \
                record_tag(t.dtype) if isinstance(t.dtype, kt.RecordType) else \
                re.sub(r"\W", "", str(t.dtype))
            parts.append(f"{dtype}_{t.ndim}d{t.layout}{'a16' if t.align else ''}")
        elif isinstance(t, kt.TensorMapType):
            parts.append("tmap")
        else:
            parts.append(_short(t) if isinstance(t, kt.ScalarType) else re.sub(r"\W", "", str(t)))
    return "__".join([f"kaiojit_{py_name}", *parts]) if parts else f"kaiojit_{py_name}"


__all__ = ["ArtifactError", "ExportError", "c_function_name", "export"]
