"""The compiler's stage table: named stages in order per target, entering the pipeline at any
stage, dumping any stage under its name, and device functions compiled on their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

import kaiojit as kj
from kaiojit import types as T
from kaiojit.compiler import Metadata, run_stages, stage_names
from kaiojit.kir import KFunction
from kaiojit.options import CompileOptions, Config
from kaiojit.target import HostImage, TargetSpec
from kaiojit.tools.resources import resources_header
from tests.ptxas import assemble

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIG = "void(float32[::1], float32[::1], int32)"
NVPTX = TargetSpec("nvptx", "sm_90", 80)
HOST = TargetSpec("host")


def scale_sum(out, x, n):
    i = kj.grid(1)
    if i < n:
        acc = 0.0
        for k in range(4):
            acc += x[i] * k
        out[i] = acc


def meta_for(ck, target: TargetSpec, **host_facts) -> Metadata:
    return Metadata(symbol=ck.name, options=CompileOptions(), target=target, **host_facts)


def test_each_target_has_its_stages_in_order():
    assert stage_names("nvptx") == ("kir", "llvm_unoptimized", "llvm", "ptx")
    assert stage_names("host") == ("kir", "llvm_unoptimized", "llvm", "object")


def test_a_compile_keeps_every_stage_and_its_time():
    ck = kj.jit(scale_sum).compile(SIG)
    assert list(ck.timings) == list(stage_names("nvptx"))
    assert ck.stage("kir") == ck.kir and ck.kir.startswith("kernel scale_sum(out: float32[::1]")
    # lowering keeps variables in allocas; the optimized IR has none left
    assert "alloca" in ck.stage("llvm_unoptimized") and "alloca" not in ck.stage("llvm")
    assert ck.stage("ptx") == ck.ptx == ck.image and f".entry {ck.name}(" in ck.ptx


def test_entering_at_llvm_with_unoptimized_ir_gives_the_same_ptx():
    ck = kj.jit(scale_sum).compile(SIG)
    meta = meta_for(ck, NVPTX)
    ptx = run_stages(ck.llvm_unoptimized, meta, start="llvm")
    assert ptx == ck.ptx
    assert list(meta.texts) == ["llvm", "ptx"] and meta.texts["llvm"] == ck.llvm


def test_entering_at_ptx_with_optimized_ir_gives_the_same_ptx():
    ck = kj.jit(scale_sum).compile(SIG, NVPTX)
    assert run_stages(ck.llvm, meta_for(ck, NVPTX), start="ptx") == ck.ptx


def test_stopping_after_kir_returns_the_typed_ir():
    meta = Metadata(symbol="scale_sum_x", options=CompileOptions(), target=NVPTX,
                    signature=T.parse_signature(SIG), specialize_device=None)
    kfunc = run_stages(scale_sum, meta, stop="kir")
    assert isinstance(kfunc, KFunction) and kfunc is meta.kfunc
    assert list(meta.texts) == ["kir"] and str(kfunc) == meta.texts["kir"]


def test_an_unknown_stage_or_target_names_the_choices():
    meta = Metadata(symbol="k", options=CompileOptions(), target=NVPTX)
    with pytest.raises(ValueError, match="no stage 'opt' in the nvptx pipeline; its stages are "
                                         "kir, llvm_unoptimized, llvm, ptx"):
        run_stages("", meta, start="opt")
    with pytest.raises(ValueError, match="no stage 'ptx' in the host pipeline"):
        kj.jit(scale_sum).compile(SIG, HOST).stage("ptx")
    other = Metadata(symbol="k", options=CompileOptions(), target=TargetSpec("spirv"))
    with pytest.raises(ValueError, match="no pipeline for target kind 'spirv'; the kinds are "
                                         "nvptx, host"):
        run_stages("", other)


def test_the_host_pipeline_ends_in_object_code():
    ck = kj.jit(scale_sum).compile(SIG, HOST)
    assert list(ck.timings) == list(stage_names("host"))
    assert isinstance(ck.image, HostImage) and ck.ptx == ""
    assert ck.image.entry == f"{ck.name}_run" and not ck.image.uses_block_mode
    if sys.platform.startswith("linux"):
        assert ck.stage("object")[:4] == b"\x7fELF"
    # only the driver stays external; the per-thread body is inlined into it
    assert f"define void @{ck.name}_run(" in ck.llvm and f"@{ck.name}.thread" not in ck.llvm


def test_entering_the_host_pipeline_at_object_keeps_the_lowering_facts():
    def block_sum(out, x):
        sm = kj.shared.array(32, kj.float32)
        t = kj.threadIdx.x
        sm[t] = x[t]
        kj.syncthreads()
        if t == 0:
            out[0] = sm[0] + sm[31]

    ck = kj.jit(block_sum).compile("void(float32[::1], float32[::1])", HOST)
    assert ck.image.uses_block_mode and ck.image.static_shared_bytes == 128
    facts = dict(uses_block_mode=True, host_shared_bytes=128, sites=ck.image.sites)
    image = run_stages(ck.llvm, meta_for(ck, HOST, **facts), start="object")
    assert image.entry == ck.image.entry and image.uses_block_mode
    assert image.static_shared_bytes == 128 and image.object_code[:4] == ck.image.object_code[:4]


def test_any_stage_dumps_under_its_name(tmp_path):
    meta = Metadata(symbol="scale_sum_dump", options=CompileOptions(), target=HOST,
                    signature=T.parse_signature(SIG), specialize_device=None)
    config = Config(dump=frozenset({"kir", "llvm_unoptimized", "object"}),
                    dump_dir=str(tmp_path))
    image = run_stages(scale_sum, meta, config=config)
    files = {p.name: p for p in tmp_path.iterdir()}
    base = "scale_sum." + "_".join(
        re.sub(r"[^A-Za-z0-9]+", "_", str(a)).strip("_") for a in meta.signature.args) + ".host"
    assert set(files) == {f"{base}.kir", f"{base}.llvm_unoptimized", f"{base}.object"}
    assert files[f"{base}.object"].read_bytes() == image.object_code
    assert files[f"{base}.kir"].read_text() == meta.texts["kir"]
    unoptimized = files[f"{base}.llvm_unoptimized"].read_text()
    assert unoptimized == meta.texts["llvm_unoptimized"]
    assert 'define void @"scale_sum_dump_run"(' in unoptimized


# --- device functions on their own (compile_ptx(device=True)) -----------------------------------------

@kj.jit(device=True)
def twice(v):
    return v * 2


def axpy(a, x, y):
    return twice(a) * x + y


def gather(x, i):
    return x[i] + x[i + 1]


def test_a_device_function_compiles_to_a_visible_func():
    ptx = kj.compile_ptx(axpy, "float32(float32, float32, float32)", device=True)
    assert ".visible .func  (.param .b32 func_retval0) axpy(" in ptx
    assert ".entry" not in ptx and "twice" not in ptx  # the callee is inlined, not exported
    assemble(ptx)


def test_a_device_function_infers_its_return_type_and_takes_arrays():
    ptx = kj.compile_ptx(gather, "(float64[::1], int64)", device=True)
    assert ".visible .func  (.param .b64 func_retval0) gather(" in ptx
    assemble(ptx)
    llvm = kj.compile_llvm(gather, "(float64[::1], int64)", device=True)
    assert "define double @gather(" in llvm


def test_a_device_function_signature_must_match_what_it_returns():
    with pytest.raises(TypeError, match="the signature says axpy returns int32; it returns "
                                        "float32"):
        kj.compile_ptx(axpy, "int32(float32, float32, float32)", device=True)


def kernel_with_map(tmap, out):
    out[0] = 1.0


def test_a_kernel_only_signature_is_a_clean_error():
    with pytest.raises(TypeError, match="kernel_with_map\\(\\): parameter 'tmap' is a tensormap, "
                                        "which only a kernel takes"):
        kj.compile_ptx(kernel_with_map, "void(tensormap, float32[::1])", device=True)
    with pytest.raises(TypeError, match="axpy: a kernel returns void, the signature says "
                                        "float32 \\(compile a device function with "
                                        "device=True\\)"):
        kj.compile_ptx(axpy, "float32(float32, float32, float32)")


def test_inspection_reads_the_stage_table():
    k = kj.jit(scale_sum)
    ck = k.compile(SIG)
    host = k.compile(SIG, HOST)
    header = resources_header(ck)  # "" without ptxas
    assert k.inspect_kir(SIG) == ck.kir
    assert k.inspect_llvm(SIG) == header.replace("//", ";", 1) + ck.llvm
    shown = k.inspect_ptx(SIG)
    assert shown == header + ck.ptx and shown.language == "ptx"
    assert ck.name in shown._repr_html_()
    # all compiled signatures: the host's compile has no ptx stage, so it is left out
    assert isinstance(host.image, HostImage)
    assert k.inspect_ptx() == {ck.signature: header + ck.ptx}


def test_compiling_for_either_target_does_not_import_the_runtime():
    script = textwrap.dedent(f"""
        import sys
        import kaiojit as kj
        from kaiojit.target import TargetSpec
        from tests.test_compiler import scale_sum
        k = kj.jit(scale_sum)
        k.compile({SIG!r})
        k.compile({SIG!r}, TargetSpec("host"))
        print(sorted(m for m in sys.modules if m.startswith("kaiojit.runtime")))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
