"""numba's dispatcher extensions (``kernel.extensions``, ``cuda.jit(extensions=...)``) and
``cuda.args``: an extension's ``prepare_args`` sees every argument of a launch first."""

import numpy as np

from kaiojit import cuda
from kaiojit.cuda.args import In, InOut, wrap_arg

rng = np.random.default_rng()


class ReadOnlyByDefault:
    def __init__(self):
        self.seen = []

    def prepare_args(self, ty, val, stream=0, retr=None):
        self.seen.append(ty)
        retr.append(lambda: self.seen.append("after"))
        return ty, wrap_arg(val, default=In)


def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def test_extension_prepares_every_argument(kj_backend):
    x = rng.integers(0, 100, int(rng.integers(5, 50))).astype(np.int64)
    before = x.copy()
    ext = ReadOnlyByDefault()
    kernel = cuda.jit(extensions=[ext])(add_one)
    kernel[1, 64](x)  # In: copied to the device, never back
    np.testing.assert_array_equal(x, before)
    assert ext.seen == [cuda.int64[::1], "after"]
    plain = cuda.jit(add_one)
    assert plain.extensions == []
    plain[1, 64](InOut(x))
    np.testing.assert_array_equal(x, before + 1)
    plain.extensions.append(ReadOnlyByDefault())
    plain[1, 64](x)
    np.testing.assert_array_equal(x, before + 1)
    d = cuda.to_device(x)
    plain[1, 64](d)  # a device array is not wrapped
    np.testing.assert_array_equal(d.copy_to_host(), before + 2)
