"""Mistakes real users make that kaiojit handled badly (issue 36's battery): each gives a clear
error naming what was given and what is accepted, with the user's frames only."""

from __future__ import annotations

import inspect
import os
import traceback

import numpy as np
import pytest

import kaiojit as kj
from tests.located import KAIOJIT_DIR, assert_no_internals

rng = np.random.default_rng()


@kj.jit
def doubles(out, x):
    i = kj.grid(1)
    out[i] = x[i] * 2.0


def _kaiojit_frames(err: BaseException) -> list[str]:
    return [f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(err.__traceback__)
            if os.path.abspath(f.filename).startswith(KAIOJIT_DIR)]


def test_writing_a_read_only_numpy_array_is_refused_before_the_launch(kj_backend):
    """Its writes could not be copied back (they were silently dropped): a ValueError naming
    the parameter, raised before the kernel runs. Reading a read-only array stays fine."""
    x = rng.random(64)
    x.flags.writeable = False
    out = np.full(64, np.nan)
    doubles[1, 64](out, x)
    np.testing.assert_array_equal(out, x * 2.0)
    frozen = np.full(64, np.nan)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"parameter 'out': the kernel writes this array, and "
                                         r"the NumPy array passed is read-only") as info:
        doubles[1, 64](frozen, x)
    assert np.isnan(frozen).all()
    assert_no_internals(info.value)


@kj.jit
def writes_through_an_atomic(counts, x):
    kj.atomic.add(counts, 0, x[kj.grid(1)])


def test_a_parameter_written_by_an_atomic_counts_as_written(kj_backend):
    counts = np.zeros(1)
    counts.flags.writeable = False
    with pytest.raises(ValueError, match="parameter 'counts'"):
        writes_through_an_atomic[1, 32](counts, rng.random(32))


def test_compile_ptx_refuses_an_unknown_arch():
    with pytest.raises(ValueError, match=r"arch 'sm_999' is not a GPU architecture .* sm_90, "
                                         r"sm_100") as info:
        kj.compile_ptx(doubles, "void(float64[::1], float64[::1])", arch="sm_999")
    assert_no_internals(info.value)
    for bad in ("sm_80a", "90", "sm_9o", "gfx90a"):
        with pytest.raises(ValueError, match="is not a GPU architecture"):
            kj.compile_llvm(doubles, "void(float64[::1], float64[::1])", arch=bad)
    assert ".target sm_90a" in kj.compile_ptx(doubles, "void(float64[::1], float64[::1])",
                                              arch="sm_90a")


@pytest.mark.parametrize("stream", ["stream", 1.5, True, b"0", [0]])
def test_a_launch_stream_that_is_no_stream_is_a_type_error(kj_backend, stream):
    out = np.full(64, np.nan)
    with pytest.raises(TypeError, match=r"the launch stream must be a kj.Stream, an integer "
                                        r"handle .* got ") as info:
        doubles[1, 64, stream](out, rng.random(64))
    assert np.isnan(out).all()
    assert_no_internals(info.value)


def test_a_non_type_annotation_is_rejected_naming_the_parameter():
    def scale(out, n: "hello"):  # noqa: F821, UP037
        out[0] = n

    with pytest.raises(kj.TypingError) as info:
        kj.jit(scale)
    _assert_on_def_line(info.value, scale, '"hello"')
    assert "parameter 'n' is annotated with 'hello', which is not a type" in str(info.value)

    def typed(out, n: "kj.int64", m: int,  # noqa: UP037
              k: kj.constexpr, x: "float64[::1]"):  # noqa: F821, UP037
        out[0] = n + m + k + x[0]

    kj.jit(typed)  # kaiojit types, Python types and constexpr are annotations it takes


def test_keyword_only_parameters_name_the_users_def():
    def scale(out, *, n):
        out[0] = n

    with pytest.raises(kj.UnsupportedError) as info:
        kj.jit(scale)
    _assert_on_def_line(info.value, scale, "def scale")
    assert "plain positional parameters only" in str(info.value)
    assert "Launcher" not in str(info.value)


def _assert_on_def_line(err: BaseException, fn, snippet: str) -> None:
    """``err`` names file:line:col of ``snippet`` on ``fn``'s ``def`` line, shows the line
    with a caret under it, and no kaiojit frame but the entry point's."""
    code = fn.__code__
    line = inspect.getsourcelines(fn)[0][0]
    col = line.index(snippet) + 1
    head, src_line, caret = str(err).split("\n")
    assert head.startswith(f"{code.co_filename}:{code.co_firstlineno}:{col}: "), head
    assert src_line.strip() == line.strip()
    assert src_line[caret.index("^"):].startswith(snippet)
    assert_no_internals(err)


def test_launch_errors_chain_nothing_and_show_the_users_frames(kj_backend):
    """A LaunchError came with an internal KeyError chained in front ("During handling of the
    above exception ...") and kaiojit's frames under it."""
    out, x = np.full(64, np.nan), rng.random(64)
    for config in [(1, 2000), (0, 64), (-1, 64), ((1, 1, 1, 1), 64), (1, 64, 0, 10**9)]:
        with pytest.raises(kj.LaunchError) as info:
            doubles[config](out, x)
        err = info.value
        assert err.__context__ is None or err.__suppress_context__, config
        assert err.__cause__ is None
        assert len(_kaiojit_frames(err)) <= 1, (config, _kaiojit_frames(err))
    with pytest.raises(TypeError, match="parameter 'x'") as info:
        doubles[1, 64](out, "not an array")
    assert len(_kaiojit_frames(info.value)) <= 1
    assert np.isnan(out).all()
