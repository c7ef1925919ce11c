"""``*_array_like`` of a view takes NumPy's ``empty_like`` order (an F array's view gives an
F array); ``cuda.devicearray.auto_device`` copies what is not on the device yet."""

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda

rng = np.random.default_rng()


@pytest.mark.parametrize("order", ["C", "F"])
def test_like_of_a_view_follows_numpy(order):
    shape = (int(rng.integers(4, 12)), int(rng.integers(4, 12)))
    view = np.zeros(shape, order=order)[::2, ::2]
    d_view = cuda.device_array(shape, order=order)[::2, ::2]
    want = np.zeros_like(view)
    for like in (cuda.device_array_like, cuda.pinned_array_like, cuda.mapped_array_like,
                 kj.device_array_like):
        got = like(d_view)
        assert got.shape == want.shape and got.strides == want.strides
        assert bool(got.flags["F_CONTIGUOUS"]) == bool(want.flags["F_CONTIGUOUS"])
    assert kj.device_array_like(view).strides == want.strides


def test_auto_device():
    value = int(rng.integers(1, 100))
    d, copied = cuda.devicearray.auto_device(value)
    assert copied and d.copy_to_host() == value and d.shape == ()
    again, copied = cuda.devicearray.auto_device(d)
    assert again is d and not copied
    x = rng.standard_normal(10)
    with pytest.raises(ValueError, match="non-contiguous"):
        cuda.devicearray.auto_device(x[::2])
    assert isinstance(d, cuda.devicearray.DeviceNDArray)
