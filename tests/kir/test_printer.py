"""The text form of the typed IR: what inspect_kir() shows and KAIOJIT_DUMP=kir writes.

The kernels in printed_kernels.py cover every statement and most expression ops; their text is
the one the printer wrote before the IR moved into kaiojit/kir (so it must not change by
accident). Hand-built nodes cover the remaining ops.
"""

from __future__ import annotations

import numpy as np

import kaiojit as kj
from kaiojit import types as T
from kaiojit.kir import EXPR_OPS, Expr, KFunction, expr_text, function_text
from tests.kir import printed_kernels as pk
from tests.kir.lowering import typed

CONTROL = """\
kernel k_control(out: float32[::1], x: float32[::1], n: int32) -> void:
    local out: float32[::1]
    local x: float32[::1]
    local n: int32
    local i: int64
    local acc: float32
    local j: int32
    local k: int64
    local $swap30_4_0: int64
    local $swap30_4_1: int64
    local a: int64
    local b: int64
    local $index32_13: int64
    local v: int64
    i = grid.x()
    if (i >= int64(n)):
        return
    acc = float32(0.0)
    for j in range(int32(0), n, int32(2)):
        if (j == int32(3)):
            continue
        acc = (acc + (x[j] * float32(2.0)))
        if (acc > float32(100.0)):
            break
    k = int64(0)
    while ((k < int64(3)) and (acc != float32(0.0))):
        k = (k + int64(1))
    $swap30_4_0 = k
    $swap30_4_1 = i
    a = $swap30_4_0
    b = $swap30_4_1
    out[i] = float32((clamp(acc, float64(-1.0), float64(1.0)) if (a < b) else float64((-acc))))
    for $index32_13 in range(int64(0), int64(2), int64(1)):  # unrolled
        v = (int64(16) if ($index32_13 == int64(0)) else int64(8))
        out[i] = (out[i] + float32(v))

device clamp(v: float32, lo: float64, hi: float64) -> float64:
    local v: float32
    local lo: float64
    local hi: float64
    return math.min(math.max(float64(v), lo), hi)"""

MEMORY = """\
kernel k_memory(out: float32[:, ::1], m: float32[:, ::1], counts: uint32[::1]) -> void:
    local out: float32[:, ::1]
    local m: float32[:, ::1]
    local counts: uint32[::1]
    local sm: float32[:, ::1]
    local loc: int32[::1]
    local $swap39_4_0: int32
    local $swap39_4_1: int32
    local tx: int32
    local ty: int32
    local row: float32[::1]
    local part: float32[:, :]
    local old: uint32
    local s: float32
    sm = shared.array((4, 4), float32)
    loc = local.array((4,), int32)
    $swap39_4_0 = sreg.tid.x()
    $swap39_4_1 = sreg.tid.y()
    tx = $swap39_4_0
    ty = $swap39_4_1
    sm[ty, tx] = m[ty, tx]
    loc[tx] = tx
    sync.syncthreads()
    row = array.view(m, ty)
    part = array.slice:s100,s001(m, int64(1), int64(2))
    out[ty, tx] = (((sm[tx, ty] + row[tx]) + part[int64(0), int64(0)]) + math.sqrt(math.fabs(m[ty, tx])))
    old = atomic.add(counts, loc[tx], uint32(1))
    s = warp.shfl_down(uint32(4294967295), out[ty, tx], int32(1))
    if ((sreg.laneid() == int32(0)) and (not warp.all(warp.activemask(), (s > float32(0.0))))):
        print(str('lane'), tx, str('old'), old, bits.popc(old))
    out[int64(0), int64(0)] = float32(((float64(float32(int64(math.rint(s)))) + float64(m.shape[0])) + float64(m.shape[0])))"""


def test_control_flow_kernel_prints_as_before():
    kfunc = typed(pk.k_control, "void(float32[::1], float32[::1], int32)")
    assert str(kfunc) == CONTROL
    assert function_text(kfunc) == CONTROL


def test_memory_sync_and_warp_kernel_prints_as_before():
    kfunc = typed(pk.k_memory, "void(float32[:, ::1], float32[:, ::1], uint32[::1])")
    assert str(kfunc) == MEMORY


def test_inspect_kir_is_the_printed_ir():
    sig = "void(float32[::1], float32[::1], int32)"
    assert kj.jit(pk.k_control).inspect_kir(sig) == CONTROL


def test_every_expression_op_has_a_text():
    i = Expr("var", T.int64, attr="i")
    f = Expr("var", T.float32, attr="f")
    flag = Expr("var", T.bool_, attr="p")
    arr = Expr("var", T.ArrayType(T.float32, 1, "C"), attr="a")
    pair = Expr("tuple", T.TupleType((T.int64, T.float32)), (i, f))
    table = np.arange(3, dtype=np.float32)
    callee = KFunction("clamp", "clamp", (("v", T.float32),), T.float32, {"v": T.float32}, [],
                       is_kernel=False)
    texts = {
        "const": (Expr("const", T.int32, attr=7), "int32(7)"),
        "var": (i, "i"),
        "param": (Expr("param", T.int64, attr="n"), "n"),
        "binop": (Expr("binop", T.int64, (i, i), attr="//"), "(i // i)"),
        "unop": (Expr("unop", T.int64, (i,), attr="~"), "(~i)"),
        "not": (Expr("not", T.bool_, (flag,)), "(not p)"),
        "cmp": (Expr("cmp", T.bool_, (i, i), attr="<="), "(i <= i)"),
        "and": (Expr("and", T.bool_, (flag, flag)), "(p and p)"),
        "or": (Expr("or", T.bool_, (flag, flag)), "(p or p)"),
        "select": (Expr("select", T.float32, (flag, f, f)), "(f if p else f)"),
        "cast": (Expr("cast", T.float64, (f,)), "float64(f)"),
        "load": (Expr("load", T.float32, (arr, i)), "a[i]"),
        "shape": (Expr("shape", T.int64, (arr,), attr=0), "a.shape[0]"),
        "tuple": (pair, "(i, f)"),
        "getitem": (Expr("getitem", T.float32, (pair,), attr=1), "(i, f)[1]"),
        "intrinsic": (Expr("intrinsic", T.float32, (f,), attr="math.sqrt"), "math.sqrt(f)"),
        "call": (Expr("call", T.float32, (f,), attr=callee), "clamp(f)"),
        "shared": (Expr("shared", arr.type, attr=((8,), T.float32, "k_smem1")),
                   "shared.array((8,), float32)"),
        "local": (Expr("local", arr.type, attr=((2,), T.float32)), "local.array((2,), float32)"),
        "constarray": (Expr("constarray", arr.type, attr=(table, "k_cmem3_4")),
                       "const.array_like(k_cmem3_4)"),
        "globalarray": (Expr("globalarray", arr.type, attr=(0x7f00, (3,), (4,), table)),
                        "global_array(0x7f00, (3,))"),
        "reuse": (Expr("reuse", T.int64, (i,)), "i"),
    }
    assert set(texts) == EXPR_OPS
    for op, (node, text) in texts.items():
        assert expr_text(node) == text, op
        assert str(node) == text, op
    weak = Expr("const", T.float64, attr=0.5, weak=True)
    assert str(weak) == "0.5"
