"""The typed IR: NEP 50 promotion, unification across loops, name resolution, device functions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from tests.promotion import result_type

N_ITEMS = 4
SCALE = 2.5
ENABLED = True
DISABLED = False
SHAPE = (4, 8)
NP_SCALE = np.float32(0.5)


def kir(pyfunc, sig: str) -> str:
    return kj.jit(pyfunc).inspect_kir(sig)


def local_types(text: str) -> dict[str, str]:
    """{name: type} from the 'local name: type' lines of the typed IR."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("local "):
            name, t = line[len("local "):].split(": ", 1)
            out[name] = t
    return out


def k_saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def test_kir_prints_kernel_header_locals_and_body():
    text = kir(k_saxpy, "void(float32[::1], float32[::1], float32[::1], float32, int32)")
    lines = text.splitlines()
    assert lines[0] == ("kernel k_saxpy(out: float32[::1], x: float32[::1], y: float32[::1], "
                        "a: float32, n: int32) -> void:")
    assert local_types(text)["i"] == "int64"
    assert "    i = grid.x()" in lines
    assert "    if (i < int64(n)):" in lines
    assert "        out[i] = ((a * x[i]) + y[i])" in lines


def k_binop(out, a, b):
    out[0] = a + b


@pytest.mark.parametrize("a, b", [
    ("int8", "uint8"), ("int32", "int64"), ("uint32", "int32"), ("uint64", "int64"),
    ("float32", "int32"), ("float32", "int16"), ("float16", "int8"), ("float16", "float32"),
    ("bool", "int8"), ("float32", "float64"), ("uint16", "float16"),
])
def test_typed_operands_promote_as_numpy(a, b):
    expected = np.result_type(np.dtype(a), np.dtype(b)).name
    ck = kj.jit(k_binop).compile(f"void(float64[::1], {a}, {b})")
    (store,) = ck.kfunc.body
    # the sum is computed in NumPy's result type, then converted to the array's float64
    value = store.value.args[0] if store.value.op == "cast" else store.value
    assert str(value.type) == expected
    assert local_types(ck.kir)["a"] == a


def k_weak(out, i8, u16, f16, f32, b):
    out[0] = i8 + 1
    out[1] = u16 * 300
    out[2] = f16 + 1.5
    out[3] = f32 * 2
    out[4] = i8 + 1.5
    out[5] = b + 1
    out[6] = b + True


# bool arithmetic counts in integers, as Python's True + True == 2 does
WEAK_EXPECTED = ["int8", "uint16", "float16", "float32", "float64", "int64", "int64"]


def test_python_literals_are_weak_nep50():
    ck = kj.jit(k_weak).compile("void(float64[::1], int8, uint16, float16, float32, bool)")
    got = []
    for store in ck.kfunc.body:
        v = store.value
        got.append(str((v.args[0] if v.op == "cast" else v).type))
    assert got == WEAK_EXPECTED
    # NumPy 2 gives the same for its scalars and Python literals
    for np_value, literal, i in [(np.int8(1), 1, 0), (np.uint16(1), 300, 1),
                                 (np.float16(1), 1.5, 2), (np.float32(1), 2, 3)]:
        assert (np_value + literal).dtype.name == WEAK_EXPECTED[i]


def k_cast_literal(out, x, n):
    out[0] = kj.float64(-2.0) * x
    out[1] = np.float64(0.5) + x
    out[2] = kj.int64(3) * n


def test_a_cast_literal_is_strong():
    # a literal the user casts has that type for real: float64(-2.0) * float32 is float64, as
    # in NumPy, numba and CUDA C (the cast is not a weak Python scalar any more)
    ck = kj.jit(k_cast_literal).compile("void(float64[::1], float32, int8)")
    values = [s.value.args[0] if s.value.op == "cast" else s.value for s in ck.kfunc.body]
    assert [str(v.type) for v in values] == ["float64", "float64", "int64"]
    assert not any(v.weak for v in values)
    assert (np.float64(-2.0) * np.float32(1)).dtype == np.float64


def k_literal_only(out):
    x = 1 + 2
    y = 1 + 2.0
    out[0] = x
    out[1] = y


def test_literal_arithmetic_folds_and_stays_python_typed():
    text = kir(k_literal_only, "void(float32[::1])")
    types = local_types(text)
    assert types["x"] == "int64" and types["y"] == "float64"
    assert "x = int64(3)" in text and "y = float64(3.0)" in text


def k_loop_widens(out, x, n):
    acc = 0
    for j in range(n):
        acc = acc + x[j] * 0.5
    out[0] = acc


