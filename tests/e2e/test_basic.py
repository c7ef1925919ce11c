"""End to end: simple kernels, grids and blocks in 1 to 3 dimensions, dtypes, layouts, memory
spaces and device functions, on the backend the kj_backend fixture selects."""

import numpy as np
import pytest

import kaiojit as kj

rng = np.random.default_rng()


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saxpy(kj_backend, dtype):
    n = int(rng.integers(1000, 5000))
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    a = dtype(rng.standard_normal())
    out = kj.to_device(np.full(n, np.nan, dtype))
    saxpy[(n + 127) // 128, 128](out, kj.to_device(x), kj.to_device(y), a, n)
    # a * x + y may be one fused multiply-add (as on the GPU): absolute slack near 0
    np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-6)


def test_numpy_arguments_are_copied_back(kj_backend):
    n = 300
    x, y = rng.random(n), rng.random(n)
    out = np.full(n, np.nan)
    with pytest.warns(kj.PerformanceWarning):
        saxpy[3, 128](out, x, y, 1.5, n)
    np.testing.assert_allclose(out, 1.5 * x + y)


@kj.jit
def index_2d(out):
    x, y = kj.grid(2)
    if x < out.shape[0] and y < out.shape[1]:
        out[x, y] = x * 1000 + y + kj.gridsize(2)[0] * 0


@kj.jit
def index_3d(out, blocks):
    tx, ty, tz = kj.threadIdx.x, kj.threadIdx.y, kj.threadIdx.z
    bx, by, bz = kj.blockIdx.x, kj.blockIdx.y, kj.blockIdx.z
    x = bx * kj.blockDim.x + tx
    y = by * kj.blockDim.y + ty
    z = bz * kj.blockDim.z + tz
    if x < out.shape[0] and y < out.shape[1] and z < out.shape[2]:
        out[x, y, z] = x * 10000 + y * 100 + z
        blocks[x, y, z] = (bz * kj.gridDim.y + by) * kj.gridDim.x + bx


