"""The native reader of CuPy arrays through their classes' C getters
(``kaiojit/runtime/native/getset_reader.py``), on the mock backend, with ``fake_arrays.CArray``: a
class whose attributes are C getters, as CuPy's Cython ``ndarray``'s are. Each miss is a
``False`` with no exception left set, and the same reader reads the array again once it is
what the reader was built for."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as kt
from kaiojit.runtime.native import getset_reader as gr
from kaiojit.runtime.native.fastlaunch import source_of
from tests.runtime.fake_arrays import CArray, CMemory, Memory, ndarray

RNG = np.random.default_rng()


def device(shape, dtype=np.float32):
    return kj.to_device(RNG.standard_normal(shape).astype(dtype))


def reader_of(arrays, aligned=True):
    """A reader of ``arrays`` (their present class, dtype and rank) into a fresh buffer
    poisoned with 0xA5, and the buffer."""
    buffer = ctypes.create_string_buffer(b"\xa5" * 256, 256)
    reads, offset = [], 0
    for a in arrays:
        t = kt.from_dtype(a.dtype)
        reads.append(gr.ArrayRead(type(a), type(a.data), a.dtype, a.ndim, t, aligned, offset))
        offset += 8 * (1 + a.ndim)
    return gr.reader(reads, ctypes.addressof(buffer), 0, buffer), buffer


def words(buffer, n):
    return list(np.frombuffer(buffer.raw[:8 * n], np.int64))


def test_c_getters_are_found_only_where_getattr_ends_in_one():
    assert gr.readable(CArray, CMemory)
    base = CArray.__mro__[1]
    assert gr.c_getter(CArray, "dtype")[2] is base.__dict__["dtype"]
    assert gr.c_getter(ndarray, "ndim") is None  # a property
    assert gr.c_getter(ndarray, "dtype") is None  # an instance attribute
    assert not gr.readable(ndarray, Memory) and not gr.readable(CArray, Memory)

    class Overridden(CArray):
        dtype = property(lambda self: np.dtype(np.float64))
    assert gr.c_getter(Overridden, "dtype") is None  # what getattr finds first
    assert gr.c_getter(Overridden, "shape") is not None


def test_reads_pointers_and_extents_of_vectors_and_matrices(mock):
    n, rows, cols = (int(v) for v in RNG.integers(20, 300, 3))
    x, m = CArray(device(n)), CArray(device((rows, 4 * cols)))
    read, buffer = reader_of([x, m])
    assert read(x, m) is True
    assert words(buffer, 5) == [x.data.ptr, n, m.data.ptr, rows, 4 * cols]
    y = CArray(device(n + 7))
    assert read(y, m) is True and words(buffer, 2) == [y.data.ptr, n + 7]


@pytest.mark.parametrize("change, value", [
    ("dtype", np.dtype(np.float64)), ("_c_contiguous", False), ("device_id", 1),
    ("ndim", 2), ("shape", (3, 4, 5)), ("ptr", "not an integer"), ("size", 1 << 70),
    ("device_id", None), ("data", Memory(0, 0)), ("data", None), ("shape", [4, 5])])
def test_each_fact_that_differs_is_a_miss_with_no_exception_left(mock, change, value):
    x, m = CArray(device(64)), CArray(device((8, 16)))
    read, _ = reader_of([x, m])
    target = m if change == "shape" else x
    before = dict(target._values), dict(target._values["data"]._values)
    target.set(change, value)
    assert read(x, m) is False
    target._values.update(before[0])
    target._values["data"]._values.update(before[1])
    assert read(x, m) is True


@pytest.mark.parametrize("attribute", gr.ARRAY_ATTRIBUTES + gr.MEMORY_ATTRIBUTES)
def test_a_raising_getter_is_a_miss_that_clears_its_exception_and_keeps_no_reference(
        mock, attribute):
    x, m = CArray(device(64)), CArray(device((8, 16)))
    read, _ = reader_of([x, m])
    target = m if attribute == "shape" else x  # a vector's extent is read from ndim and size
    values = target._values["data"]._values if attribute in gr.MEMORY_ATTRIBUTES \
        else target._values
    saved = values.pop(attribute)  # its getter now raises KeyError and returns NULL
    with pytest.raises(KeyError):
        getattr(target.data if attribute in gr.MEMORY_ATTRIBUTES else target, attribute)
    held = {k: sys.getrefcount(v) for k, v in values.items()}
    assert all(read(x, m) is False for _ in range(50))
    assert {k: sys.getrefcount(v) for k, v in values.items()} == held
    values[attribute] = saved
    assert read(x, m) is True


def test_another_class_and_another_count_are_misses(mock):
    x = CArray(device(64))
    read, _ = reader_of([x])
    assert read(ndarray(x.array)) is False and read(x.array) is False
    assert read(x, x) is False and read() is False
    assert read(x) is True


def test_alignment_is_the_one_specialized_on(mock):
    x = device(65)
    aligned, unaligned = CArray(x[:64]), CArray(x[1:])
    read_aligned, _ = reader_of([aligned], aligned=True)
    read_unaligned, buffer = reader_of([unaligned], aligned=False)
    assert read_aligned(aligned) and not read_aligned(unaligned)
    assert read_unaligned(unaligned) and words(buffer, 2) == [unaligned.data.ptr, 64]
    assert not read_unaligned(aligned)
    rows = CArray(device((4, 5)))  # rows of 20 bytes: not aligned, whatever the pointer
    assert not reader_of([rows], aligned=True)[0](rows)
    assert reader_of([rows], aligned=False)[0](rows)


def test_fast_form_reads_cupy_arrays_natively_and_falls_back(mock):
    @kj.jit
    def scale(out, x, a):
        i = kj.grid(1)
        if i < x.shape[0]:
            out[i] = a * x[i]

    n = int(RNG.integers(64, 512))
    out, x = CArray(device(n)), CArray(device(n))
    launcher = scale[1, 64]
    launcher(out, x, np.float32(2.0))
    text = source_of(launcher.fast)
    assert "READ_GETSET(a0, a1)" in text and "a1.dtype" not in text
    y = CArray(device(n + 3))
    before = mock.fast_launches
    launcher(out, y, np.float32(2.0))
    assert mock.fast_launches == before + 1
    params = mock.launches[-1].params
    assert params[0] == out.data.ptr.to_bytes(8, "little")
    assert params[2:4] == (y.data.ptr.to_bytes(8, "little"), (n + 3).to_bytes(8, "little"))
    # the dtype changed in place: a miss, then the general path's float64 specialization
    y.set("dtype", np.dtype(np.float64))
    launcher(out, CArray(device(n, np.float64)), np.float32(2.0))
    assert mock.fast_launches == before + 1
    assert any("float64" in str(t) for s in scale.signatures for t in s.args)
    # on another device: the general path names the parameter
    with pytest.raises(TypeError, match=r"parameter 'x': the array is on device 1"):
        scale[1, 64](out, CArray(x.array, device=1), np.float32(2.0))


def test_real_cupy_arrays_over_host_memory():
    """CuPy imports and builds arrays over unowned memory without a GPU: its Cython class's
    getters, read natively."""
    cupy = pytest.importorskip("cupy")
    from cupy.cuda import memory

    def over(host):
        mem = memory.UnownedMemory(host.ctypes.data, host.nbytes, host, device_id=0)
        return cupy.ndarray(host.shape, dtype=host.dtype,
                            memptr=memory.MemoryPointer(mem, 0))

    n = int(RNG.integers(64, 512))
    host = [RNG.standard_normal(n).astype(np.float32), RNG.standard_normal((4, 8))]
    x, m = over(host[0]), over(host[1])
    assert gr.readable(type(x), type(x.data))
    read, buffer = reader_of([x, m])
    assert read(x, m) is True
    assert words(buffer, 5) == [host[0].ctypes.data, n, host[1].ctypes.data, 4, 8]
    assert read(x[::2], m) is False  # not contiguous
    assert read(over(host[1]).ravel(), m) is False  # float64
    assert read(x, m.reshape(2, 16)) is True and words(buffer, 5)[3:] == [2, 16]