def k_loop_int_to_float(out, n):
    v = 1
    k = 0
    while k < n:
        v = v / 2
        k += 1
    out[0] = v


def k_branch_unify(out, a, b, n):
    v = a
    if n > 0:
        v = b
    out[0] = v


def test_loop_variable_unifies_to_the_wider_type():
    types = local_types(kir(k_loop_widens, "void(float32[::1], float32[::1], int32)"))
    assert types["acc"] == "float32"  # a weak 0 yields to float32 (NEP 50)
    assert types["j"] == "int32"
    types = local_types(kir(k_loop_widens, "void(float64[::1], int16[::1], int64)"))
    assert types["acc"] == "float64" and types["j"] == "int64"
    types = local_types(kir(k_loop_int_to_float, "void(float32[::1], int32)"))
    assert types["v"] == "float64" and types["k"] == "int64"  # k = 0, k += 1: a weak int


@pytest.mark.parametrize("a, b", [("int32", "int64"), ("float32", "int64"), ("uint8", "int8")])
def test_branches_unify_with_numpy_promotion(a, b):
    types = local_types(kir(k_branch_unify, f"void(float64[::1], {a}, {b}, int32)"))
    assert types["v"] == np.result_type(np.dtype(a), np.dtype(b)).name


def k_constants(out, n):
    out[0] = SCALE * N_ITEMS
    out[1] = SHAPE[1] + len(SHAPE)
    out[2] = NP_SCALE * 2
    if ENABLED:
        out[3] = 1
    if DISABLED or n > 3:
        out[4] = 2


def test_module_constants_are_folded():
    text = kir(k_constants, "void(float32[::1], int32)")
    lines = [ln.strip() for ln in text.splitlines()]
    assert "out[int64(0)] = float32(10.0)" in lines
    assert "out[int64(1)] = float32(10)" in lines or "out[int64(1)] = float32(10.0)" in lines
    assert "out[int64(2)] = float32(1.0)" in lines
    assert "if True:" in lines
    assert "SCALE" not in text and "N_ITEMS" not in text and "SHAPE" not in text


def k_tuple_constant(out):
    a, b = SHAPE
    out[0] = a * b


def test_tuple_constant_unpacks():
    text = kir(k_tuple_constant, "void(int32[::1])")
    assert local_types(text)["a"] == "int64"
    assert "out[int64(0)] = int32(32)" in text or "int32((a * b))" in text


def k_names(out, x):
    i = kj.grid(1)
    out[i] = math.sqrt(x[i]) + kj.float32(1) + np.float32(2) + np.sqrt(x[i]) + math.pi
    out[i] += kj.threadIdx.x + kj.blockDim.y + kj.laneid + kj.warpsize


def test_math_kj_numpy_names_resolve():
    text = kir(k_names, "void(float32[::1], float32[::1])")
    assert text.count("math.sqrt(x[i])") == 2
    assert "sreg.tid.x()" in text and "sreg.ntid.y()" in text and "sreg.laneid()" in text
    assert "+ float32(1.0)) + float32(2.0))" in text  # typed constants
    assert f"float32({float(np.float32(math.pi))})" in text  # a weak float yields to float32
    assert "+ int64(32))" in text  # kj.warpsize is a constant (ntid.y made the sum int64)


def k_math_int(out, n):
    out[0] = math.sqrt(n)
    out[1] = math.floor(n)
    out[2] = math.atan2(n, 2)


def test_math_on_integers_promotes_to_float64_like_python():
    ck = kj.jit(k_math_int).compile("void(float64[::1], int32)")
    stores = ck.kfunc.body
    assert [str(s.value.type) for s in stores] == ["float64", "float64", "float64"]
    assert str(stores[0].value) == "math.sqrt(float64(n))"
    assert str(stores[1].value) == "float64(int64(n))"  # floor of an int is the int
    assert "math.atan2(float64(n), float64(2.0))" in str(stores[2].value)


def k_casts(out, x):
    out[0] = kj.int8(x) + int(x) + float(x) + kj.uint16(x) + np.int16(x) + kj.float16(x)
    out[1] = bool(x)


def test_casts_by_dtype_name_and_python_builtins():
    text = kir(k_casts, "void(float64[::1], float32)")
    for spelled in ("int8(x)", "int64(x)", "float64(x)", "uint16(x)", "int16(x)", "float16(x)"):
        assert spelled in text
    assert "(x != float32(0.0))" in text


@kj.jit(device=True)
def axpy(a, x, y):
    return a * x + y


