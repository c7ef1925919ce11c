"""numba's ``cuda.match_any_sync`` and ``cuda.match_all_sync`` (issue 28: missing), and the
vote functions' checks of their mask and predicate types (a float mask or predicate was
converted silently; numba refuses it)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.errors import TypingError

rng = np.random.default_rng()


def match_any(values, out):
    i = cuda.grid(1)
    if i < values.size:
        out[i] = cuda.match_any_sync(0xFFFFFFFF, values[i])


def match_all(values, out, preds):
    i = cuda.grid(1)
    if i < values.size:
        m, p = cuda.match_all_sync(0xFFFFFFFF, values[i])
        out[i] = m
        preds[i] = p


def match_any_even_lanes(values, out):
    i = cuda.grid(1)
    if i % 2 == 0:  # odd lanes inactive: they neither match nor are matched
        out[i] = cuda.match_any_sync(0x55555555, values[i])


def float_mask(mask, pred, out):
    i = cuda.grid(1)
    out[i] = cuda.all_sync(mask[i], pred[i])


def _expected_any(values: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    out = np.zeros(values.size, np.uint32)
    for i in lanes:
        w = i - i % 32
        for j in lanes:
            if j // 32 == i // 32 and values[j] == values[i]:
                out[i] |= np.uint32(1 << (j - w))
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.float64, np.float32])
def test_match_any_sync(kj_backend, dtype):
    n = int(rng.integers(40, 64))  # a full warp and a partial one
    values = rng.integers(0, 4, n).astype(dtype)
    out = cuda.to_device(np.full(n, 0xDEAD, np.uint32))
    cuda.jit(match_any)[1, n](cuda.to_device(values), out)
    np.testing.assert_array_equal(out.copy_to_host(), _expected_any(values, np.arange(n)))


def test_match_any_sync_skips_inactive_lanes(kj_backend):
    values = rng.integers(0, 3, 32).astype(np.int64)
    out = cuda.to_device(np.full(32, 0xDEAD, np.uint32))
    cuda.jit(match_any_even_lanes)[1, 32](cuda.to_device(values), out)
    got = out.copy_to_host()
    want = _expected_any(values, np.arange(0, 32, 2))
    np.testing.assert_array_equal(got[::2], want[::2])
    assert (got[1::2] == 0xDEAD).all()


def test_match_all_sync(kj_backend):
    n = int(rng.integers(10, 32))
    same = np.full(n, rng.integers(-50, 50), np.int32)
    out = cuda.to_device(np.full(n, 0xDEAD, np.uint32))
    preds = cuda.to_device(np.zeros(n, np.bool_))
    kernel = cuda.jit(match_all)
    kernel[1, n](cuda.to_device(same), out, preds)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(n, (1 << n) - 1, np.uint32))
    assert preds.copy_to_host().all()
    differ = same.copy()
    differ[rng.integers(0, n)] += 1
    preds = cuda.to_device(np.ones(n, np.bool_))
    kernel[1, n](cuda.to_device(differ), out, preds)
    np.testing.assert_array_equal(out.copy_to_host(), np.zeros(n, np.uint32))
    assert not preds.copy_to_host().any()


@pytest.mark.parametrize("sig, message, col", [
    ("void(float32[:], int32[:], int32[:])", "Mask type must be an integer, got float32", 28),
    ("void(boolean[:], int32[:], int32[:])", "Mask type must be an integer, got bool", 28),
    ("void(int32[:], float64[:], int32[:])", "Predicate must be an integer or boolean", 37),
])
def test_vote_refuses_float_masks_and_predicates(sig, message, col):
    with pytest.raises(TypingError, match=message) as info:
        cuda.jit(sig)(float_mask)
    line = float_mask.__code__.co_firstlineno + 2
    assert f"test_warp_match.py:{line}:{col}:" in str(info.value)


def test_match_needs_a_comparable_value():
    def tuple_value(out):
        out[0] = cuda.match_any_sync(0xFFFFFFFF, (1, 2))

    with pytest.raises(TypingError, match=r"match_any_sync\(\)"):
        cuda.jit("void(uint32[:])")(tuple_value)


def test_match_ptx():
    ptx_any, _ = cuda.compile_ptx(match_any, "void(float64[:], uint32[:])")
    assert "match.any.sync.b64" in ptx_any
    ptx_all, _ = cuda.compile_ptx(match_all, "void(int32[:], uint32[:], boolean[:])")
    assert "match.all.sync.b32" in ptx_all
