"""What device arrays report through ``__cuda_array_interface__`` (issue 28): the stream an
array was made on, so consumers synchronize on it, and a null data pointer for no elements;
and numba's host API over them (``is_cuda_array``, ``from_cuda_array_interface``)."""

import numpy as np
import pytest

from kaiojit import cuda
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend

rng = np.random.default_rng()


@pytest.fixture
def mock():
    """The mock backend, whose arrays stand for CUDA memory (the cpu backend's are host
    memory and export ``__array_interface__`` instead)."""
    previous = set_backend(MockBackend())
    yield
    set_backend(previous)


def test_array_made_on_a_stream_reports_it(mock):
    s = cuda.stream()
    host = rng.standard_normal(int(rng.integers(3, 50)))
    for arr in (cuda.to_device(host, stream=s), cuda.device_array(5, stream=s),
                cuda.device_array_like(host, stream=s)):
        cai = arr.__cuda_array_interface__
        assert cai["stream"] == s.handle != 0
        assert arr.stream is s
    assert cuda.to_device(host).__cuda_array_interface__["stream"] is None


def test_zero_size_array_has_a_null_pointer(mock):
    for shape in ((0,), (int(rng.integers(1, 9)), 0)):
        arr = cuda.device_array(shape, np.float32)
        assert arr.__cuda_array_interface__["data"] == (0, False)
    nonempty = cuda.device_array(int(rng.integers(1, 9)), np.float32)
    assert nonempty.__cuda_array_interface__["data"][0] != 0


def test_foreign_array_round_trip(mock):
    host = rng.standard_normal((4, 6)).astype(np.float32)
    dev = cuda.to_device(host)
    assert cuda.is_cuda_array(dev) and not cuda.is_cuda_array(host)
    view = cuda.from_cuda_array_interface(dev.__cuda_array_interface__, owner=dev)
    np.testing.assert_array_equal(view.copy_to_host(), host)
    np.testing.assert_array_equal(cuda.as_cuda_array(dev).copy_to_host(), host)


# --- the cpu backend: numba's arrays export the interface over the backend's memory ---------

class OnlyInterface:
    """A foreign array: nothing but another array's ``__cuda_array_interface__``."""

    def __init__(self, arr):
        self.arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


def test_numba_arrays_export_the_interface_on_every_backend(kj_backend):
    host = rng.standard_normal((int(rng.integers(2, 9)), 5))
    d = cuda.to_device(host)
    cai = d.__cuda_array_interface__
    assert cuda.is_cuda_array(d) and cai["data"] == (d.ptr, False) and cai["shape"] == host.shape
    assert d.device_ctypes_pointer.value == d.ptr  # numba's ctypes pointer
    for view in (d[1:, ::2], d.T, cuda.device_array(3), cuda.device_array_like(host)):
        assert cuda.is_cuda_array(view)
    out = cuda.to_device(np.full(host.shape, np.nan))

    @cuda.jit
    def twice(a, o):
        i, j = cuda.grid(2)
        if i < a.shape[0] and j < a.shape[1]:
            o[i, j] = 2 * a[i, j]

    twice[(1, 1), (16, 8)](OnlyInterface(d), OnlyInterface(out))
    np.testing.assert_array_equal(out.copy_to_host(), 2 * host)
    np.testing.assert_array_equal(cuda.as_cuda_array(OnlyInterface(d)).copy_to_host(), host)


