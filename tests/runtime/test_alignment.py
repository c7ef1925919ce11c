"""Alignment specialization (arrays whose pointer and row strides are multiples of 16 bytes)
and the fast launch of foreign arrays: PyTorch-like objects fall back to the general path when
their device, dtype or contiguity changes between calls."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.native.fastlaunch import source_of
from tests.runtime.fake_arrays import TORCH_DTYPES, Tensor


def saxpy4_py(out, x, y, a, n):
    i = kj.grid(1) * 4
    if i + 3 < n:
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        out[i] = a * x0 + y[i]
        out[i + 1] = a * x1 + y[i + 1]
        out[i + 2] = a * x2 + y[i + 2]
        out[i + 3] = a * x3 + y[i + 3]
    else:
        for k in range(4):
            if i + k < n:
                out[i + k] = a * x[i + k] + y[i + k]


@pytest.fixture
def cpu():
    previous = set_backend("cpu")
    yield
    set_backend(previous)


def test_aligned_and_unaligned_specializations_both_correct(cpu):
    rng = np.random.default_rng()
    k = kj.jit(saxpy4_py)
    n = int(rng.integers(40, 90)) * 4
    hx, hy = rng.standard_normal(n + 1, np.float32), rng.standard_normal(n + 1, np.float32)
    a = np.float32(rng.uniform(0.5, 2.0))
    x, y = kj.to_device(hx), kj.to_device(hy)
    for off in (0, 1):  # the whole arrays, then sliced off by one element (4 bytes: unaligned)
        xs, ys = x[off:off + n], y[off:off + n]
        out = kj.to_device(np.full(n + 1, np.nan, np.float32))[off:off + n]
        assert (xs.kaiojit_type.align, out.kaiojit_type.align) == ((0, 0) if off else (16, 16))
        k[(n // 4 + 63) // 64, 64](out, xs, ys, a, np.int64(n))
        # a fused multiply-add rounds once: compare with a small absolute tolerance too
        np.testing.assert_allclose(out.copy_to_host(), a * hx[off:off + n] + hy[off:off + n],
                                   rtol=1e-5, atol=1e-6)
    sigs = sorted(str(s) for s in k.signatures)
    assert sigs == ["void(float32[::1, align=16], float32[::1, align=16], "
                    "float32[::1, align=16], float32, int64)",
                    "void(float32[::1], float32[::1], float32[::1], float32, int64)"]


def test_2d_row_stride_decides_alignment(cpu):
    rng = np.random.default_rng()

    @kj.jit
    def scale(out, m, f):
        i, j = kj.grid(2)
        if i < m.shape[0] and j < m.shape[1]:
            out[i, j] = m[i, j] * f
    for cols, aligned in ((8, True), (7, False)):
        host = rng.standard_normal((5, cols)).astype(np.float32)
        m = kj.to_device(host)
        out = kj.to_device(np.full_like(host, np.nan))
        assert bool(m.kaiojit_type.align) is aligned
        scale[(1, 1), (8, 8)](out, m, np.float32(3.0))
        np.testing.assert_array_equal(out.copy_to_host(), host * np.float32(3.0))
    assert "float32[:, ::1, align=16]" in {str(a) for s in scale.signatures for a in s.args}


def test_aligned_ptx_has_128_bit_accesses_unaligned_has_none():
    k = kj.jit(saxpy4_py)
    widths = {}
    for al in ("", ", align=16"):
        sig = f"void(float32[::1{al}], float32[::1{al}], float32[::1{al}], float32, int64)"
        ptx = k.inspect_ptx(sig)
        widths[al] = (len(re.findall(r"ld\.global(?:\.nc)?\.v4", ptx)),
                      len(re.findall(r"st\.global\.v4", ptx)))
        assert ("align 16" in k.inspect_llvm(sig)) == bool(al)
    assert widths[""] == (0, 0)
    assert widths[", align=16"] == (2, 1)


def test_align_spelling_parses_and_misplaced_align_is_refused():
    t = kj.types.parse_type("float32[:, ::1, align=16]")
    assert t.align == 16 and t.layout == "C" and str(t) == "float32[:, ::1, align=16]"
    with pytest.raises(ValueError, match="comes last"):
        kj.types.parse_type("float32[:, align=16, ::1]")
    with pytest.raises(ValueError, match="bad array dimension 'align=8'"):
        kj.types.parse_type("float32[:, align=8]")


# --- foreign arrays on the fast path (fakes of torch.Tensor on the mock backend) ------------------

F32, F64 = TORCH_DTYPES[np.dtype(np.float32)], TORCH_DTYPES[np.dtype(np.float64)]


def test_torch_like_fast_path_and_fallbacks(mock2):
    rng = np.random.default_rng()

    @kj.jit
    def k(out, x, a):
        i = kj.grid(1)
        if i < x.shape[0]:
            out[i] = x[i] * a

    def tensor(n, dtype=np.float32, **kw):
        return Tensor(kj.to_device(rng.standard_normal(n).astype(dtype)),
                      F64 if dtype == np.float64 else F32, **kw)
    out, x = tensor(64), tensor(64)
    launcher = k[1, 64]
    launcher(out, x, np.float32(2.0))
    assert launcher.fast is not None
    x2 = tensor(64)
    launcher(out, x2, np.float32(3.0))
    assert mock2.fast_launches == 1
    params = mock2.launches[-1].params
    assert params[2] == x2.array.ptr.to_bytes(8, "little") and params[3] == (64).to_bytes(8, "little")
    x2.device = 1  # moved to another device: the general path refuses it, naming the devices
    with pytest.raises(TypeError, match=r"parameter 'x': the array is on device 1, the launch is "
                                        r"on device 0"):
        launcher(out, x2, np.float32(3.0))
    assert mock2.fast_launches == 1
    x2.device = 0
    x2.dtype, x2.array = F64, kj.to_device(rng.standard_normal(64))  # another dtype
    launcher(out, x2, np.float32(3.0))
    assert mock2.fast_launches == 1 and len(k.signatures) == 2
    xs = tensor(65)
    xs.array = xs.array[1:]  # off by one element: unaligned, another specialization
    launcher(out, xs, np.float32(3.0))
    assert "float32[::1]" in {str(a) for s in k.signatures for a in s.args}
    assert mock2.launches[-1].params[2] == xs.array.ptr.to_bytes(8, "little")
    strided = tensor(128)
    strided.array, strided.contiguous = strided.array[::2], False  # no longer contiguous
    launcher(out, strided, np.float32(3.0))
    assert "float32[:, align=16]" in {str(a) for s in k.signatures for a in s.args}
    assert mock2.launches[-1].params[4] == (8).to_bytes(8, "little")  # its stride in bytes


def test_torch_like_conjugate_views_are_refused_on_either_path(mock2):
    """A lazy ``x.conj()`` view's memory holds the unconjugated values: the general path
    refuses it, naming the parameter, and the fast form built for a plain tensor of the same
    dtype hands it to the general path."""
    rng = np.random.default_rng()

    @kj.jit
    def twice(out, x):
        i = kj.grid(1)
        if i < x.shape[0]:
            out[i] = x[i] * 2

    def tensor(n):
        z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        return Tensor(kj.to_device(z.astype(np.complex64)))
    n = int(rng.integers(10, 60))
    out, x = tensor(n), tensor(n)
    lazy = tensor(n)
    lazy.conj = True
    message = (r"twice\(\): parameter 'x': a PyTorch tensor with its conjugate or negative bit "
               r"set \(a lazy view such as x.conj\(\)\); pass x.resolve_conj\(\)")
    with pytest.raises(TypeError, match=message):
        twice[1, n](out, lazy)
    twice[1, n](out, x)
    twice[1, n](out, x)
    assert mock2.fast_launches == 1 and "not a1.is_conj()" in source_of(twice[1, n])
    with pytest.raises(TypeError, match="parameter 'x': a PyTorch tensor with its conjugate"):
        twice[1, n](out, lazy)
    assert mock2.fast_launches == 1
