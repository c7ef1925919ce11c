"""The registry of intrinsics: every declaration complete and consistent, found by the objects
users call, lowered as declared for each target (a missing lowering and a too-low arch are
located errors), and its properties, not its name, deciding what the analyses conclude."""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
from llvmlite import ir

import kaiojit as kj
from kaiojit import language as L
from kaiojit import types as T
from kaiojit.errors import CompileError, UnsupportedError
from kaiojit.kir import analysis, intrinsics
from kaiojit.kir.intrinsics import ANY_TARGET, Intrinsic, Operands
from kaiojit.lower.host import HostTarget
from kaiojit.lower.nvptx import NVPTXTarget, arch_has
from tests.kir.lowering import assert_at, llvm_ir, typed

TARGETS = ("nvptx", "host")

# kernel functions of test-only intrinsics (registered by the fixture below)
probe_pure = L.KernelBuiltin("probe_pure")
probe_impure = L.KernelBuiltin("probe_impure")
needs_sm100 = L.KernelBuiltin("needs_sm100")
gpu_only = L.KernelBuiltin("gpu_only")
not_on_host = L.KernelBuiltin("not_on_host")
scribble = L.KernelBuiltin("scribble")
warp_probe = L.KernelBuiltin("warp_probe")
rotate_sync = L.KernelBuiltin("rotate_sync")


def _lane(fl, e):
    return fl.target.sreg(fl, "tid.x")


def _in_step(bl, target, e):
    """A warp collective's host lowering runs block-synchronously (never reached here)."""


def _rotate_typing(typer, node):
    mask, value, delta = (typer.expr(a) for a in node.args)
    operands = (typer.coerce(mask, T.uint32, node), typer.coerce(value, T.int32, node),
                typer.coerce(delta, T.int32, node))
    return typer.intrinsic("test.rotate", T.int32, operands, node)


def _nvptx_rotate(fl, e):
    b = fl.builder
    i32 = ir.IntType(32)
    mask, value, delta = (fl.expr(a) for a in e.args)
    src = b.and_(b.add(fl.target.sreg(fl, "laneid"), delta), ir.Constant(i32, 31))
    shfl = fl.mod.declare("llvm.nvvm.shfl.sync.idx.i32", i32, [i32] * 4)
    return b.call(shfl, [mask, value, src, ir.Constant(i32, 31)])


def _host_rotate(bl, target, e):
    def source(b, lane, delta):
        return b.and_(b.add(lane, delta), ir.Constant(lane.type, 31)), ir.Constant(ir.IntType(1), 1)
    bl.shuffle(target, e, source)


def _nullary(name: str):
    return lambda typer, node: typer.intrinsic(name, T.int32, (), node)


def _array_arg(name: str):
    return lambda typer, node: typer.intrinsic(name, T.int32, (typer.expr(node.args[0]),), node)


@pytest.fixture(scope="module", autouse=True)
def test_intrinsics():
    decls = [
        Intrinsic("test.probe_pure", Operands(result=T.int32), {ANY_TARGET: _lane},
                  calls={probe_pure: _nullary("test.probe_pure")}, pure=True, nonnegative=True),
        Intrinsic("test.probe_impure", Operands(result=T.int32), {ANY_TARGET: _lane},
                  calls={probe_impure: _nullary("test.probe_impure")}),
        Intrinsic("test.needs_sm100", Operands(result=T.int32), {ANY_TARGET: _lane},
                  calls={needs_sm100: _nullary("test.needs_sm100")}, min_arch="sm_100"),
        Intrinsic("test.gpu_only", Operands(result=T.int32), {"nvptx": _lane},
                  calls={gpu_only: _nullary("test.gpu_only")}),
        Intrinsic("test.not_on_host", Operands(result=T.int32), {"nvptx": _lane},
                  calls={not_on_host: _nullary("test.not_on_host")},
                  absent={"host": "it needs a GPU's tensor cores"}),
        Intrinsic("test.scribble", Operands(intrinsics.ARRAY, result=T.int32),
                  {ANY_TARGET: _lane}, calls={scribble: _array_arg("test.scribble")},
                  writes=(0,)),
        Intrinsic("test.warp_probe", Operands(result=T.int32), {"nvptx": _lane, "host": _in_step},
                  calls={warp_probe: _nullary("test.warp_probe")}, warp=True, convergent=True),
        Intrinsic("test.rotate", Operands(T.uint32, T.int32, T.int32, result=T.int32),
                  {"nvptx": _nvptx_rotate, "host": _host_rotate},
                  calls={rotate_sync: _rotate_typing}, warp=True, convergent=True),
    ]
    for d in decls:
        intrinsics.register(d)
    yield
    for d in decls:
        intrinsics.unregister(d.name)