def test_2d_grid(kj_backend):
    shape = (int(rng.integers(20, 40)), int(rng.integers(20, 40)))
    out = kj.to_device(np.full(shape, -1, np.int64))
    index_2d[((shape[0] + 7) // 8, (shape[1] + 15) // 16), (8, 16)](out)
    x, y = np.indices(shape)
    np.testing.assert_array_equal(out.copy_to_host(), x * 1000 + y)


def test_3d_grid_and_block(kj_backend):
    shape = (13, 11, 9)
    block = (4, 3, 2)
    grid = tuple((s + b - 1) // b for s, b in zip(shape, block))
    out = kj.to_device(np.full(shape, -1, np.int64))
    blocks = kj.to_device(np.full(shape, -1, np.int64))
    index_3d[grid, block](out, blocks)
    x, y, z = np.indices(shape)
    np.testing.assert_array_equal(out.copy_to_host(), x * 10000 + y * 100 + z)
    bx, by, bz = x // block[0], y // block[1], z // block[2]
    np.testing.assert_array_equal(blocks.copy_to_host(),
                                  (bz * grid[1] + by) * grid[0] + bx)


@kj.jit
def copy_cast(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = x[i]


@kj.jit
def scalar_round_trip(out, v):
    out[0] = v


DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]


def _random(dtype, n):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    return rng.standard_normal(n).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trip(kj_backend, dtype):
    n = 257
    x = _random(dtype, n)
    out = kj.to_device(np.zeros(n, dtype) if dtype == np.bool_ else ~np.zeros(n, dtype)
                       if np.dtype(dtype).kind in "iu" else np.full(n, np.nan, dtype))
    if dtype == np.bool_:
        x_dev = kj.to_device(x)
        copy_cast[3, 128](out, x_dev)
        np.testing.assert_array_equal(out.copy_to_host(), x)
    else:
        copy_cast[3, 128](out, kj.to_device(x))
        np.testing.assert_array_equal(out.copy_to_host(), x)
    v = _random(dtype, 1)[0]
    one = kj.to_device(np.zeros(1, dtype))
    scalar_round_trip[1, 1](one, v)
    assert one.copy_to_host()[0] == v


@kj.jit
def scale_2d(out, x, a):
    i, j = kj.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        out[i, j] = x[i, j] * a


def test_strided_and_f_ordered_arrays(kj_backend):
    base = rng.standard_normal((40, 60))
    strided = base[::3, 1::2]              # non-contiguous view
    fortran = np.asfortranarray(rng.standard_normal((17, 23)))
    for x in (strided, fortran):
        dx = kj.to_device(x)
        assert dx.shape == x.shape
        out = kj.to_device(np.full(x.shape, np.nan))
        scale_2d[(4, 4), (8, 8)](out, dx, 2.5)
        np.testing.assert_allclose(out.copy_to_host(), x * 2.5)
    # a strided output: only the view's elements change
    host = np.full((30, 30), np.nan)
    dev = kj.to_device(host)
    view = dev[::2, ::3]
    x = rng.standard_normal(view.shape)
    scale_2d[(2, 2), (8, 8)](view, kj.to_device(x), -1.0)
    got = dev.copy_to_host()
    np.testing.assert_allclose(got[::2, ::3], -x)
    mask = np.ones_like(got, bool)
    mask[::2, ::3] = False
    assert np.isnan(got[mask]).all()


@kj.jit
def early_return(out, x, n):
    i = kj.grid(1)
    if i >= n:
        return
    if x[i] < 0:
        out[i] = 0.0
        return
    out[i] = x[i] * 2


def test_early_return(kj_backend):
    n = 1000
    x = rng.standard_normal(n)
    out = kj.to_device(np.full(n + 24, np.nan))
    early_return[8, 128](out, kj.to_device(x), n)
    got = out.copy_to_host()
    np.testing.assert_allclose(got[:n], np.where(x < 0, 0.0, x * 2))
    assert np.isnan(got[n:]).all()


@kj.jit
def prefix_in_local(out, x, k):
    i = kj.grid(1)
    if i < out.size:
        acc = kj.local.array(16, kj.float64)
        for j in range(k):
            acc[j] = x[i * k + j]
        for j in range(1, k):
            acc[j] += acc[j - 1]
        out[i] = acc[k - 1] - acc[0]


def test_local_array(kj_backend):
    n, k = 300, 16
    x = rng.standard_normal(n * k)
    out = kj.to_device(np.full(n, np.nan))
    prefix_in_local[3, 128](out, kj.to_device(x), k)
    np.testing.assert_allclose(out.copy_to_host(), x.reshape(n, k)[:, 1:].sum(1))


COEFFS = rng.standard_normal(8)


@kj.jit
def poly_const(out, x):
    c = kj.const.array_like(COEFFS)
    i = kj.grid(1)
    if i < x.size:
        acc = 0.0
        for j in range(c.size):
            acc = acc * x[i] + c[j]
        out[i] = acc


def test_const_array(kj_backend):
    x = rng.standard_normal(500)
    out = kj.to_device(np.full(500, np.nan))
    poly_const[4, 128](out, kj.to_device(x))
    np.testing.assert_allclose(out.copy_to_host(), np.polyval(COEFFS, x), rtol=1e-12)


@kj.jit(device=True)
def axpy(a, x, y):
    return a * x + y


@kj.jit(device=True)
def clamp01(v):
    if v < 0:
        return 0.0
    if v > 1:
        return 1.0
    return v


@kj.jit
def use_device_functions(out, x, y):
    i = kj.grid(1)
    if i < x.size:
        out[i] = clamp01(axpy(0.5, x[i], y[i]))


def test_device_functions(kj_backend):
    x, y = rng.standard_normal(700), rng.standard_normal(700)
    out = kj.to_device(np.full(700, np.nan))
    use_device_functions[6, 128](out, kj.to_device(x), kj.to_device(y))
    np.testing.assert_allclose(out.copy_to_host(), np.clip(0.5 * x + y, 0, 1))


def test_launch_errors(kj_backend):
    out = kj.to_device(np.zeros(4))
    with pytest.raises(kj.LaunchError):
        saxpy[1, 2048](out, out, out, 1.0, 4)
    with pytest.raises(kj.LaunchError):
        saxpy[0, 32](out, out, out, 1.0, 4)
    with pytest.raises(kj.LaunchError):
        saxpy[1, (2, 2, 128)](out, out, out, 1.0, 4)
