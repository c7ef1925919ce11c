"""Kernels whose typed IR tests/kir/test_printer.py compares with its text, line for line
(the names of temporaries carry source positions: keep this file as it is)."""

import math

import kaiojit as kj

TILE = 4


@kj.jit(device=True)
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


def k_control(out, x, n):
    i = kj.grid(1)
    if i >= n:
        return
    acc = 0.0
    for j in range(0, n, 2):
        if j == 3:
            continue
        acc += x[j] * 2
        if acc > 100:
            break
    k = 0
    while k < 3 and acc != 0.0:
        k += 1
    a, b = k, i
    out[i] = clamp(acc, -1.0, 1.0) if a < b else -acc
    for v in (16, 8):
        out[i] += v


def k_memory(out, m, counts):
    sm = kj.shared.array((TILE, TILE), kj.float32)
    loc = kj.local.array(TILE, kj.int32)
    tx, ty = kj.threadIdx.x, kj.threadIdx.y
    sm[ty, tx] = m[ty, tx]
    loc[tx] = tx
    kj.syncthreads()
    row = m[ty]
    part = m[1:, ::2]
    out[ty, tx] = sm[tx, ty] + row[tx] + part[0, 0] + math.sqrt(abs(m[ty, tx]))
    old = kj.atomic.add(counts, loc[tx], 1)
    s = kj.shfl_down_sync(0xFFFFFFFF, out[ty, tx], 1)
    if kj.laneid == 0 and not kj.all_sync(kj.activemask(), s > 0):
        print("lane", tx, "old", old, kj.popc(old))
    out[0, 0] = kj.float32(round(s)) + m.shape[0] + len(m)