def declared():
    return [d for d in intrinsics.all_intrinsics() if not d.name.startswith("test.")]


# --- completeness ------------------------------------------------------------------------------

def test_every_intrinsic_is_lowered_for_the_gpu_and_on_the_host_or_says_why_not():
    for d in declared():
        assert d.lowering_for("nvptx") is not None, d.name
        assert d.lowering_for("host") is not None or d.absent.get("host"), d.name
        assert d.targets <= {*TARGETS, ANY_TARGET}, d.name


def test_every_object_users_call_or_name_finds_its_declaration():
    seen = 0
    for d in declared():
        for obj in d.calls:
            if isinstance(obj, str) and not obj.startswith("kj."):
                continue  # resolved once its module is imported (see below)
            if isinstance(obj, str):  # kj.<name>, or kj.<namespace>.<name>
                obj = functools.reduce(getattr, obj[3:].split("."), kj)
            assert intrinsics.call_typing(obj)[0] is d, d.name
            seen += 1
        for obj in d.values:
            assert intrinsics.value_intrinsic(obj) is d
            seen += 1
    assert seen > 80


def test_numpy_functions_join_once_numpy_is_imported():
    import numpy as np

    assert intrinsics.call_typing(np.floor)[0] is intrinsics.lookup("math.floor")
    assert intrinsics.call_typing(np.arcsin)[0] is intrinsics.lookup("math.asin")


def test_names_with_a_static_parameter_find_their_declaration():
    assert intrinsics.lookup("array.slice:i,s101").name == "array.slice"
    assert intrinsics.find("array.nothing") is None
    with pytest.raises(KeyError, match="no intrinsic 'array.nothing'"):
        intrinsics.lookup("array.nothing:x")


def test_user_names_are_how_users_spell_them():
    assert intrinsics.lookup("sync.syncthreads").user_name == "kj.syncthreads"
    assert intrinsics.lookup("atomic.and").user_name == "kj.atomic.and"
    assert intrinsics.lookup("math.sqrt").user_name == "math.sqrt"
    assert intrinsics.lookup("array.view").user_name == "array.view"


def test_inconsistent_declarations_are_refused():
    with pytest.raises(ValueError, match="pure intrinsic cannot synchronize"):
        Intrinsic("bad.a", Operands(result=T.void), {}, pure=True, barrier=True,
                  convergent=True)
    with pytest.raises(ValueError, match="barriers and warp collectives are convergent"):
        Intrinsic("bad.b", Operands(result=T.void), {}, warp=True)
    with pytest.raises(ValueError, match="both lowered and absent"):
        Intrinsic("bad.c", Operands(result=T.void), {"host": _lane}, absent={"host": "no"})
    with pytest.raises(ValueError, match="already registered"):
        intrinsics.register(Intrinsic("math.sqrt", Operands(result=T.void), {}))
    with pytest.raises(ValueError, match="already claimed"):
        intrinsics.register(Intrinsic("bad.d", Operands(result=T.void), {},
                                      calls={math.sqrt: _lane}))
    with pytest.raises(ValueError, match="'kj.grid' is already claimed"):
        intrinsics.register(Intrinsic("bad.e", Operands(result=T.void), {},
                                      calls={"kj.grid": _lane}))
    assert intrinsics.find("bad.d") is None and intrinsics.find("bad.e") is None


def test_a_kj_name_declared_in_the_registry_is_exported_lazily():
    decl = intrinsics.register(Intrinsic(
        "test.public_probe", Operands(result=T.int32), {ANY_TARGET: _lane},
        calls={"kj.public_probe": _nullary("test.public_probe")}))
    try:
        stub = kj.public_probe
        assert isinstance(stub, L.KernelBuiltin) and stub.name == "public_probe"
        assert intrinsics.call_typing(stub)[0] is decl
        assert "public_probe" in intrinsics.public_names()
        with pytest.raises(RuntimeError, match="only be called inside a @kj.jit kernel"):
            stub()
    finally:
        intrinsics.unregister("test.public_probe")
        vars(kj).pop("public_probe", None)
    assert intrinsics.public_object("public_probe") is None
    with pytest.raises(AttributeError):
        kj.public_probe


