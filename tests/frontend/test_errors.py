"""Bad input: each gets a located CompileError (or TypeError) in words, with no kaiojit frames."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from tests.located import assert_located, assert_no_internals, compile_error

F1 = "void(float32[::1])"
F1N = "void(float32[::1], int32)"


def plain_python(x):
    return x


@kj.jit(device=True)
def add2(a, b):
    return a + b


# --- issue 2: unsupported syntax ---------------------------------------------------------------


def k_listcomp(out):
    out[0] = [i for i in range(3)][0]


def k_setcomp(out):
    s = {i for i in range(3)}
    out[0] = 1


def k_dictcomp(out):
    d = {i: i for i in range(3)}
    out[0] = 1


def k_genexp(out):
    g = (i for i in range(3))
    out[0] = 1


def k_with(out):
    with open("x"):
        out[0] = 1


def k_try(out):
    try:
        out[0] = 1
    except Exception:
        pass


def k_lambda(out):
    f = lambda v: v  # noqa: E731
    out[0] = f(1)


def k_class(out):
    class Inner:
        pass
    out[0] = 1


def k_generator(out):
    yield out[0]


def k_yield_from(out):
    yield from range(3)


def k_nested_def(out):
    def inner():
        return 1
    out[0] = 1


def k_string_var(out):
    s = "hello"
    out[0] = 1


def k_string_return_device(out):
    out[0] = len("abc")


def k_fstring(out):
    print(f"{out[0]}")


def k_raise(out):
    raise  # a bare raise: kernels handle no exception to raise again


def k_global(out):
    global SOMETHING
    SOMETHING = 1


def k_slice(out):
    out[1:2] = out[0]


def k_matmul(out):
    out[0] = out @ out


def k_ellipsis(out):
    out[0] = ...


def k_none(out):
    x = None
    out[0] = x


def k_in(out):
    if 1 in out:
        out[0] = 1


def k_walrus(out):
    if (n := out.size) > 2:
        out[0] = n


def k_star(out):
    print(*out)


SYNTAX_CASES = [
    (k_listcomp, "[i for i in range(3)]", kj.UnsupportedError, "list comprehensions"),
    (k_setcomp, "{i for i in range(3)}", kj.UnsupportedError, "set comprehensions"),
    (k_dictcomp, "{i: i for i in range(3)}", kj.UnsupportedError, "dict comprehensions"),
    (k_genexp, "(i for i in range(3))", kj.UnsupportedError, "generator expressions"),
    (k_with, "with open", kj.UnsupportedError, "'with'"),
    (k_try, "try:", kj.UnsupportedError, "'try'"),
    (k_lambda, "lambda v: v", kj.UnsupportedError, "lambda"),
    (k_class, "class Inner", kj.UnsupportedError, "class"),
    (k_generator, "yield out[0]", kj.UnsupportedError, "generators"),
    (k_yield_from, "yield from range(3)", kj.UnsupportedError, "generators"),
    (k_nested_def, "def inner", kj.UnsupportedError, "nested functions"),
    (k_string_var, '"hello"', kj.CompileError, "string"),
    (k_string_return_device, '"abc"', kj.CompileError, "string"),
    (k_fstring, 'f"{out[0]}"', kj.UnsupportedError, "f-strings"),
    (k_raise, "raise", kj.UnsupportedError, "a bare 'raise'"),
    (k_global, "global SOMETHING", kj.UnsupportedError, "'global'"),
    (k_slice, "1:2", kj.UnsupportedError, "assign to a slice"),
    (k_matmul, "out @ out", kj.UnsupportedError, "'@'"),
    (k_ellipsis, "...", kj.UnsupportedError, "Ellipsis"),
    (k_none, "None", kj.UnsupportedError, "None"),
    (k_in, "1 in out", kj.UnsupportedError, "'in'"),
    (k_walrus, "n := out.size", kj.UnsupportedError, "':='"),
    (k_star, "*out", kj.UnsupportedError, "starred"),
]


@pytest.mark.parametrize("fn, snippet, cls, words", SYNTAX_CASES, ids=lambda v: getattr(v, "__name__", None))
def test_unsupported_syntax_is_located(fn, snippet, cls, words):
    err = compile_error(fn, F1, cls)
    assert_located(err, fn, snippet)
    assert words in err.message


# --- issue 2: impossible types ---------------------------------------------------------------------


def k_undefined(out):
    out[0] = undefined_name + 1  # noqa: F821


def k_used_before_assignment(out, n):
    if n > 0:
        out[0] = later
    later = 1.0


def k_array_plus_string(out):
    out[0] = out + "x"


def k_array_plus_number(out):
    out[0] = out + 1


def k_scalar_then_array(out, n):
    x = 1.0
    if n > 0:
        x = out
    out[0] = 1


def k_loop_changes_to_tuple(out, n):
    x = 0
    for i in range(n):
        x = (x, i)
    out[0] = 1


def k_branches_differ(out, n):
    out[0] = out if n > 0 else 1.0


def k_return_value(out):
    return 1


def k_call_python(out):
    out[0] = plain_python(1)


def k_device_wrong_count(out):
    out[0] = add2(1.0)


def k_index_float(out):
    out[1.5] = 1


def k_too_many_indices(out):
    out[0, 1] = 1


def k_bad_attribute(out):
    out[0] = out.argsort()


def k_tuple_index_variable(out, n):
    t = (1, out)
    out[0] = t[n]


def k_bitwise_float(out):
    out[0] = out[0] & 1


def k_call_array(out):
    out[0] = out(1)


def k_numpy_function(out):
    out[0] = np.cumsum(out)


def k_global_ndarray(out):
    TABLE[0] = out[0]  # a global NumPy array is a constant of the kernel


TABLE = np.arange(4.0)

TYPE_CASES = [
    (k_undefined, F1, "undefined_name", kj.TypingError, "'undefined_name' is not defined"),
    (k_used_before_assignment, F1N, "later", kj.TypingError, "before it is assigned"),
    (k_array_plus_string, F1, "out + \"x\"", kj.TypingError, "array float32[::1] and a string"),
    (k_array_plus_number, F1, "out + 1", kj.TypingError, "unsupported operand"),
    (k_scalar_then_array, F1N, "x = out", kj.TypingError, "cannot be both float64 and"),
    (k_loop_changes_to_tuple, F1N, "x = (x, i)", kj.TypingError, "variable 'x' cannot be both"),
    (k_branches_differ, F1N, "out if n > 0 else 1.0", kj.TypingError, "cannot be both"),
    (k_return_value, F1, "return 1", kj.TypingError, "kernel cannot return a value"),
    (k_call_python, F1, "plain_python", kj.UnsupportedError, "kj.jit(device=True)"),
    (k_device_wrong_count, F1, "add2(1.0)", kj.TypingError, "takes 2 arguments"),
    (k_index_float, F1, "1.5", kj.TypingError, "index must be an integer"),
    (k_too_many_indices, F1, "out[0, 1]", kj.TypingError, "1-d array"),
    (k_bad_attribute, F1, "out.argsort", kj.TypingError, ".argsort"),
    (k_tuple_index_variable, F1N, "t[n]", kj.TypingError, "items of one type"),
    (k_bitwise_float, F1, "out[0] & 1", kj.TypingError, "needs integers"),
    (k_call_array, F1, "out(1)", kj.TypingError, "not callable"),
    (k_numpy_function, F1, "np.cumsum", kj.UnsupportedError, "numpy.cumsum"),
    (k_global_ndarray, F1, "TABLE", kj.TypingError, "cannot be written"),
]


@pytest.mark.parametrize("fn, sig, snippet, cls, words", TYPE_CASES,
                         ids=lambda v: getattr(v, "__name__", None))
def test_type_errors_are_located(fn, sig, snippet, cls, words):
    err = compile_error(fn, sig, cls)
    assert_located(err, fn, snippet)
    assert words in err.message


def k_two_params(out, n):
    out[0] = n


def test_signature_with_wrong_number_of_arguments_is_a_type_error():
    with pytest.raises(TypeError, match=r"k_two_params\(\) takes 2 arguments.*gives 3"):
        kj.compile_ptx(k_two_params, "void(float32[::1], int32, int32)")
    with pytest.raises(TypeError, match=r"takes 2 arguments.*gives 1"):
        kj.compile_ptx(k_two_params, F1)


def test_bad_signature_string_is_a_type_error():
    with pytest.raises(TypeError, match="unknown type 'float33'"):
        kj.compile_ptx(k_two_params, "void(float33[::1], int32)")


# --- issue 5: kernel-language breadth ---------------------------------------------------------------


def k_atomic_add(out):
    kj.atomic.add(out, 0, 1)


def k_atomic_and(out):
    kj.atomic.and_(out, 0, 1)


def k_atomic_inc(out):
    kj.atomic.inc(out, 0, 1)


def k_atomic_scalar(out, n):
    kj.atomic.add(n, 0, 1)


def k_shfl(out):
    out[0] = kj.shfl_sync(0xFFFFFFFF, out[0], 1)


def k_shfl_down(out):
    out[0] = kj.shfl_down_sync(0xFFFFFFFF, out, 1)


def k_shared_dynamic_shape(out, n):
    s = kj.shared.array(n, kj.float32)
    out[0] = s[0]


def k_shared_float_shape(out):
    s = kj.shared.array(2.5, kj.float32)
    out[0] = s[0]


def k_shared_bad_dtype(out):
    s = kj.shared.array(16, "float33")
    out[0] = s[0]


def k_local_zero(out):
    s = kj.local.array(0, kj.float32)
    out[0] = s[0]


def k_math_on_array(out):
    out[0] = math.sqrt(out)


def k_math_on_string(out):
    out[0] = math.exp("1")


def k_popc_float(out):
    out[0] = kj.popc(out[0])


def k_grid_four(out):
    i = kj.grid(4)
    out[0] = 1


def k_print_array(out):
    print("value", out)


BREADTH_CASES = [
    (k_atomic_add, "void(int8[::1])", "out, 0, 1", "kj.atomic.add() is not supported on int8"),
    (k_atomic_add, "void(float16[::1])", "out, 0, 1", "not supported on float16"),
    (k_atomic_and, F1, "out, 0, 1", "kj.atomic.and_() is not supported on float32"),
    (k_atomic_inc, "void(int32[::1])", "out, 0, 1", "uint32 or uint64"),
    (k_atomic_scalar, F1N, "n, 0, 1", "needs an array"),
    (k_shfl, "void(float16[::1])", "out[0], 1)", "kj.shfl_sync() cannot shuffle float16"),
    (k_shfl_down, F1, "out, 1)", "kj.shfl_down_sync() needs a number"),
    (k_shared_dynamic_shape, F1N, "n, kj.float32", "constant integer"),
    (k_shared_float_shape, F1, "2.5", "constant integer"),
    (k_shared_bad_dtype, F1, '"float33"', "Invalid NumPy dtype"),
    (k_local_zero, F1, "0, kj.float32", "no zero dimension"),
    (k_math_on_array, F1, "out)", "math.sqrt() needs a number"),
    (k_math_on_string, F1, '"1"', "math.exp() needs a number"),
    (k_popc_float, F1, "out[0])", "kj.popc() needs an integer"),
    (k_grid_four, F1, "4", "1, 2 or 3"),
    (k_print_array, F1, "out)", "print() takes scalars"),
]


@pytest.mark.parametrize("fn, sig, snippet, words", BREADTH_CASES,
                         ids=lambda v: getattr(v, "__name__", None))
def test_breadth_errors_are_located(fn, sig, snippet, words):
    err = compile_error(fn, sig, kj.TypingError)
    assert_located(err, fn, snippet)
    assert words in err.message


# --- no kaiojit frames at any public entry point -----------------------------------------------------


def k_late_error(out):
    out[0] = out + "x"


def test_eager_decoration_raises_without_internal_frames():
    with pytest.raises(kj.TypingError) as info:
        kj.jit(F1)(k_late_error)
    assert_located(info.value, k_late_error, 'out + "x"')


def test_annotated_eager_decoration_raises_located():
    def annotated(out: kj.float32[::1]):
        out[0] = out + "x"
    with pytest.raises(kj.TypingError) as info:
        kj.jit(annotated)
    assert_located(info.value, annotated, 'out + "x"')


def test_dispatcher_compile_raises_without_internal_frames():
    disp = kj.jit(k_late_error)
    with pytest.raises(kj.TypingError) as info:
        disp.compile(F1)
    assert_located(info.value, k_late_error, 'out + "x"')
    with pytest.raises(kj.TypingError) as info:
        disp.inspect_ptx(F1)
    assert_located(info.value, k_late_error, 'out + "x"')


def test_compile_llvm_raises_without_internal_frames():
    with pytest.raises(kj.TypingError) as info:
        kj.compile_llvm(k_late_error, F1)
    assert_located(info.value, k_late_error, 'out + "x"')


@kj.jit(device=True)
def bad_device(x):
    return x + "s"


def k_calls_bad_device(out):
    out[0] = bad_device(out[0])


def test_error_inside_device_function_points_into_it():
    err = compile_error(k_calls_bad_device, F1, kj.TypingError)
    assert_located(err, bad_device.py_func, 'x + "s"')


def test_device_function_inspection_raises_without_internal_frames():
    with pytest.raises(kj.TypingError) as info:
        bad_device.inspect_kir("float32(float32)")
    assert_located(info.value, bad_device.py_func, 'x + "s"')


@kj.jit(device=True)
def recursive(n):
    return recursive(n - 1) if n > 0 else n


def k_recursion(out):
    out[0] = recursive(3)


def test_recursion_is_a_located_error():
    err = compile_error(k_recursion, F1, kj.TypingError)
    assert "recursion" in err.message
    assert_located(err, recursive.py_func, "recursive(n - 1)")


def test_launching_a_device_function_or_calling_a_kernel_is_a_type_error():
    with pytest.raises(TypeError, match="can only be called from a kernel"):
        add2(1, 2)
    with pytest.raises(TypeError, match=r"k_two_params\[grid, block\]"):
        kj.jit(k_two_params)(1, 2)


def test_unknown_jit_option_is_a_type_error():
    with pytest.raises(TypeError, match="fast_math"):
        kj.jit(fast_math=True)


def test_error_message_has_no_internal_file_names():
    err = compile_error(k_undefined, F1, kj.TypingError)
    assert_no_internals(err)
    assert "typer.py" not in str(err) and "builtins.py" not in str(err)