def test_kj_arrays_stay_host_memory_on_the_cpu_backend(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("the cpu backend's memory")
    import kaiojit as kj

    assert not cuda.is_cuda_array(kj.to_device(rng.standard_normal(4)))


def test_mapped_and_managed_arrays_export_the_interface_on_the_cpu_backend(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("the cpu backend's memory is the host's")
    s = cuda.stream()
    for make in (cuda.mapped_array, cuda.managed_array):
        n = int(rng.integers(2, 20))
        plain, on_s = make(n, np.float32), make(n, np.float32, stream=s)
        assert plain.__cuda_array_interface__["stream"] is None
        assert on_s.__cuda_array_interface__["stream"] == s.handle
        assert plain.__cuda_array_interface__["data"][0] == plain.ctypes.data
        plain[:] = rng.standard_normal(n)
        got = cuda.as_cuda_array(plain).copy_to_host()
        np.testing.assert_array_equal(got, plain)


# --- consuming: the producer's stream --------------------------------------------------------

@pytest.fixture
def synced(monkeypatch):
    """The handles of the streams synchronized, in order."""
    from kaiojit.runtime import Stream

    seen = []
    monkeypatch.setattr(Stream, "synchronize", lambda self: seen.append(self.handle))
    return seen


def test_a_launch_synchronizes_each_foreign_array_stream_once(kj_backend, synced):
    from kaiojit.runtime.interop import cai_consumer

    s1, s2 = cuda.stream(), cuda.stream()
    n = int(rng.integers(2, 30))
    host = rng.standard_normal(n)
    a = OnlyInterface(cuda.to_device(host, stream=s1))
    b = OnlyInterface(cuda.to_device(np.full(n, np.nan), stream=s2))
    c = OnlyInterface(cuda.to_device(host))  # no stream: nothing to wait for

    @cuda.jit
    def add(x, y, z):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] + z[i]

    add[1, 32](a, b, c)
    assert synced == [s1.handle, s2.handle]
    np.testing.assert_array_equal(b.arr.copy_to_host(), 2 * host)
    synced.clear()
    cai_consumer.sync = False
    try:
        add[1, 32](a, b, c)
    finally:
        cai_consumer.sync = True
    assert synced == []


def test_as_cuda_array_takes_the_producers_stream(kj_backend, synced):
    s = cuda.stream()
    foreign = OnlyInterface(cuda.device_array(int(rng.integers(1, 9)), stream=s))
    view = cuda.as_cuda_array(foreign)
    assert synced == [s.handle]
    assert view.stream.external and view.stream.handle == s.handle
    assert cuda.as_cuda_array(foreign, sync=False).stream.handle == s.handle
    assert synced == [s.handle]  # sync=False: not again
    assert cuda.as_cuda_array(OnlyInterface(cuda.device_array(3))).stream == 0
    assert not cuda.stream().external and not cuda.default_stream().external
    assert cuda.external_stream(s.handle).external


def test_a_masked_interface_is_numbas_not_implemented(kj_backend):
    cai = {**cuda.to_device(rng.standard_normal(4)).__cuda_array_interface__,
           "mask": cuda.to_device(rng.integers(0, 2, 4).astype(bool))}
    with pytest.raises(NotImplementedError, match="^Masked arrays are not supported$"):
        cuda.from_cuda_array_interface(cai)


def test_a_malformed_stream_field_is_named(kj_backend):
    cai = {**cuda.to_device(rng.standard_normal(4)).__cuda_array_interface__, "stream": 0}
    with pytest.raises(TypeError, match=r"__cuda_array_interface__\['stream'\] = 0: takes None"):
        cuda.from_cuda_array_interface(cai)


# --- ufuncs with foreign arrays ---------------------------------------------------------------

def test_ufuncs_take_foreign_arrays_and_return_numbas_device_array(kj_backend):
    @cuda.vectorize(["f8(f8, f8)"])
    def vadd(a, b):
        return a + b

    @cuda.guvectorize(["(f8, f8, f8[:])"], "(),()->()")
    def gadd(a, b, out):
        out[0] = a + b

    n = int(rng.integers(2, 40))
    host, val = rng.standard_normal(n), float(rng.standard_normal())
    for ufunc in (vadd, gadd):
        np.testing.assert_array_equal(
            ufunc(OnlyInterface(cuda.to_device(host)), val).copy_to_host(), host + val)
        out = OnlyInterface(cuda.to_device(np.full(n, np.nan)))
        returned = ufunc(host, val, out=out)
        assert returned.device_ctypes_pointer.value == out.arr.ptr
        np.testing.assert_array_equal(returned.copy_to_host(), host + val)


def test_a_ufunc_broadcasts_numbas_device_arrays(kj_backend):
    """A broadcast operand is a strided view of the array's memory: its interface carries the
    pointer as an int, also where numba's arrays give ``device_ctypes_pointer`` as c_void_p."""
    @cuda.vectorize(["f8(f8, f8)"])
    def vsub(a, b):
        return a - b

    rows, cols = int(rng.integers(2, 9)), int(rng.integers(2, 9))
    x, y = rng.standard_normal((rows, 1)), rng.standard_normal((1, cols))
    got = vsub(cuda.to_device(x), cuda.to_device(y))
    np.testing.assert_array_equal(got.copy_to_host(), x - y)
