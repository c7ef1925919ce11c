"""Shared and local arrays of records (``cuda.shared.array(n, dtype=record_type)``), as numba
has them (issue 28: a record dtype was refused, and on the GPU the shared array's LLVM type
and alignment were built as for a scalar: an internal error)."""

import numpy as np

from kaiojit import cuda
from kaiojit import types as T

rng = np.random.default_rng()
REC = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])  # 28 bytes: not a power of two
REC_T = T.from_dtype(REC)
NTHREADS = 16


def _records(n: int) -> np.ndarray:
    a = np.zeros(n, REC)
    a["i"] = rng.integers(-1000, 1000, n)
    a["j"] = rng.standard_normal((n, 3, 2))
    return a


def chunk_through_shared(x, y):
    sm = cuda.shared.array(NTHREADS, dtype=REC_T)
    tx = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tx
    if i < len(x):
        sm[tx] = x[i]
    cuda.syncthreads()
    if tx == 0:
        for j in range(NTHREADS):
            y[cuda.blockIdx.x * cuda.blockDim.x + j] = sm[NTHREADS - 1 - j]


def swap_through_local(x, y):
    la = cuda.local.array(2, dtype=REC_T)
    i = cuda.grid(1)
    if i < len(x):
        la[0] = x[i]
        la[1] = x[len(x) - 1 - i]
        la[1].i += 1
        y[i] = la[1]


def test_shared_array_of_records(kj_backend):
    blocks = int(rng.integers(2, 6))
    x = _records(blocks * NTHREADS)
    y = cuda.to_device(np.zeros_like(x))
    cuda.jit(chunk_through_shared)[blocks, NTHREADS](cuda.to_device(x), y)
    want = x.reshape(blocks, NTHREADS)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(y.copy_to_host(), want)


def test_local_array_of_records(kj_backend):
    x = _records(int(rng.integers(10, 60)))
    y = cuda.to_device(np.zeros_like(x))
    cuda.jit(swap_through_local)[1, 64](cuda.to_device(x), y)
    want = x[::-1].copy()
    want["i"] += 1
    np.testing.assert_array_equal(y.copy_to_host(), want)


def test_record_arrays_assemble_for_the_gpu():
    arr = T.ArrayType(REC_T, 1, "C")
    for f in (chunk_through_shared, swap_through_local):
        ptx, _ = cuda.compile_ptx(f, (arr, arr))
        assert ".visible .entry" in ptx
    ptx, _ = cuda.compile_ptx(chunk_through_shared, (arr, arr))
    assert f"[{NTHREADS * REC.itemsize}]" in ptx  # the shared array holds the records' bytes
