"""The attention backward kernels (FlashAttention-2's algorithm on Hopper's wgmma).

With ``P = exp(S * scale - lse)`` recomputed from the forward's log-sum-exp and
``Delta = rowsum(dO * O)``: ``dV = P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - Delta)``,
``dK = scale * dS^T Q``, ``dQ = scale * dS K``.

* ``prepare``: a warp per (query row, head): ``Delta`` (float32, laid out as lse) and the
  float32 dQ accumulator zeroed.
* ``main``: a block of 256 threads owns BN = 128 keys of one (sequence, kv head); each of its
  two warpgroups 64 of them. The K and V tiles are loaded once by TMA; Q and dO tiles of
  BM = 64 queries stream through two stages (thread 0 issues the TMA of tile ``i + 2`` once tile
  ``i`` is consumed). Per tile, each warpgroup computes ``S^T = K Q^T`` and ``dP^T = V dO^T``
  by wgmma from shared memory, ``P^T`` and ``dS^T`` in registers, then ``dV += P^T dO`` and
  ``dK += dS^T Q`` with P^T and dS^T as register-A operands (Q and dO read MN-major). dS^T also
  goes to shared memory (bf16/f16), from which ``dQ = dS K`` is computed (A MN-major) and
  added to the float32 accumulator: with an atomic add an element (``dq="atomics"``), or
  (``dq="reduce"``) staged in shared memory and added by two TMA reduce-adds a warpgroup (see
  ``BackwardConfig``). The query heads of a GQA group are walked inside the block, so dK and
  dV need no atomics.
* ``finish``: dQ = scale * accumulator, in the input type.

Rows that saw no key in the forward (lse = -inf) get ``P = 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import kaiojit as kj

BM, BN = 64, 128      # queries a tile, keys a block
ATOM = 64
THREADS = 256
LOG2E = 1.0 / math.log(2.0)
DQ_HALF = 32                  # columns of a dQ reduce-add box: 128 bytes of float32, the span
DQ_BUFFER = BM * ATOM * 4     # bytes of a warpgroup's dQ part (two 64 x 32 boxes)
DQ_MODES = ("atomics", "reduce", "gemm", "none")
DQ_MODE = "atomics"  # the mode attention_backward runs (benchmarks and tests set it)


@dataclass(frozen=True)
class BackwardConfig:
    head_dim: int
    dtype: str
    causal: bool
    varlen: bool
    # what the dQ part of a step does: "atomics" (dQ = dS K by wgmma, added to the float32
    # accumulator with an atomic add an element: the default until "reduce" is timed on a GPU),
    # "reduce" (each warpgroup's 64 x 64 part written to shared memory, 128B-swizzled, and
    # added by one thread with two TMA reduce-adds of 64 x 32, one bulk group a step), or,
    # for benchmarks/attention_bwd_probe.py only (dQ is then wrong), "gemm" (the wgmma, no
    # adds) or "none" (neither): what dQ costs
    dq: str = "atomics"

    def shared_bytes(self) -> int:
        """K and V tiles, two stages of Q and dO tiles, dS^T (BN x BM) and, in the reduce mode,
        a float32 dQ buffer a warpgroup computing dQ."""
        staged = DQ_BUFFER * (self.head_dim // ATOM) if self.dq == "reduce" else 0
        return 2 * self.head_dim * (2 * BN + 4 * BM) + 2 * BN * BM + staged


def make_prepare(dtype_name: str, head_dim: int):
    """``prepare(delta, dq_acc, do, o, lse_rows)``: one warp per (row, head) of the packed
    (total, heads, dim) arrays; ``delta[r, c]`` laid out as lse (see ``lse_rows``)."""
    D = head_dim
    PER_LANE = D // 32

    @kj.jit
    def prepare(delta, dq_acc, do, o, seqlen, varlen_heads):
        warp = (kj.blockIdx.x * kj.blockDim.x + kj.threadIdx.x) // 32
        lane = kj.threadIdx.x % 32
        heads = do.shape[1]
        if warp < do.shape[0] * heads:
            row, h = warp // heads, warp % heads
            acc = kj.float32(0.0)
            for e in kj.static_range(PER_LANE):
                col = lane + 32 * e
                acc += kj.float32(do[row, h, col]) * kj.float32(o[row, h, col])
                dq_acc[row, h, col] = 0.0
            for off in kj.static_range(5):
                acc += kj.shfl_xor_sync(0xFFFFFFFF, acc, 1 << off)
            if lane == 0:
                if varlen_heads:
                    delta[h, row] = acc
                else:  # (batch * heads, seqlen)
                    delta[(row // seqlen) * heads + h, row % seqlen] = acc
    return prepare


def make_finish(dtype_name: str):
    dtype = {"bf16": kj.bfloat16, "f16": kj.float16}[dtype_name]

    @kj.jit
    def finish(dq, dq_acc, scale):
        """dq = scale * dq_acc over 1-d views of both."""
        i = kj.grid(1)
        if i < dq.size:
            dq[i] = dtype(dq_acc[i] * scale)
    return finish


def make_main(cfg: BackwardConfig):
    D = cfg.head_dim
    dtype = {"bf16": kj.bfloat16, "f16": kj.float16}[cfg.dtype]
    causal, varlen = cfg.causal, cfg.varlen
    ATOMS = D // ATOM
    KV_ATOM, Q_ATOM = BN * ATOM, BM * ATOM
    K_BASE = 0
    V_BASE = BN * D
    Q_BASE = 2 * BN * D                 # stage s: Q at Q_BASE + s * 2 * BM * D, dO after it
    DS_BASE = Q_BASE + 4 * BM * D       # dS^T: BN rows (keys) of BM queries, swizzled
    STAGE = 2 * BM * D
    TILE_BYTES = 2 * BM * D * 2         # Q and dO of one tile
    KV_BYTES = 2 * BN * D * 2
    C_IDX = tuple(range(BM // 4))       # a thread's 16 words of P^T or dS^T (64 x 64)
    D_IDX = tuple(range(D // 2))        # of dK and dV
    Q_IDX = tuple(range(ATOM // 2))     # of its dQ part (64 x 64)
    if cfg.dq not in DQ_MODES:
        raise ValueError(f"BackwardConfig.dq must be one of {DQ_MODES}, got {cfg.dq!r}")
    DQ_WGS = ATOMS if cfg.dq != "none" else 0  # warpgroups computing dQ: one per 64 columns
    DQ_ADD = int(cfg.dq == "atomics")   # 0: the probe's timing without the atomics
    DQ_REDUCE = int(cfg.dq == "reduce")
    DQ_WORDS = (2 * DS_BASE + 2 * BN * BM) // 4  # the dQ buffers (32-bit words), 1024-aligned

    @kj.jit(max_registers=255)
    def main(dq_acc, dk, dv, q_map, k_map, v_map, do_map, dq_map, lse, delta, cu_q, cu_k,
             seqlen_q, seqlen_k, group, scale_log2):
        smem = kj.shared.array(0, dtype)
        words = kj.shared.array(0, kj.uint32)     # the same memory, as 32-bit words
        floats = kj.shared.array(0, kj.float32)   # ... and as float32 (the dQ buffers)
        bars = kj.shared.array(3, kj.uint64)      # kv, stage 0, stage 1
        t = kj.threadIdx.x
        c = t // 128
        warp, lane = (t % 128) // 32, t % 32
        g, qd = lane // 4, lane % 4
        hk = kj.blockIdx.y
        bi = kj.blockIdx.z
        n0 = kj.blockIdx.x * BN
        if varlen:
            q0 = cu_q[bi]
            len_q = cu_q[bi + 1] - q0
            k0 = cu_k[bi]
            len_k = cu_k[bi + 1] - k0
            lse_col = q0
        else:
            q0 = bi * seqlen_q
            len_q = seqlen_q
            k0 = bi * seqlen_k
            len_k = seqlen_k
            lse_col = 0
        if n0 >= len_k:
            return
        heads_q = kj.gridDim.y * group
        shift = len_k - len_q                     # key j is seen by rows i >= j - shift
        m_start = 0
        if causal:
            m_start = max(n0 - shift, 0) // BM * BM
        n_tiles = max((len_q - m_start + BM - 1) // BM, 0)
        total = n_tiles * group                   # (head, query tile) steps
        if t == 0:
            for i in kj.static_range(3):
                kj.mbarrier.init(bars[i:], 1)
            kj.fence_proxy_async()
        kj.syncthreads()
        if t == 0:
            kj.mbarrier.arrive_expect_tx(bars[0:], KV_BYTES)
            for a in kj.static_range(ATOMS):
                kj.tma.load(smem[K_BASE + a * KV_ATOM:], k_map, k0 + n0, hk, a * ATOM, bars[0:])
                kj.tma.load(smem[V_BASE + a * KV_ATOM:], v_map, k0 + n0, hk, a * ATOM, bars[0:])
            for st in kj.static_range(2):
                if st < total:
                    h = hk * group + st // n_tiles
                    m0 = m_start + (st % n_tiles) * BM
                    kj.mbarrier.arrive_expect_tx(bars[1 + st:], TILE_BYTES)
                    for a in kj.static_range(ATOMS):
                        kj.tma.load(smem[Q_BASE + st * STAGE + a * Q_ATOM:], q_map, q0 + m0, h,
                                    a * ATOM, bars[1 + st:])
                        kj.tma.load(smem[Q_BASE + st * STAGE + BM * D + a * Q_ATOM:], do_map,
                                    q0 + m0, h, a * ATOM, bars[1 + st:])
        dk_acc = kj.local.array(D // 2, kj.float32)
        dv_acc = kj.local.array(D // 2, kj.float32)
        st_acc = kj.local.array(BM // 2, kj.float32)   # S^T, then P^T
        dp_acc = kj.local.array(BM // 2, kj.float32)   # dP^T, then dS^T
        dq_part = kj.local.array(ATOM // 2, kj.float32)
        p_words = kj.local.array(BM // 4, kj.uint32)
        ds_words = kj.local.array(BM // 4, kj.uint32)
        for i in D_IDX:
            dk_acc[i] = 0.0
            dv_acc[i] = 0.0
        key_a = n0 + 64 * c + 16 * warp + g           # this thread's keys: key_a, key_a + 8
        kj.mbarrier.wait(bars[0:], 0)
        for step in range(total):
            s = step % 2
            h = hk * group + step // n_tiles
            m0 = m_start + (step % n_tiles) * BM
            qs = Q_BASE + s * STAGE
            dos = qs + BM * D
            lrow = h if varlen else bi * heads_q + h
            kj.mbarrier.wait(bars[1 + s:], (step // 2) % 2)
            # S^T = K Q^T and dP^T = V dO^T (this warpgroup's 64 keys x 64 queries)
            kj.wgmma.fence()
            for kk in kj.static_range(D // 16):
                koff = (kk // 4) * KV_ATOM + c * 64 * ATOM + (kk % 4) * 16  # my 64 keys
                qoff = (kk // 4) * Q_ATOM + (kk % 4) * 16
                for which in kj.static_range(2):  # S^T from K and Q; dP^T from V and dO
                    da = kj.wgmma.descriptor(smem, (V_BASE if which else K_BASE) + koff,
                                             swizzle=128, stride_byte_offset=1024)
                    db = kj.wgmma.descriptor(smem, (dos if which else qs) + qoff,
                                             swizzle=128, stride_byte_offset=1024)
                    if which:
                        kj.wgmma.mma_async(dp_acc, da, db, shape=(64, BM, 16), dtype=dtype,
                                           scale_d=kk > 0)
                    else:
                        kj.wgmma.mma_async(st_acc, da, db, shape=(64, BM, 16), dtype=dtype,
                                           scale_d=kk > 0)
            kj.wgmma.commit_group()
            kj.wgmma.wait_group(0, st_acc)
            kj.wgmma.wait_group(0, dp_acc)
            # P^T and dS^T, masked: keys past the end, queries past the end, causal; column
            # by column, each column's lse and Delta loaded once and used by its 4 elements
            # right away (all 16 columns' values staged in registers, or each element loading
            # its own, spill the head dim 128 kernel more: 116 / 140 B against 72 / 92 B)
            for cc in kj.static_range(BM // 8 * 2):  # a query column: lse, Delta loaded once
                col = m0 + 8 * (cc // 2) + 2 * qd + cc % 2
                lse_c = kj.float32(0.0)
                delta_c = kj.float32(0.0)
                if col < len_q:
                    lse_c = lse[lrow, lse_col + col] * LOG2E
                    delta_c = delta[lrow, lse_col + col]
                for half in kj.static_range(2):  # its elements of keys key_a and key_a + 8
                    i = 4 * (cc // 2) + 2 * half + cc % 2
                    key = key_a + 8 * half
                    seen = key < len_k and col < len_q
                    if causal:
                        seen = seen and key <= col + shift
                    p = kj.float32(0.0)
                    ds = kj.float32(0.0)
                    if seen:  # the row saw a key, so its lse is finite
                        p = kj.ex2_approx(kj.fma(st_acc[i], scale_log2, -lse_c))
                        ds = p * (dp_acc[i] - delta_c)
                    st_acc[i] = p
                    dp_acc[i] = ds
            kj.wgmma.acc_to_a(st_acc, p_words, dtype, n=BM)
            kj.wgmma.acc_to_a(dp_acc, ds_words, dtype, n=BM)
            # dS^T to shared memory: row key (128 bytes of queries), 16-byte chunks swizzled
            for j in C_IDX:
                r = 64 * c + 16 * warp + g + 8 * (j % 2)
                byte = r * 128 + (((j // 2) ^ (r % 8)) * 16) + 4 * qd
                words[DS_BASE // 2 + byte // 4] = ds_words[j]
            kj.wgmma.fence_proxy_async()
            # dV += P^T dO, dK += dS^T Q (queries are the K dimension; Q, dO MN-major)
            kj.wgmma.fence()
            for kk in kj.static_range(BM // 16):
                kj.wgmma.mma_async(dv_acc, p_words[4 * kk:], kj.wgmma.descriptor(
                    smem, dos + kk * 16 * ATOM, swizzle=128, leading_byte_offset=BM * 128,
                    stride_byte_offset=1024), shape=(64, D, 16), dtype=dtype, trans_b=1)
            for kk in kj.static_range(BM // 16):
                kj.wgmma.mma_async(dk_acc, ds_words[4 * kk:], kj.wgmma.descriptor(
                    smem, qs + kk * 16 * ATOM, swizzle=128, leading_byte_offset=BM * 128,
                    stride_byte_offset=1024), shape=(64, D, 16), dtype=dtype, trans_b=1)
            kj.wgmma.commit_group()
            if DQ_REDUCE and t % 128 == 0 and c < DQ_WGS:
                kj.tma.wait_group_read(0)  # the last step's reduce-adds have read my buffer
            kj.syncthreads()                    # all of dS^T is stored, the dQ buffers free
            # dQ[:, 64c:64c+64] = dS K[:, 64c:64c+64]: A = dS (queries x keys) M-major
            if c < DQ_WGS:
                kj.wgmma.fence()
                for kk in kj.static_range(BN // 16):
                    kj.wgmma.mma_async(dq_part, kj.wgmma.descriptor(
                        smem, DS_BASE + kk * 16 * ATOM, swizzle=128,
                        leading_byte_offset=BN * 128, stride_byte_offset=1024),
                        kj.wgmma.descriptor(smem, K_BASE + c * KV_ATOM + kk * 16 * ATOM,
                                            swizzle=128, leading_byte_offset=BN * 128,
                                            stride_byte_offset=1024),
                        shape=(64, ATOM, 16), dtype=dtype, scale_d=kk > 0, trans_a=1,
                        trans_b=1)
                kj.wgmma.commit_group()
                kj.wgmma.wait_group(0, dq_part)
            kj.wgmma.wait_group(0, dv_acc)
            kj.wgmma.wait_group(0, dk_acc)
            if c < DQ_WGS:
                for _ in kj.static_range(DQ_ADD):
                    for i in Q_IDX:
                        row = m0 + 16 * warp + g + 8 * ((i // 2) % 2)
                        col = 64 * c + 8 * (i // 4) + 2 * qd + i % 2
                        if row < len_q:
                            kj.atomic.add(dq_acc, (q0 + row, h, col), dq_part[i])
                for _ in kj.static_range(DQ_REDUCE):
                    # my part to my buffer: two 64 x 32 boxes, rows of 128 bytes (32 words)
                    # whose 16-byte chunks are XOR-ed with the row % 8 (the 128B swizzle).
                    # Element i sits at row 16 warp + g + 8 ((i // 2) % 2), column 8 (i // 4)
                    # + 2 qd + i % 2: box i // 16, chunk (2 ((i // 4) % 4) + qd // 2) ^ g, so
                    # its word is mine + (swz ^ 8 ((i // 4) % 4)) + a constant; four registers
                    # of addresses, the rest immediate offsets. Rows past the sequence hold
                    # +0.0: a box over its end adds nothing to the next sequence's rows.
                    mine = (DQ_WORDS + c * (DQ_BUFFER // 4) + (16 * warp + g) * DQ_HALF
                            + 2 * (qd % 2))
                    # (m0 + g) % 8 is g % 8 (m0 is a multiple of 64), but LLVM cannot know
                    # it: the addresses stay in the loop instead of 16 64-bit ones hoisted out
                    # of it and held across it (ptxas then spilled 300 B at head dim 128)
                    swz = 4 * ((qd // 2) ^ ((m0 + g) % 8))
                    for i in Q_IDX:
                        v = kj.float32(0.0)
                        if m0 + 16 * warp + g + 8 * ((i // 2) % 2) < len_q:
                            v = dq_part[i]
                        floats[mine + (swz ^ (8 * ((i // 4) % 4))) + (i // 16) * (BM * DQ_HALF)
                               + ((i // 2) % 2) * 8 * DQ_HALF + i % 2] = v
                    kj.fence_proxy_async()  # my stores, before the async proxy reads them
            kj.syncthreads()                    # stage s and dS^T are free, dQ parts stored
            for _ in kj.static_range(DQ_REDUCE):  # (typed only in this mode: dq_map's)
                if t % 128 == 0 and c < DQ_WGS:
                    for half in kj.static_range(2):
                        kj.tma.reduce_add(dq_map, q0 + m0, h, 64 * c + DQ_HALF * half,
                                          floats[DQ_WORDS + c * (DQ_BUFFER // 4)
                                                 + half * (BM * DQ_HALF):])
                    kj.tma.commit_group()
            if t == 0 and step + 2 < total:
                nh = hk * group + (step + 2) // n_tiles
                nm = m_start + ((step + 2) % n_tiles) * BM
                kj.mbarrier.arrive_expect_tx(bars[1 + s:], TILE_BYTES)
                for a in kj.static_range(ATOMS):
                    kj.tma.load(smem[qs + a * Q_ATOM:], q_map, q0 + nm, nh, a * ATOM,
                                bars[1 + s:])
                    kj.tma.load(smem[dos + a * Q_ATOM:], do_map, q0 + nm, nh, a * ATOM,
                                bars[1 + s:])
        if DQ_REDUCE and t % 128 == 0 and c < DQ_WGS:
            kj.tma.wait_group(0)  # the reduce-adds done before the block's memory goes
        # dK (scaled) and dV for this warpgroup's 64 keys
        for i in D_IDX:
            key = key_a + 8 * ((i // 2) % 2)
            col = 8 * (i // 4) + 2 * qd + i % 2
            if key < len_k:
                dk[k0 + key, hk, col] = dtype(dk_acc[i] * (scale_log2 / LOG2E))
                dv[k0 + key, hk, col] = dtype(dv_acc[i])

    return main


_KERNELS: dict = {}


def kernels(cfg: BackwardConfig):
    """(prepare, main, finish) for ``cfg``, made once."""
    found = _KERNELS.get(cfg)
    if found is None:
        found = _KERNELS[cfg] = (make_prepare(cfg.dtype, cfg.head_dim), make_main(cfg),
                                 make_finish(cfg.dtype))
    return found


__all__ = ["BM", "BN", "DQ_HALF", "DQ_MODES", "THREADS", "BackwardConfig", "kernels"]
