"""The compile pipeline: an ordered table of named stages, each dumpable under its name.

    python function --kir--> typed IR --llvm--> LLVM IR --opt--> optimized LLVM IR --ptx--> PTX

A compile is a pure function of (function, signature, options, target): that is what the
caches key on.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

from llvmlite import binding as llvm

from . import kir
from . import types as T
from .errors import CompileError
from .frontend.source import function_source
from .frontend.typer import type_function
from .kir.analysis import static_shared_bytes, uses_sync
from .lower import ptx as ptx_stage
from .lower.codegen import ModuleLowering
from .options import CONFIG, CompileOptions
from .target import TargetSpec


@dataclass(slots=True)
class CompiledKernel:
    """A kernel compiled for one signature and target: every stage's text, and what the
    runtime needs to load and launch it."""

    name: str  # the kernel's entry symbol in PTX (the Python name plus a signature hash)
    py_name: str
    signature: T.Signature
    arg_names: tuple[str, ...]
    kir: str
    llvm: str
    llvm_unoptimized: str
    ptx: str
    static_shared_bytes: int
    uses_sync: bool
    options: CompileOptions
    target: TargetSpec
    kfunc: kir.KFunction | None = None
    host: object = None  # the cpu backend's compiled function
    timings: dict = field(default_factory=dict)
    resources: dict | None = None

    @property
    def symbol(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.py_name}{self.signature}>"


def mangle(pyfunc, signature: T.Signature) -> str:
    digest = hashlib.blake2s(
        f"{pyfunc.__module__}.{pyfunc.__qualname__}{signature}".encode(), digest_size=6
    ).hexdigest()
    base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in pyfunc.__name__)
    return f"{base}_{digest}"


def type_kernel(pyfunc, arg_types: tuple[T.Type, ...], specialize_device, is_kernel=True,
                options: CompileOptions | None = None) -> kir.KFunction:
    src = function_source(pyfunc)
    return type_function(pyfunc, src, arg_types, is_kernel, specialize_device, options)


def lower_to_llvm(kfunc: kir.KFunction, symbol: str, options: CompileOptions, target) -> tuple:
    mod = ModuleLowering(target, options, name=symbol)
    mod.lower_kernel(kfunc, symbol)
    return mod


def compile_kernel(pyfunc, signature: T.Signature, options: CompileOptions, spec: TargetSpec,
                   specialize_device) -> CompiledKernel:
    """Run the whole pipeline for one signature."""
    timings = {}
    t0 = time.perf_counter()
    if signature.return_type != T.void:
        raise TypeError(f"a kernel returns void, the signature says {signature.return_type}")
    kfunc = type_kernel(pyfunc, signature.args, specialize_device, True, options)
    t1 = time.perf_counter()
    timings["kir"] = t1 - t0
    symbol = mangle(pyfunc, signature)
    if spec.kind == "host":
        from .lower.host import compile_host  # the cpu backend's target
        return compile_host(pyfunc, kfunc, signature, symbol, options, spec, timings)
    from .lower.nvptx import NVPTXTarget

    mod = lower_to_llvm(kfunc, symbol, options, NVPTXTarget())
    ftz = options.fastmath
    ptx_stage.prepare_module(mod.module, ftz)
    llvm_text = str(mod.module)
    t2 = time.perf_counter()
    timings["llvm"] = t2 - t1
    ptx_stage.initialize()
    try:
        ref = llvm.parse_assembly(llvm_text)
        ref.verify()
    except RuntimeError as e:  # an internal bug: say so plainly, with the IR's complaint
        raise CompileError(f"internal error: kaiojit produced invalid LLVM IR for "
                           f"{pyfunc.__qualname__}: {e}") from None
    tm = ptx_stage.target_machine(spec.arch, spec.ptx_version, 3 if options.opt >= 3 else options.opt)
    ptx_stage.optimize(ref, tm, options.opt, {symbol}, mod.needs_libdevice, ftz)
    optimized = str(ref)
    t3 = time.perf_counter()
    timings["opt"] = t3 - t2
    ptx_text = ptx_stage.emit(ref, tm)
    if options.max_registers:
        ptx_text = _with_maxnreg(ptx_text, symbol, options.max_registers)
    timings["ptx"] = time.perf_counter() - t3
    ck = CompiledKernel(
        name=symbol, py_name=pyfunc.__name__, signature=signature,
        arg_names=tuple(n for n, _ in kfunc.params), kir=str(kfunc), llvm=optimized,
        llvm_unoptimized=llvm_text, ptx=ptx_text, static_shared_bytes=static_shared_bytes(kfunc),
        uses_sync=uses_sync(kfunc), options=options, target=spec, kfunc=kfunc, timings=timings,
    )
    if CONFIG.dump:
        dump_stages(ck)
    return ck


def _with_maxnreg(ptx_text: str, symbol: str, n: int) -> str:
    """Put ``.maxnreg n`` after the kernel's parameter list (before its body)."""
    start = ptx_text.find(f".entry {symbol}(")
    if start < 0:
        return ptx_text
    close = ptx_text.find(")", start)
    return ptx_text[: close + 1] + f"\n.maxnreg {int(n)}" + ptx_text[close + 1:]


def dump_stages(ck: CompiledKernel) -> None:
    os.makedirs(CONFIG.dump_dir, exist_ok=True)
    stages = {"kir": ck.kir, "llvm": ck.llvm, "llvm_unoptimized": ck.llvm_unoptimized,
              "ptx": ck.ptx}
    for stage in CONFIG.dump:
        text = stages.get(stage)
        if text is None:
            continue
        ext = {"kir": "kir", "ptx": "ptx"}.get(stage, "ll")
        path = os.path.join(CONFIG.dump_dir, f"{ck.symbol}.{stage}.{ext}")
        with open(path, "w") as f:
            f.write(text)


__all__ = ["CompileOptions", "TargetSpec", "CompiledKernel", "compile_kernel"]