def test_a_dotted_kj_name_is_a_member_of_a_namespace_the_registry_makes():
    decls = [intrinsics.register(Intrinsic(
        f"test.ns_{m}", Operands(result=T.int32), {ANY_TARGET: _lane},
        calls={f"kj.probe_ns.{m}": _nullary(f"test.ns_{m}")})) for m in ("one", "two")]
    try:
        assert intrinsics.call_typing(kj.probe_ns.one)[0] is decls[0]
        assert intrinsics.call_typing(kj.probe_ns.two)[0] is decls[1]
        assert kj.probe_ns.two.name == "probe_ns.two"
        with pytest.raises(ValueError, match="already claimed"):
            intrinsics.register(Intrinsic("test.ns_again", Operands(result=T.int32),
                                          {ANY_TARGET: _lane}, calls={"kj.probe_ns.one": _lane}))
        intrinsics.unregister("test.ns_one")
        assert not hasattr(kj.probe_ns, "one") and intrinsics.public_object("probe_ns")
    finally:
        for d in decls:
            if intrinsics.find(d.name):
                intrinsics.unregister(d.name)
        vars(kj).pop("probe_ns", None)
    assert intrinsics.public_object("probe_ns") is None


def test_split_points_are_the_barriers_and_warp_collectives():
    split = {d.name for d in declared() if d.split_point}
    assert split == {"sync.syncthreads", "sync.syncthreads_count", "sync.syncthreads_and",
                     "sync.syncthreads_or", "sync.syncwarp", "warp.shfl_idx", "warp.shfl_up",
                     "warp.shfl_down", "warp.shfl_xor", "warp.all", "warp.any", "warp.ballot", "warp.uni",
                     "warp.match_any", "warp.match_all", "warp.activemask", "warp.elect_one", "mbarrier.wait",
                     "mbarrier.try_wait_parity", "tc.mma.bf16", "tc.mma.f16", "tc.mma.tf32",
                     "tc.ldmatrix", "cg.grid_sync", "named_barrier.sync", "named_barrier.arrive",
                     "stmatrix", "cluster.sync", "cluster.arrive", "cluster.arrive_relaxed",
                     "cluster.wait", "mbarrier.wait_cluster", "wgmma.mma_async_rs"}
    assert all(d.convergent for d in declared() if d.split_point)


# --- lowering as declared ----------------------------------------------------------------------

def k_sm100(out):
    out[0] = needs_sm100()


def k_gpu_only(out):
    out[0] = gpu_only()


def k_not_on_host(out):
    out[0] = not_on_host()


def test_an_arch_below_the_intrinsics_minimum_is_a_located_error():
    with pytest.raises(UnsupportedError) as info:
        llvm_ir(k_sm100, "void(int32[::1])", NVPTXTarget("sm_90"))
    assert_at(info.value, k_sm100, "needs_sm100()")
    assert "needs_sm100() needs sm_100 or newer; this kernel is compiled for sm_90" \
        in str(info.value)
    assert "sreg.tid.x" in llvm_ir(k_sm100, "void(int32[::1])", NVPTXTarget("sm_100"))
    assert "sreg.tid.x" not in llvm_ir(k_sm100, "void(int32[::1])", HostTarget())


def test_arch_specific_features_need_exactly_that_arch():
    assert arch_has("sm_90", "sm_70") and arch_has("sm_90a", "sm_90")
    assert not arch_has("sm_80", "sm_90")
    assert arch_has("sm_90a", "sm_90a")
    assert not arch_has("sm_90", "sm_90a") and not arch_has("sm_100a", "sm_90a")


def test_a_target_without_a_lowering_fails_naming_intrinsic_and_target():
    with pytest.raises(CompileError) as info:
        llvm_ir(k_gpu_only, "void(int32[::1])", HostTarget())
    assert_at(info.value, k_gpu_only, "gpu_only()")
    assert "internal error: intrinsic test.gpu_only has no lowering for the host target" \
        in str(info.value)


def test_a_target_that_declares_an_absence_says_why():
    with pytest.raises(UnsupportedError) as info:
        llvm_ir(k_not_on_host, "void(int32[::1])", HostTarget())
    assert_at(info.value, k_not_on_host, "not_on_host()")
    assert ("not_on_host() is not available on the host target: it needs a GPU's tensor "
            "cores") in str(info.value)


# --- properties drive the analyses -------------------------------------------------------------

def k_select_pure(out, n):
    i = kj.grid(1)
    out[i] = probe_pure() if i < n else -1


def k_select_impure(out, n):
    i = kj.grid(1)
    out[i] = probe_impure() if i < n else -1


