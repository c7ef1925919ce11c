"""Bad arguments below the dispatcher: each is refused with a message naming the argument, and
the traceback holds the user's frames only (kaiojit's entry frame, hidden from pytest by
``__tracebackhide__``, is the one frame of kaiojit's left): launch configurations, arguments,
streams, ``forall``, the cooperative-grid query, making and copying device arrays, and the AOT
loader's kernels."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import aot
from kaiojit.errors import KAIOJIT_DIR
from kaiojit.runtime.backend import set_backend

rng = np.random.default_rng()


@kj.jit
def copy(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i]


@kj.jit("void(float32[::1], float32[::1], int32)")
def copy_eager(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i]


@pytest.fixture(scope="module")
def arrays():
    previous = set_backend("cpu")
    a = kj.to_device(rng.standard_normal(8, np.float32))
    yield a
    set_backend(previous)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, arrays):
    out = str(tmp_path_factory.mktemp("frames"))
    aot.export(out, {copy: ["void(float32[::1], float32[::1], int64)"]}, target="host")
    return aot.load(out)


def visible_kaiojit_frames(err: BaseException) -> list[str]:
    """kaiojit's frames in ``err``'s traceback, less an entry frame hidden from pytest."""
    out = []
    tb = err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.startswith(KAIOJIT_DIR) and \
                not frame.f_locals.get("__tracebackhide__"):
            out.append(f"{frame.f_code.co_filename}:{tb.tb_lineno}")
        tb = tb.tb_next
    return out


CASES = {
    "grid of a string": (lambda a, m: copy["a", 8](a, a, 8), kj.LaunchError,
                         r"kernel 'copy': grid must be an int or a tuple of 1 to 3 ints, "
                         r"got 'a'"),
    "a block of four dimensions": (lambda a, m: copy[1, (1, 2, 3, 4)](a, a, 8), kj.LaunchError,
                                   r"block must be an int or a tuple of 1 to 3 ints"),
    "negative shared memory": (lambda a, m: copy[1, 8, 0, -5](a, a, 8), kj.LaunchError,
                               r"shared memory must be >= 0 bytes, got -5"),
    "one-element configuration": (lambda a, m: copy[1](a, a, 8), TypeError,
                                  r"launch configuration is kernel\[grid, block\]"),
    "a string as the stream": (lambda a, m: copy[1, 8, "s"](a, a, 8), TypeError,
                               r"the launch stream must be a kj\.Stream.*got str 's'"),
    "an object as the stream": (lambda a, m: copy[1, 8, object()](a, a, 8), TypeError,
                                r"the launch stream must be a kj\.Stream.*got object"),
    "too many arguments": (lambda a, m: copy[1, 8](a, a, 8, 9), TypeError,
                           r"copy\(\) takes 3 arguments \(out, x, n\), got 4"),
    "a string argument": (lambda a, m: copy[1, 8](a, "x", 8), TypeError,
                          r"copy\(\): parameter 'x': kaiojit cannot pass an object of type "
                          r"builtins\.str"),
    "an object array": (lambda a, m: copy[1, 8](a, np.array([None] * 8), 8), TypeError,
                        r"copy\(\): parameter 'x': kaiojit has no scalar type for dtype "
                        r"object"),
    "the wrong dtype for an eager kernel": (
        lambda a, m: copy_eager[1, 8](a, kj.to_device(np.zeros(8)), 8), TypeError,
        r"copy_eager was compiled for void\(float32\[::1\], float32\[::1\], int32\); no "
        r"signature accepts"),
    "forall of a string": (lambda a, m: copy.forall("x")(a, a, 8), kj.LaunchError,
                           r"kernel 'copy': forall\(n\): n is the number of threads, an int; "
                           r"got str 'x'"),
    "a cooperative grid query with a bad block": (
        lambda a, m: copy.max_cooperative_grid_blocks("x"), kj.LaunchError,
        r"kernel 'copy': block must be an int or a tuple of 1 to 3 ints, got 'x'"),
    "to_device of strings": (lambda a, m: kj.to_device(np.array(["abc"])), TypeError,
                             r"to_device: the array has dtype <U3: kaiojit has no scalar type"),
    "device_array of a negative shape": (lambda a, m: kj.device_array((-1,), np.float32),
                                         ValueError, r"shape \(-1,\) has a negative dimension"),
    "device_array of no dtype": (lambda a, m: kj.device_array(4, "nope"), TypeError,
                                 r"device_array: dtype 'nope' is not a NumPy dtype"),
    "copy_to_host into the wrong shape": (lambda a, m: a.copy_to_host(np.zeros(3)), ValueError,
                                          r"copy_to_host: out is \(3,\) float64, this array "
                                          r"is \(8,\) float32"),
    "an exported kernel with too few arguments": (
        lambda a, m: m.copy[1, 8](a, a), TypeError,
        r"copy\(\) takes 3 arguments \(out, x, n\), got 2"),
    "an exported kernel with a bad stream": (
        lambda a, m: m.copy[1, 8, "s"](a, a, np.int64(8)), TypeError,
        r"the launch stream must be a kj\.Stream"),
    "an exported kernel with an unexported dtype": (
        lambda a, m: m.copy.launch(a, kj.to_device(np.zeros(8)), np.int64(8), grid=1,
                                   block=8), TypeError,
        r"copy was exported for void\(float32\[::1\], float32\[::1\], int64\); none accepts"),
    "an exported kernel with a bad grid": (
        lambda a, m: m.copy[1.5, 8](a, a, np.int64(8)), kj.LaunchError,
        r"grid must be an int or a tuple of 1 to 3 ints, got 1\.5"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_argument_is_named_at_the_users_line(case, arrays, exported):
    call, error, message = CASES[case]
    with pytest.raises(error, match=message) as info:
        call(arrays, exported)
    assert visible_kaiojit_frames(info.value) == []
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(f.filename == __file__ for f in frames)  # the user's frame is there
