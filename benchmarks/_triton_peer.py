"""Triton versions of the bandwidth kernels (a peer, for benchmarks/bandwidth.py)."""

import triton
import triton.language as tl


@triton.jit
def _saxpy(out, x, y, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, a * tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask),
             mask=mask)


def saxpy(out, x, y, a, n):
    _saxpy[(triton.cdiv(n, 1024),)](out, x, y, a, n, BLOCK=1024)


@triton.jit
def _total(out, x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out, tl.sum(v, axis=0))


def total(out, x, n):
    out.zero_()
    _total[(triton.cdiv(n, 8192),)](out, x, n, BLOCK=8192)


@triton.jit
def _transpose(out, a, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tile = tl.load(a + i[:, None] * n + j[None, :])
    tl.store(out + j[:, None] * n + i[None, :], tl.trans(tile))


def transpose(out, a, n):
    _transpose[(n // 64, n // 64)](out, a, n, BLOCK=64)
