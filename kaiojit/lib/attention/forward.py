"""The attention forward kernel: FlashAttention-3's structure, written in kaiojit.

A block of 384 threads owns BM = 128 query rows of one (sequence, head):

* warpgroup 0, the producer: one thread loads the Q tile once and then K and V tiles of
  BN = 128 keys through a ring of ``stages`` shared buffers by TMA (128-byte swizzled atoms of
  64 columns; a head dim of 128 is two atoms), each tile completing on its own ``full``
  mbarrier; before reusing a buffer it waits on the buffer's ``empty`` mbarrier;
* warpgroups 1 and 2, the consumers, each own 64 of the rows: ``S = Q K^T`` by wgmma from shared
  memory, then an online softmax in registers (row max and sum over the 4 lanes sharing a row by
  shuffles, ``ex2.approx`` with the softmax scale and log2(e) folded into one multiply), then
  ``O += P V`` with P converted in registers to the A operand of a register-A wgmma (the
  accumulator's layout is the A fragment's: no shuffles) and V read MN-major; each consumer
  thread then arrives on the buffer's ``empty`` barrier.
* the epilogue divides by the row sums, writes O in the input type and the log-sum-exp
  ``lse = scale * max + log(sum)`` (natural log, float32; ``-inf`` for a row that sees no key,
  whose output is 0).

Causal masks are bottom-right aligned (FlashAttention's convention, the same as PyTorch's
top-left one for square problems): query row ``i`` of a sequence of ``len_q`` sees keys
``j <= i + len_k - len_q``. The producer and consumers run the same loop over key tiles, the
producer's branch first in each iteration: on the GPU the warpgroups run apart, bounded by the
barriers; on the cpu backend, which runs a block's threads statement by statement, every wait
is then already satisfied when it is reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import kaiojit as kj

BM, BN = 128, 128     # query rows a block, keys a tile
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # after setmaxnreg (384 threads start at 168)
ATOM = 64             # columns of one 128-byte swizzled atom (16-bit elements)
THREADS = 384         # a producer warpgroup and two consumer warpgroups
NEG_INF = -math.inf
LN2 = math.log(2.0)
# whether kaiojit.lib.attention's forward uses the intra-warpgroup overlap, by head dim (both
# schedules compute the same; benchmarks/attention.py times both)
OVERLAP_BY_HEAD_DIM = {64: False, 128: False}
# the lockstep form on the GPU too (the gpu tests compare both forms); the cpu backend always
# runs it
LOCKSTEP_ON_GPU = False


@dataclass(frozen=True)
class ForwardConfig:
    """What a forward kernel is specialised on."""

    head_dim: int        # 64 or 128
    dtype: str           # "bf16" or "f16"
    causal: bool
    varlen: bool         # cumulative sequence lengths (else fixed lengths)
    # FA3's intra-warpgroup overlap: P_{j-1} V_{j-1} runs under the softmax of S_j (one more
    # S tile of registers live: spills at 168 registers for head dim 128)
    overlap: bool = False
    # the producer's step merged into the consumers' loop: what the cpu backend runs (see
    # make_forward); the GPU runs the split form
    lockstep: bool = True
    # register reallocation (setmaxnreg) between producer and consumers, split form only
    reg_alloc: bool = True

    @property
    def stages(self) -> int:
        return 2 if self.head_dim == 128 else 3

    def shared_bytes(self) -> int:
        """Dynamic shared memory: the Q tile and ``stages`` K and V tiles."""
        return 2 * self.head_dim * (BM + 2 * self.stages * BN)


def make_forward(cfg: ForwardConfig):
    """The kernel ``fwd(o, lse, q_map, k_map, v_map, cu_q, cu_k, seqlen_q, seqlen_k, group,
    scale_log2)`` for ``cfg``; launch with grid (query blocks, heads, batch), 384 threads and
    ``cfg.shared_bytes()`` of dynamic shared memory."""
    D = cfg.head_dim
    dtype = {"bf16": kj.bfloat16, "f16": kj.float16}[cfg.dtype]
    causal, varlen, STAGES = cfg.causal, cfg.varlen, cfg.stages
    ATOMS = D // ATOM
    Q_ATOM, KV_ATOM = BM * ATOM, BN * ATOM   # elements of one atom of a tile
    KV = BN * D                              # elements of a K or V tile
    K_BASE = BM * D
    V_BASE = K_BASE + STAGES * KV
    TILE_BYTES = 2 * BN * D
    Q_BYTES = 2 * BM * D
    S_IDX = tuple(range(BN // 2))            # a thread's accumulator elements of S (and P)
    O_IDX = tuple(range(D // 2))             # and of O
    EMPTY_COUNT = 8                          # one arrival a consumer warp (its lane 0)
    OVERLAP = int(cfg.overlap)
    LOCKSTEP = cfg.lockstep
    PARTS = 1 if LOCKSTEP else 2
    # setmaxnreg in the split form: 128 x 40 + 256 x 232 = 64,512 of the 65,536 registers
    REG_ALLOC = not LOCKSTEP and cfg.reg_alloc

    @kj.jit(device=True)
    def key_limit(row, len_q, len_k):
        """One past the last key query ``row`` sees."""
        if causal:
            return min(len_k, row + 1 + len_k - len_q)
        return len_k

    # 384 threads: at most 168 registers each (65536 / 384, in steps of 8)
    @kj.jit(max_registers=168)
    def fwd(o, lse, q_map, k_map, v_map, cu_q, cu_k, seqlen_q, seqlen_k, group, scale_log2):
        smem = kj.shared.array(0, dtype)
        # q; k_full[s], v_full[s]; k_empty[s], v_empty[s]
        bars = kj.shared.array(1 + 4 * STAGES, kj.uint64)
        t = kj.threadIdx.x
        wg = t // 128
        h = kj.blockIdx.y
        bi = kj.blockIdx.z
        mb = kj.blockIdx.x
        if causal:  # the longest rows first: they finish with the grid's last wave otherwise
            mb = kj.gridDim.x - 1 - mb
        if varlen:
            q0 = cu_q[bi]
            len_q = cu_q[bi + 1] - q0
            k0 = cu_k[bi]
            len_k = cu_k[bi + 1] - k0
            lse_row, lse_col = h, q0          # lse: (heads, total_q)
        else:
            q0 = bi * seqlen_q
            len_q = seqlen_q
            k0 = bi * seqlen_k
            len_k = seqlen_k
            lse_row, lse_col = bi * kj.gridDim.y + h, 0  # lse: (batch * heads, seqlen_q)
        m0 = mb * BM
        if m0 >= len_q:
            return
        hk = h // group
        n_tiles = max((key_limit(m0 + BM - 1, len_q, len_k) + BN - 1) // BN, 0)
        if t == 0:
            kj.mbarrier.init(bars[0:], 1)
            for s in kj.static_range(2 * STAGES):
                kj.mbarrier.init(bars[1 + s:], 1)
                kj.mbarrier.init(bars[1 + 2 * STAGES + s:], EMPTY_COUNT)
            kj.fence_proxy_async()
        kj.syncthreads()

        # consumer state (the producer's copies go unused)
        c = wg - 1
        warp, lane = (t % 128) // 32, t % 32
        row_a = m0 + 64 * c + 16 * warp + lane // 4   # this thread's rows: row_a, row_a + 8
        col_q = 2 * (lane % 4)
        q_rows = c * 64 * ATOM                        # this warpgroup's rows of a Q atom
        s_acc = kj.local.array(BN // 2, kj.float32)
        o_acc = kj.local.array(D // 2, kj.float32)
        p_words = kj.local.array(BN // 4, kj.uint32)
        for i in O_IDX:
            o_acc[i] = 0.0
        m_a, m_b = kj.float32(NEG_INF), kj.float32(NEG_INF)
        l_a, l_b = kj.float32(0.0), kj.float32(0.0)
        alpha_a, alpha_b = kj.float32(1.0), kj.float32(1.0)
        lim_a = key_limit(row_a, len_q, len_k)
        lim_b = key_limit(row_a + 8, len_q, len_k)
        if wg == 0:
            if t == 0:
                kj.mbarrier.arrive_expect_tx(bars[0:], Q_BYTES)
                for a in kj.static_range(ATOMS):
                    kj.tma.load(smem[a * Q_ATOM:], q_map, q0 + m0, h, a * ATOM, bars[0:])
        else:
            kj.mbarrier.wait(bars[0:], 0)
        # iteration j: the producer loads tile j; a consumer computes S_j and P_j, and
        # O += P V of tile j (or, overlapped, of tile j - 1 under the softmax of S_j)
        # lockstep (the cpu backend, which runs a block's threads branch by branch): one loop,
        # each iteration the producer's step then the consumers'; split (the GPU): part 0 is
        # the producer warpgroup's own loop, part 1 the consumers' (ptxas then sees their
        # registers apart), the other warpgroups' loop running no iteration
        for part in kj.static_range(PARTS):
            producing = LOCKSTEP or part == 0
            consuming = LOCKSTEP or part == 1
            if LOCKSTEP or (wg == 0) == (part == 0):  # this warpgroup's part
                if REG_ALLOC and part == 0:   # the producer gives registers up ...
                    kj.warpgroup.reg_dealloc(PRODUCER_REGS)
                if REG_ALLOC and part == 1:   # ... for the consumers' S, P and O
                    kj.warpgroup.reg_alloc(CONSUMER_REGS)
                for j in range(n_tiles + OVERLAP):
                    s = j % STAGES
                    use = j // STAGES
                    sp = (j + STAGES - 1) % STAGES          # the stage of tile j - 1
                    if producing and wg == 0 and t == 0 and j < n_tiles:
                        kbar, vbar = bars[1 + s:], bars[1 + STAGES + s:]
                        if use > 0:
                            kj.mbarrier.wait(bars[1 + 2 * STAGES + s:], (use - 1) % 2)
                        kj.mbarrier.arrive_expect_tx(kbar, TILE_BYTES)
                        for a in kj.static_range(ATOMS):
                            kj.tma.load(smem[K_BASE + s * KV + a * KV_ATOM:], k_map, k0 + j * BN,
                                        hk, a * ATOM, kbar)
                        if use > 0:
                            kj.mbarrier.wait(bars[1 + 3 * STAGES + s:], (use - 1) % 2)
                        kj.mbarrier.arrive_expect_tx(vbar, TILE_BYTES)
                        for a in kj.static_range(ATOMS):
                            kj.tma.load(smem[V_BASE + s * KV + a * KV_ATOM:], v_map, k0 + j * BN,
                                        hk, a * ATOM, vbar)
                    if consuming and wg > 0:
                        # stage 0 issues S_j = Q K_j^T; stage 2 waits for it and computes P_j by
                        # the online softmax. O += P V is issued in stage 1 for tile j - 1
                        # (overlap: it runs under the softmax) or in stage 3 for tile j.
                        for stage in kj.static_range(4):
                            pv = j - OVERLAP  # the tile whose P V this stage issues
                            if stage == 3 - 2 * OVERLAP and pv >= 0 and pv < n_tiles:
                                st = pv % STAGES
                                vo = V_BASE + st * KV
                                kj.mbarrier.wait(bars[1 + STAGES + st:], (pv // STAGES) % 2)
                                kj.wgmma.fence()
                                for kk in kj.static_range(BN // 16):  # P in registers, V MN-major
                                    dv = kj.wgmma.descriptor(smem, vo + kk * 16 * ATOM, swizzle=128,
                                                             leading_byte_offset=BN * 128,
                                                             stride_byte_offset=1024)
                                    kj.wgmma.mma_async(o_acc, p_words[4 * kk:], dv, dtype=dtype,
                                                       shape=(64, D, 16), trans_b=1)
                                kj.wgmma.commit_group()
                                if not OVERLAP:
                                    kj.wgmma.wait_group(0, o_acc)
                                    if lane == 0:  # V_j is read (wait_group is warp-wide)
                                        kj.mbarrier.arrive(bars[1 + 3 * STAGES + st:])
                            if stage == 0 and j < n_tiles:  # S_j for this warpgroup's 64 rows
                                kj.mbarrier.wait(bars[1 + s:], use % 2)
                                kj.wgmma.fence()
                                ko = K_BASE + s * KV
                                for kk in kj.static_range(D // 16):
                                    step = (kk % 4) * 16  # a k16 slice: 32 bytes into the atom
                                    dq = kj.wgmma.descriptor(smem, (kk // 4) * Q_ATOM + q_rows
                                                             + step, swizzle=128,
                                                             stride_byte_offset=1024)
                                    dk = kj.wgmma.descriptor(smem, ko + (kk // 4) * KV_ATOM + step,
                                                             swizzle=128, stride_byte_offset=1024)
                                    kj.wgmma.mma_async(s_acc, dq, dk, shape=(64, BN, 16),
                                                       dtype=dtype, scale_d=kk > 0)
                                kj.wgmma.commit_group()
                            if stage == 2 and j < n_tiles:
                                if OVERLAP and j > 0:
                                    kj.wgmma.wait_group(1, s_acc)   # S_j done, P V may still run
                                else:
                                    kj.wgmma.wait_group(0, s_acc)
                                if lane == 0:  # K_j is read
                                    kj.mbarrier.arrive(bars[1 + 2 * STAGES + s:])
                                n0 = j * BN  # masks: keys past the end or a row's causal limit
                                if n0 + BN > lim_a or n0 + BN > lim_b:
                                    for i in S_IDX:
                                        col = n0 + 8 * (i // 4) + col_q + i % 2
                                        if (i // 2) % 2 == 0:
                                            if col >= lim_a:
                                                s_acc[i] = NEG_INF
                                        elif col >= lim_b:
                                            s_acc[i] = NEG_INF
                                # the online softmax: row maxima over the 4 lanes of a row
                                mx_a, mx_b = m_a, m_b
                                for i in S_IDX:
                                    if (i // 2) % 2 == 0:
                                        mx_a = max(mx_a, s_acc[i])
                                    else:
                                        mx_b = max(mx_b, s_acc[i])
                                mx_a = max(mx_a, kj.shfl_xor_sync(0xFFFFFFFF, mx_a, 1))
                                mx_a = max(mx_a, kj.shfl_xor_sync(0xFFFFFFFF, mx_a, 2))
                                mx_b = max(mx_b, kj.shfl_xor_sync(0xFFFFFFFF, mx_b, 1))
                                mx_b = max(mx_b, kj.shfl_xor_sync(0xFFFFFFFF, mx_b, 2))
                                # a row that has seen no key yet keeps max -inf: subtract 0
                                use_a = mx_a * scale_log2 if mx_a != NEG_INF else kj.float32(0.0)
                                use_b = mx_b * scale_log2 if mx_b != NEG_INF else kj.float32(0.0)
                                alpha_a = kj.ex2_approx(m_a * scale_log2 - use_a)
                                alpha_b = kj.ex2_approx(m_b * scale_log2 - use_b)
                                m_a, m_b = mx_a, mx_b
                                sum_a, sum_b = kj.float32(0.0), kj.float32(0.0)
                                for i in S_IDX:
                                    if (i // 2) % 2 == 0:
                                        p = kj.ex2_approx(kj.fma(s_acc[i], scale_log2, -use_a))
                                        sum_a += p
                                    else:
                                        p = kj.ex2_approx(kj.fma(s_acc[i], scale_log2, -use_b))
                                        sum_b += p
                                    s_acc[i] = p
                                l_a = l_a * alpha_a + sum_a
                                l_b = l_b * alpha_b + sum_b
                            if stage == 2 and OVERLAP and j > 0:  # P_{j-1} V_{j-1} is done
                                kj.wgmma.wait_group(0, o_acc)
                                if lane == 0:
                                    kj.mbarrier.arrive(bars[1 + 3 * STAGES + sp:])
                            if stage == 2 and j < n_tiles:  # O to the new maxima; P_j to registers
                                for i in O_IDX:
                                    if (i // 2) % 2 == 0:
                                        o_acc[i] *= alpha_a
                                    else:
                                        o_acc[i] *= alpha_b
                                kj.wgmma.acc_to_a(s_acc, p_words, dtype, n=BN)
                if not LOCKSTEP and part == 0:
                    return
        if wg > 0:
            l_a += kj.shfl_xor_sync(0xFFFFFFFF, l_a, 1)
            l_a += kj.shfl_xor_sync(0xFFFFFFFF, l_a, 2)
            l_b += kj.shfl_xor_sync(0xFFFFFFFF, l_b, 1)
            l_b += kj.shfl_xor_sync(0xFFFFFFFF, l_b, 2)
            inv_a = 1.0 / l_a if l_a > 0.0 else kj.float32(0.0)
            inv_b = 1.0 / l_b if l_b > 0.0 else kj.float32(0.0)
            for i in O_IDX:
                col = 8 * (i // 4) + col_q + i % 2
                if (i // 2) % 2 == 0:
                    if row_a < len_q:
                        o[q0 + row_a, h, col] = dtype(o_acc[i] * inv_a)
                elif row_a + 8 < len_q:
                    o[q0 + row_a + 8, h, col] = dtype(o_acc[i] * inv_b)
            if lane % 4 == 0:
                if row_a < len_q:
                    lse[lse_row, lse_col + row_a] = ((m_a * scale_log2 + math.log2(l_a)) * LN2
                                                     if l_a > 0.0 else kj.float32(NEG_INF))
                if row_a + 8 < len_q:
                    lse[lse_row, lse_col + row_a + 8] = ((m_b * scale_log2 + math.log2(l_b))
                                                         * LN2 if l_b > 0.0
                                                         else kj.float32(NEG_INF))

    return fwd


_KERNELS: dict = {}


def forward_kernel(cfg: ForwardConfig):
    """The kernel for ``cfg``, made once."""
    kernel = _KERNELS.get(cfg)
    if kernel is None:
        kernel = _KERNELS[cfg] = make_forward(cfg)
    return kernel


__all__ = ["BM", "BN", "OVERLAP_BY_HEAD_DIM", "THREADS", "ForwardConfig", "forward_kernel",
           "make_forward"]
