"""Indices from the special registers do not wrap at 2**31 (issue 28): ``blockIdx.x *
blockDim.x`` is computed in 64 bits, as numba computes it, so grids of more than 2**31
threads (an H200 holds such arrays) index correctly."""

import numpy as np

from kaiojit import cuda

rng = np.random.default_rng()


@cuda.jit
def far_index(out, scale, offset):
    # scale * blockIdx.x * blockDim.x passes 2**31 in the second block
    i = cuda.blockIdx.x * cuda.blockDim.x * scale + cuda.threadIdx.x
    if cuda.blockIdx.x == 1 and cuda.threadIdx.x == offset:
        out[0] = i


def test_block_index_times_block_size_does_not_wrap(kj_backend):
    block = 256
    scale = 2**31 // block + int(rng.integers(1, 1000))
    offset = int(rng.integers(0, block))
    out = cuda.to_device(np.full(1, -1, np.int64))
    far_index[2, block](out, np.int32(scale), offset)
    assert out.copy_to_host()[0] == block * scale + offset