def k_select_load(out, x, n):
    i = kj.grid(1)
    out[i] = x[i] if i < n else -1


def test_only_pure_operands_are_evaluated_on_both_sides_of_a_select():
    sig = "void(int32[::1], int64)"
    pure = llvm_ir(k_select_pure, sig, NVPTXTarget())
    impure = llvm_ir(k_select_impure, sig, NVPTXTarget())
    assert "sel.then" not in pure and " = select " in pure
    assert "sel.then" in impure
    guarded = llvm_ir(k_select_load, "void(int32[::1], int32[::1], int64)", NVPTXTarget())
    assert "sel.then" in guarded  # the load only where i < n


def test_purity_comes_from_the_declaration():
    pure = typed(k_select_pure, "void(int32[::1], int64)")
    impure = typed(k_select_impure, "void(int32[::1], int64)")
    pick = [s.value for s in pure.body if getattr(s, "value", None) is not None
            and s.value.op == "select"]
    assert pick and analysis.is_pure(pick[0])
    pick = [s.value for s in impure.body if getattr(s, "value", None) is not None
            and s.value.op == "select"]
    assert pick and not analysis.is_pure(pick[0])


def k_index_pure(out):
    out[probe_pure()] = 1


def k_index_impure(out):
    out[probe_impure()] = 1


def test_a_nonnegative_intrinsic_indexes_without_wraparound():
    sig = "void(int32[::1])"
    assert "icmp slt" not in llvm_ir(k_index_pure, sig, NVPTXTarget())
    assert "icmp slt" in llvm_ir(k_index_impure, sig, NVPTXTarget())
    assert analysis.nonnegative_vars(typed(k_nonneg_var, sig)) == {"j"}


def k_nonneg_var(out):
    j = probe_pure() * 2
    k = probe_impure()
    out[j + k] = 1


def k_scribble(out, x):
    out[0] = scribble(x)


def k_read(out, x):
    out[0] = x[0]


def x_attributes(ir_text: str) -> str:
    return re.search(r'ptr ([a-z ]*)%"x"', ir_text).group(1)


def test_an_intrinsic_that_writes_its_array_operand_makes_that_parameter_written():
    sig = "void(int32[::1], int32[::1])"
    assert analysis.written_params(typed(k_scribble, sig)) == {"out", "x"}
    assert analysis.written_params(typed(k_read, sig)) == {"out"}
    assert "readonly" not in x_attributes(llvm_ir(k_scribble, sig, NVPTXTarget()))
    assert "readonly" in x_attributes(llvm_ir(k_read, sig, NVPTXTarget()))


def k_warp(out):
    out[0] = warp_probe()


def test_warp_and_barrier_properties_make_the_cpu_backend_run_a_block_together():
    assert analysis.uses_sync(typed(k_warp, "void(int32[::1])"))
    assert not analysis.uses_sync(typed(k_index_pure, "void(int32[::1])"))


def k_rotate(out, x, delta):
    i = kj.grid(1)
    out[i] = rotate_sync(0xFFFFFFFF, x[i], delta)


def test_a_new_warp_collective_is_one_declaration(kj_backend):
    """test.rotate, declared above with a GPU lowering and a block-synchronous host one, runs
    on the backend at hand like the built-in shuffles."""
    rng = np.random.default_rng()
    x = rng.integers(-2**31, 2**31, 128, dtype=np.int32)
    delta = int(rng.integers(1, 32))
    out = kj.to_device(np.full(128, -1, np.int32))
    kj.jit(k_rotate)[2, 64](out, kj.to_device(x), np.int32(delta))
    lanes = np.arange(128)
    want = x[lanes - lanes % 32 + (lanes % 32 + delta) % 32]
    np.testing.assert_array_equal(out.copy_to_host(), want)
    assert "shfl.sync.idx.b32" in kj.compile_ptx(k_rotate, "void(int32[::1], int32[::1], int32)")



def k_fences(out):
    out[0] = 1
    kj.threadfence()
    kj.threadfence_block()
    kj.threadfence_system()


def test_fences_are_memory_barriers_on_both_targets():
    gpu = llvm_ir(k_fences, "void(int32[::1])", NVPTXTarget())
    assert [f"membar.{s};" in gpu for s in ("gl", "cta", "sys")] == [True] * 3
    assert llvm_ir(k_fences, "void(int32[::1])", HostTarget()).count("fence seq_cst") == 3
    assert "membar.sys;" in kj.compile_ptx(k_fences, "void(int32[::1])")
