"""Neighbouring accesses at a known 16-byte alignment become one 128-bit access in the PTX:
shared arrays (addressed in their own address space), local arrays (16-byte aligned) and
arrays of the aligned specialization. Every PTX here is also assembled by the ptxas check."""

from __future__ import annotations

import re

import numpy as np

import kaiojit as kj

V4_SHARED_LOAD = r"ld\.shared\.v4\.[fb]32"


def count(pattern: str, ptx: str) -> int:
    return len(re.findall(pattern, ptx))


def k_shared_float4(out, x):
    s = kj.shared.array((2, 64), kj.float32)
    t = kj.threadIdx.x
    s[t // 64, t % 64] = x[t]
    kj.syncthreads()
    if t < 16:
        i = t * 4  # a 16-byte aligned offset into row 1 (itself 256 bytes in)
        out[t] = s[1, i] + s[1, i + 1] * 2.0 + s[1, i + 2] * 3.0 + s[1, i + 3] * 4.0


def test_four_consecutive_shared_floats_at_an_aligned_offset_are_one_v4_load():
    ptx = kj.compile_ptx(k_shared_float4, "void(float32[::1], float32[::1])")
    assert count(V4_SHARED_LOAD, ptx) == 1
    assert count(r"ld\.shared\.[fb]32", ptx) == 0


def k_shared_unaligned(out, x):
    s = kj.shared.array(256, kj.float32)
    t = kj.threadIdx.x
    s[t] = x[t]
    kj.syncthreads()
    if t < 16:
        i = t * 4 + 1  # 4 bytes past an aligned offset: no 128-bit access may be made
        out[t] = s[i] + s[i + 1] * 2.0 + s[i + 2] * 3.0 + s[i + 3] * 4.0


def test_shared_floats_at_an_unaligned_offset_stay_narrower():
    ptx = kj.compile_ptx(k_shared_unaligned, "void(float32[::1], float32[::1])")
    assert count(V4_SHARED_LOAD, ptx) == 0
    assert count(r"ld\.shared\.", ptx) >= 2


def k_shared_store_float4(out, x):
    s = kj.shared.array((32, 4), kj.float32)
    t = kj.threadIdx.x
    for j in range(4):
        s[t, j] = x[t * 4 + j] * 2.0
    kj.syncthreads()
    out[t] = s[31 - t, 0] + s[31 - t, 3]


def test_a_row_of_four_shared_floats_is_one_v4_store():
    ptx = kj.compile_ptx(k_shared_store_float4, "void(float32[::1], float32[::1])")
    assert count(r"st\.shared\.v4\.[fb]32", ptx) == 1
    assert count(r"st\.shared\.[fb]32", ptx) == 0


def k_dynamic_float4(out):
    s = kj.shared.array(0, kj.float32)
    t = kj.threadIdx.x
    out[t] = s[t * 4] + s[t * 4 + 1] + s[t * 4 + 2] + s[t * 4 + 3]


def test_dynamic_shared_memory_reads_as_v4_too():
    ptx = kj.compile_ptx(k_dynamic_float4, "void(float32[::1])")
    assert count(V4_SHARED_LOAD, ptx) == 1


def k_global_float4(out, x):
    i = kj.grid(1) * 4
    a, b, c, d = x[i], x[i + 1], x[i + 2], x[i + 3]
    out[i] = d
    out[i + 1] = c
    out[i + 2] = b
    out[i + 3] = a


def test_global_float4_needs_the_aligned_specialization():
    aligned = kj.compile_ptx(k_global_float4,
                             "void(float32[::1, align=16], float32[::1, align=16])")
    assert count(r"ld\.global\.nc\.v4\.[fb]32", aligned) == 1
    assert count(r"st\.global\.v4\.[fb]32", aligned) == 1
    general = kj.compile_ptx(k_global_float4, "void(float32[::1], float32[::1])")
    assert count(r"\.v4\.", general) == 0


def k_local_float4(out, x):
    t = kj.grid(1)
    a = kj.local.array(8, kj.float32)
    for q in range(8):
        a[q] = x[t * 8 + q]
    out[t] = a[t % 8]  # a dynamic index keeps the array in local memory


def test_local_arrays_are_16_byte_aligned_so_their_stores_merge():
    ptx = kj.compile_ptx(k_local_float4, "void(float32[::1], float32[::1])")
    assert count(r"st\.local\.v4\.[fb]32", ptx) == 2
    assert count(r"st\.local\.[fb]32", ptx) == 0


def test_vectorized_shared_kernels_compute_the_same(kj_backend):
    rng = np.random.default_rng()
    x = rng.standard_normal(128).astype(np.float32)
    out = kj.to_device(np.full(16, np.nan, np.float32))
    kj.jit(k_shared_float4)[1, 128](out, kj.to_device(x))
    row = x[64:].reshape(16, 4).astype(np.float64)
    expect = row[:, 0] + row[:, 1] * 2 + row[:, 2] * 3 + row[:, 3] * 4
    # float32 sums that may cancel (and contract to FMAs): an absolute tolerance as well
    np.testing.assert_allclose(out.copy_to_host(), expect, rtol=1e-5, atol=1e-5)
    x = rng.standard_normal(128).astype(np.float32)
    out = kj.to_device(np.full(32, np.nan, np.float32))
    kj.jit(k_shared_store_float4)[1, 32](out, kj.to_device(x))
    s = x.reshape(32, 4).astype(np.float64) * 2
    np.testing.assert_allclose(out.copy_to_host(), s[::-1, 0] + s[::-1, 3], rtol=1e-5, atol=1e-5)


def k_pair_transpose(out, a):
    # 8 x 8 tiles, a block of 4 x 8 threads, each thread two adjacent columns of a row
    tile = kj.shared.array((8, 9), kj.float32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    bx, by = kj.blockIdx.x * 8, kj.blockIdx.y * 8
    n0, n1 = a.shape
    c = 2 * tx
    if by + 8 <= n0 and bx + 8 <= n1:
        v0 = a[by + ty, bx + c]
        v1 = a[by + ty, bx + c + 1]
        tile[ty, c] = v0
        tile[ty, c + 1] = v1
        kj.syncthreads()
        out[bx + ty, by + c] = tile[c, ty]
        out[bx + ty, by + c + 1] = tile[c + 1, ty]
    else:
        for j in range(2):
            if by + ty < n0 and bx + c + j < n1:
                tile[ty, c + j] = a[by + ty, bx + c + j]
        kj.syncthreads()
        for j in range(2):
            if bx + ty < n1 and by + c + j < n0:
                out[bx + ty, by + c + j] = tile[c + j, ty]


def test_2d_rows_of_the_aligned_specialization_pair_into_v2_accesses():
    # the row stride is a multiple of 16 bytes and the column even: one 64-bit load and store
    aligned = kj.compile_ptx(k_pair_transpose,
                             "void(float32[:, ::1, align=16], float32[:, ::1, align=16])")
    assert count(r"ld\.global\.nc\.v2\.[fb]32", aligned) == 1
    assert count(r"st\.global\.v2\.[fb]32", aligned) == 1
    general = kj.compile_ptx(k_pair_transpose, "void(float32[:, ::1], float32[:, ::1])")
    assert count(r"\.global(\.nc)?\.v2\.", general) == 0


def test_pair_transpose_is_right_aligned_and_not(kj_backend):
    rng = np.random.default_rng()
    kern = kj.jit(k_pair_transpose)
    for rows, cols, off in ((16, 24, 0), (13, 21, 0), (16, 25, 1)):
        # 21 columns make an 84-byte row stride; (16, 25) sliced off by one element starts 4
        # bytes in with a 100-byte stride: neither is aligned
        host = rng.standard_normal((rows, cols)).astype(np.float32)
        a = kj.to_device(host)
        if off:
            host, a = host[:, off:], a[:, off:]
        n0, n1 = host.shape
        out = kj.to_device(np.full((n1, n0), np.nan, np.float32))
        kern[((n1 + 7) // 8, (n0 + 7) // 8), (4, 8)](out, a)
        np.testing.assert_array_equal(out.copy_to_host(), host.T)
        assert a.kaiojit_type.align == (16 if cols % 4 == 0 and not off else 0)
    # the sliced array's rows are not contiguous with each other: strided, not C
    assert {str(s.args[1]) for s in kern.signatures} == {
        "float32[:, ::1, align=16]", "float32[:, ::1]", "float32[:, :]"}
