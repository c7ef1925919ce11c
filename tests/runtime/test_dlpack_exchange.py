"""The native array reader of the launch fast form (DLPack's C exchange API): what it writes,
what it refuses, and the fast form that uses it, on real PyTorch tensors (CPU ones, read
directly) and on the mock backend with a tensor class that publishes the API."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as kt
from kaiojit.runtime.dlpack import K_DL_CPU
from kaiojit.runtime.native import dlpack_exchange as dx
from kaiojit.runtime.native.fastlaunch import source_of
from tests.runtime.fake_arrays import ExchangeTensor, Tensor

F32, F64 = kt.SCALARS["float32"], kt.SCALARS["float64"]
POISON = b"\xa5" * 8


class Buffer:
    """A poisoned parameter buffer and a reader of CPU tensors writing into it."""

    def __init__(self, cls, arrays):
        self.raw = ctypes.create_string_buffer(POISON * 16)
        self.read = dx.reader([dx.ArrayRead(cls, *a) for a in arrays], ctypes.addressof(self.raw),
                              0, self.raw, device_type=K_DL_CPU)

    def words(self, offset: int, n: int) -> tuple:
        return struct.unpack_from(f"<Q{n - 1}q", self.raw, offset)


def test_torch_tensors_are_read_into_the_buffer():
    torch = pytest.importorskip("torch")
    if dx.export_function(torch.Tensor) is None:
        pytest.skip("this PyTorch publishes no DLPack exchange API")
    gen = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 31)))
    rows, cols = (int(v) for v in torch.randint(2, 40, (2,), generator=gen))
    cols *= 4  # a row of float32 a multiple of 16 bytes
    x = torch.randn(int(torch.randint(5, 999, (1,), generator=gen)), generator=gen)
    m = torch.randn(rows, cols, dtype=torch.float64, generator=gen)
    buf = Buffer(torch.Tensor, [(1, F32, True, 0), (2, F64, True, 16)])
    assert buf.read(x, m) is True
    assert buf.words(0, 2) == (x.data_ptr(), x.shape[0])
    assert buf.words(16, 3) == (m.data_ptr(), rows, cols)
    assert buf.raw.raw[40:48] == POISON  # nothing past the last extent
    # an extent-1 dimension may have any stride (Tensor.is_contiguous() says the same)
    odd = torch.randn(3 * cols, dtype=torch.float64, generator=gen).as_strided((1, cols), (7, 1))
    assert odd.is_contiguous() and buf.read(x, odd) is True
    assert buf.words(16, 3) == (odd.data_ptr(), 1, cols)


def test_the_torch_reader_refuses_what_the_specialization_does_not_cover():
    torch = pytest.importorskip("torch")
    if dx.export_function(torch.Tensor) is None:
        pytest.skip("this PyTorch publishes no DLPack exchange API")
    x, m = torch.randn(64), torch.randn(8, 4, dtype=torch.float64)
    buf = Buffer(torch.Tensor, [(1, F32, True, 0), (2, F64, True, 16)])
    assert buf.read(x, m) is True
    refused = {
        "unaligned pointer": (x[1:], m),
        "unaligned rows": (x, torch.randn(8, 5, dtype=torch.float64)[:, :3]),
        "not contiguous": (x[::2], m),
        "transposed": (x, torch.randn(4, 8, dtype=torch.float64).t()),
        "another rank": (m.float(), m),
        "another dtype": (x.double(), m),
        "another class": (torch.nn.Parameter(x), m),
        "not an array": (x, 3),
    }
    for what, args in refused.items():
        assert buf.read(*args) is False, what
    assert buf.read(x) is False and buf.read(x, m, m) is False  # another count
    cuda_side = dx.reader([dx.ArrayRead(torch.Tensor, 1, F32, True, 0)],
                          ctypes.addressof(buf.raw), 0, buf.raw)  # expects kDLCUDA, device 0
    assert cuda_side(x) is False
    # the unaligned specialization takes only unaligned arrays, as the general path picks
    unaligned = Buffer(torch.Tensor, [(1, F32, False, 0)])
    assert unaligned.read(x) is False and unaligned.read(x[1:]) is True
    assert unaligned.words(0, 2) == (x[1:].data_ptr(), 63)


def test_dtype_words_follow_dlpack():
    assert dx.dtype_word(F32) == 2 | 32 << 8 | 1 << 16
    assert dx.dtype_word(kt.SCALARS["bfloat16"]) == 4 | 16 << 8 | 1 << 16
    assert dx.dtype_word(kt.SCALARS["complex64"]) == 5 | 64 << 8 | 1 << 16
    assert dx.dtype_word(kt.SCALARS["bool"]) == 6 | 8 << 8 | 1 << 16
    assert dx.dtype_word(kt.SCALARS["uint16"]) == 1 | 16 << 8 | 1 << 16
    assert dx.dtype_word(kt.SCALARS["int8"]) == 0 | 8 << 8 | 1 << 16


def test_only_a_class_that_defines_the_api_is_read_natively():
    class Sub(ExchangeTensor):  # inherits the attribute: keeps the attribute reads
        pass
    assert dx.export_function(ExchangeTensor) is not None
    assert dx.export_function(Sub) is None and dx.export_function(Tensor) is None
    with pytest.raises(ValueError, match="Sub publishes no DLPack exchange API"):
        dx.reader([dx.ArrayRead(Sub, 1, F32, True, 0)], 0, 0)


# --- the fast form over a class with the API, on the mock backend --------------------------------


def test_fast_form_reads_exchange_tensors_natively_and_falls_back(mock2):
    rng = np.random.default_rng()

    @kj.jit
    def scale(out, x, a, n):
        i = kj.grid(1)
        if i < n:
            out[i] = x[i] * a

    def tensor(n, dtype=np.float32):
        return ExchangeTensor(kj.to_device(rng.standard_normal(n).astype(dtype)))
    n = int(rng.integers(100, 900))
    out, x = tensor(n), tensor(n)
    launcher = scale[(n + 63) // 64, 64]
    launcher(out, x, np.float32(2.0), np.int32(n))
    fast = launcher.fast
    assert fast is not None and "READ(a0, a1)" in source_of(fast)
    assert ".data_ptr()" not in source_of(fast)

    x2, a = tensor(n), float(rng.uniform(-3, 3))
    exports = x2.exports
    launcher(out, x2, np.float32(a), np.int32(n))
    assert mock2.fast_launches == 1 and x2.exports == exports + 1
    params = mock2.launches[-1].params
    assert params[0] == out.array.ptr.to_bytes(8, "little")
    assert params[2] == x2.array.ptr.to_bytes(8, "little")
    assert params[3] == n.to_bytes(8, "little")
    assert struct.unpack("<f", params[4][:4])[0] == np.float32(a)
    assert params[5][:4] == n.to_bytes(4, "little")

    x2.device = 1  # on another device: the native read misses, the general path refuses it
    with pytest.raises(TypeError, match=r"parameter 'x': the array is on device 1, the launch is "
                                        r"on device 0"):
        launcher(out, x2, np.float32(a), np.int32(n))
    assert mock2.fast_launches == 1
    x2.device = 0
    x2.export_fails = True  # the export reports an error: the general path, no error left set
    launcher(out, x2, np.float32(a), np.int32(n))
    assert mock2.fast_launches == 1 and mock2.launches[-1].params[2] == params[2]
    x2.export_fails = False
    x64 = tensor(n, np.float64)  # another dtype: another specialization
    launcher(out, x64, np.float32(a), np.int32(n))
    assert mock2.fast_launches == 1 and len(scale.signatures) == 2
    off = tensor(n + 1)
    off.array = off.array[1:]  # off by one element: unaligned, the general specialization
    launcher(out, off, np.float32(a), np.int32(n))
    assert "float32[::1]" in {str(t) for s in scale.signatures for t in s.args}
    assert mock2.launches[-1].params[2] == off.array.ptr.to_bytes(8, "little")
    strided = tensor(2 * n)
    strided.array, strided.contiguous = strided.array[::2], False
    launcher(out, strided, np.float32(a), np.int32(n))
    assert mock2.launches[-1].params[4] == (8).to_bytes(8, "little")  # its stride in bytes
    for _ in range(2):  # back to the first kind: rebuilt, then fast again
        launcher(out, x, np.float32(a), np.int32(n))
    assert mock2.fast_launches == 2
    assert mock2.launches[-1].params[2] == x.array.ptr.to_bytes(8, "little")


def test_mixed_arguments_keep_their_order_in_the_buffer(mock2):
    """Exchange tensors between scalars and a DeviceArray: the packing's pad bytes cover the
    tensors' slots, and the reader writes them at their offsets."""
    rng = np.random.default_rng()

    @kj.jit
    def mix(s, m, d, t, k):
        i = kj.grid(1)
        if i < m.shape[1]:
            d[i] = m[0, i] * s + t[i] + k

    cols = 4 * int(rng.integers(2, 30))
    m = ExchangeTensor(kj.to_device(rng.standard_normal((3, cols)).astype(np.float32)))
    t = ExchangeTensor(kj.to_device(rng.standard_normal(cols).astype(np.float32)))
    d = kj.to_device(rng.standard_normal(cols).astype(np.float32))
    args = (np.float32(rng.uniform(1, 2)), m, d, t, np.int64(rng.integers(1, 1 << 40)))
    mix[1, cols](*args)
    mix[1, cols](*args)
    assert mock2.fast_launches == 1 and "READ(a1, a3)" in source_of(mix[1, cols])
    p = mock2.launches[-1].params
    assert struct.unpack("<f", p[0][:4])[0] == args[0]
    assert p[1:4] == (m.array.ptr.to_bytes(8, "little"), (3).to_bytes(8, "little"),
                      cols.to_bytes(8, "little"))
    assert p[4] == d.ptr.to_bytes(8, "little")
    assert p[6] == t.array.ptr.to_bytes(8, "little") and p[7] == cols.to_bytes(8, "little")
    assert p[8] == int(args[4]).to_bytes(8, "little")