@kj.jit(device=True)
def divmod_dev(a, b):
    return a // b, a % b


@kj.jit(device=True)
def sign(v):
    if v < 0:
        return -1
    if v > 0:
        return 1
    return 0


def k_device_calls(out, x):
    i = kj.grid(1)
    q, r = divmod_dev(kj.int32(i), 3)
    out[i] = axpy(x[i], x[i], 1.0) + q + r + sign(x[i])


def test_device_functions_are_typed_per_argument_types():
    text = kir(k_device_calls, "void(float32[::1], float32[::1])")
    assert "device axpy(a: float32, x: float32, y: float64) -> float64:" in text
    assert "device divmod_dev(a: int32, b: int64) -> Tuple(int64, int64):" in text
    assert "device sign(v: float32) -> int64:" in text
    assert "return ((int64(a) // b), (int64(a) % b))" in text
    assert "q = $tuple" in text and "r = $tuple" in text
    assert "sign(x[i])" in text


def test_device_function_inspect_kir_and_signatures():
    text = axpy.inspect_kir("float32(float32, float32, float32)")
    assert text.splitlines()[0] == "device axpy(a: float32, x: float32, y: float32) -> float32:"
    assert any(str(s) == "float32(float32, float32, float32)" for s in axpy.signatures)


def k_chained(out, x, n):
    i = kj.grid(1)
    if 0 <= i < n <= 100:
        out[i] = x[i]


def test_chained_comparison_is_a_conjunction():
    text = kir(k_chained, "void(float32[::1], float32[::1], int32)")
    # nested to the right: each middle operand's first evaluation dominates its second
    assert "if ((int64(0) <= i) and ((i < int64(n)) and (n <= int32(100)))):" in text


def k_half_and_bool(out, h, b):
    i = kj.grid(1)
    v = h[i] * h[i] + kj.float16(1)
    if b[i] and not b[0]:
        out[i] = v


def test_float16_and_bool_arrays():
    text = kir(k_half_and_bool, "void(float16[::1], float16[::1], bool[::1])")
    assert local_types(text)["v"] == "float16"
    assert "if (b[i] and (not b[int64(0)])):" in text


def k_minmax_round_pow(out, x, n):
    out[0] = min(x[0], 1.0, n)
    out[1] = max(n, 2, 3)
    out[2] = round(x[0])
    out[3] = x[0] ** 2 + n ** 2 + 2 ** n + x[0] ** n


def test_min_max_round_pow_types():
    ck = kj.jit(k_minmax_round_pow).compile("void(float64[::1], float32[::1], int32)")
    types = []
    for s in ck.kfunc.body:
        v = s.value
        types.append(str((v.args[0] if v.op == "cast" else v).type))
    assert types[:3] == [np.result_type(np.float32, np.int32).name, "int32", "int64"]
    # float32 ** int32 computes in float64, as NumPy promotes them
    assert types[3] == str(np.result_type(np.float32, np.int32))


def test_promotion_of_every_pair_matches_numpy():
    from kaiojit import types as T
    for a in T.SCALARS.values():
        for b in T.SCALARS.values():
            assert T.promote(a, b).name == result_type(a.np_dtype, b.np_dtype).name, (a, b)


def test_the_promotion_fallback_is_numpys_answer_where_numpy_gives_one(monkeypatch):
    """tests/promotion.py answers for NumPy releases that refuse bfloat16 or float8 with some
    types (NumPy 2.5): made to answer every such pair, it must give what this NumPy gives (and
    kaiojit), so a GPU machine's newer NumPy checks the same rule."""
    import tests.promotion as P
    from kaiojit import types as T
    numpy_says = np.result_type
    low = {"bfloat16", "float8_e4m3fn", "float8_e5m2"}

    def refusing(a, b):
        if a.name in low or b.name in low:
            raise TypeError("refused, as NumPy 2.5 refuses bfloat16 with int16")
        return numpy_says(a, b)

    monkeypatch.setattr(P.np, "result_type", refusing)
    pairs = [(a, b) for a in T.SCALARS.values() for b in T.SCALARS.values()
             if a.name in low or b.name in low]
    assert len(pairs) > 40
    for a, b in pairs:
        try:
            want = numpy_says(a.np_dtype, b.np_dtype).name
        except TypeError:  # this NumPy refuses too: kaiojit's rule is the reference
            want = T.promote(a, b).name
        assert P.result_type(a.np_dtype, b.np_dtype).name == want == T.promote(a, b).name, (a, b)
