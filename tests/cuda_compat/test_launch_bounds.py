"""``launch_bounds=`` (numba's, CUDA C's ``__launch_bounds__``): PTX's .maxntid,
.minnctapersm and .maxclusterrank; a launch of a bigger block is a LaunchError naming the
bound, raised before the driver would refuse it.
``shared_memory_carveout=`` is checked as numba checks it."""

import traceback

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda
from tests.located import assert_no_internals

rng = np.random.default_rng()


def fill(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


def test_directives_in_ptx():
    bound = int(rng.integers(1, 9)) * 32
    ptx, _ = cuda.compile_ptx(fill, "void(int32[:])", launch_bounds=(bound, 2, 4))
    assert f".maxntid {bound}, 1, 1\n" in ptx
    assert ".minnctapersm 2\n" in ptx and ".maxclusterrank 4\n" in ptx
    plain = kj.compile_ptx(fill, "void(int32[:])")
    assert ".maxntid" not in plain and ".minnctapersm" not in plain
    only = kj.compile_ptx(fill, "void(int32[:])", launch_bounds=bound)
    assert f".maxntid {bound}, 1, 1" in only and ".minnctapersm" not in only


def test_launch_above_the_bound_fails(kj_backend):
    bounded = cuda.jit(launch_bounds=64)(fill)
    out = kj.to_device(np.full(64, -1, np.int32))
    bounded[1, 64](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(64))
    with pytest.raises(kj.LaunchError, match=r"^kernel 'fill': block \(128, 1, 1\) has 128 "
                                            r"threads; this kernel can run at most 64 per block "
                                            r"\(its launch_bounds\)$") as info:
        bounded[1, 128](out)  # refused before the driver would (CUDA_ERROR_INVALID_VALUE)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[0].filename == __file__ and "bounded[1, 128](out)" in frames[0].line
    assert_no_internals(info.value)


@pytest.mark.parametrize("bad, error, text", [
    ((128, 2, 4, 8), ValueError, "Got 4 launch bounds"),
    (0, ValueError, "positive integers"),
])
def test_bad_bounds(bad, error, text):
    with pytest.raises(error, match=text):
        cuda.jit("void(int32[:])", launch_bounds=bad)


@pytest.mark.parametrize("carveout, text", [
    (150, "must be between -1 and 100"), (-2, "must be between -1 and 100"),
    ("InvalidOption", "Invalid carveout value"),
])
def test_bad_carveout(carveout, text):
    with pytest.raises(ValueError, match=text):
        cuda.jit(shared_memory_carveout=carveout)(fill)
    for good in ("MaxL1", "MaxShared", "default", 0, 50, 100, -1):
        cuda.jit(shared_memory_carveout=good)(fill)
