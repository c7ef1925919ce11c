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

The consumers follow one of four schedules (``SCHEDULES``; docs/attention.md): serial, FA3's
intra-warpgroup overlap (``P_{j-1} V_{j-1}`` under the softmax of ``S_j``, the loop peeled so
ptxas keeps the wgmmas asynchronous), FA3's ping-pong between the two consumers (named
barriers), or both.

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
# the consumers' schedules (ForwardConfig's overlap and pingpong; see make_forward):
SCHEDULES = {"serial": (False, False), "overlap": (True, False), "pingpong": (False, True),
             "overlap+pingpong": (True, True)}
# the schedule kaiojit.lib.attention's forward uses, by head dim (all compute the same;
# benchmarks/attention.py times each; overlap+pingpong was the fastest on an H100 machine,
# geometric mean over 1K-16K, causal and not, at both head dims)
SCHEDULE_BY_HEAD_DIM = {64: "overlap+pingpong", 128: "overlap+pingpong"}
# the lockstep form on the GPU too (the gpu tests compare both forms); the cpu backend always
# runs it
LOCKSTEP_ON_GPU = False
PINGPONG_BAR = 1      # the first consumer's named barrier; the second's is the next one
EPILOGUE_BAR = 3      # the first consumer's epilogue barrier (its 128 threads); then the second's
O_BOX = (64, 1, ATOM)  # O's tensor map: a consumer's 64 rows of one head, one atom
# the epilogue and grid forms (ForwardConfig's epilogue, persistent): "regs" stores O from the
# registers (2 bytes a store, in the accumulator's layout), "smem" through the Q tile's shared
# memory and the copy engine, "persistent" that with one block an SM walking the work items
# (docs/attention.md)
FORMS = {"regs": ("registers", False), "smem": ("smem", False), "persistent": ("smem", True)}
# the form kaiojit.lib.attention's forward uses, by head dim (benchmarks/attention.py times each;
# on an H100 machine "smem" was the fastest with overlap+pingpong on 11 of 12 shapes, 1-10%
# ahead of "regs"; "persistent" on one, d=128 causal 1K)
FORM_BY_HEAD_DIM = {64: "smem", 128: "smem"}
# the persistent form's grid: None, one block an SM (kj.sm_count()); the tests set a few
PERSISTENT_BLOCKS: int | None = None


@dataclass(frozen=True)
class ForwardConfig:
    """What a forward kernel is specialised on."""

    head_dim: int        # 64 or 128
    dtype: str           # "bf16" or "f16"
    causal: bool
    varlen: bool         # cumulative sequence lengths (else fixed lengths)
    # FA3's intra-warpgroup overlap: P_{j-1} V_{j-1} runs under the softmax of S_j (one more
    # S tile of registers live)
    overlap: bool = False
    # the producer's step merged into the consumers' loop: what the cpu backend runs (see
    # make_forward); the GPU runs the split form
    lockstep: bool = True
    # register reallocation (setmaxnreg) between producer and consumers, split form only
    reg_alloc: bool = True
    # FA3's inter-warpgroup ping-pong: the consumers take turns at the tensor cores, one's
    # softmax under the other's GEMMs (named barriers)
    pingpong: bool = False
    # O's way out: "registers" (stored from the accumulator, 2 bytes a store) or "smem" (into
    # the Q tile's shared memory by stmatrix, then TMA stores)
    epilogue: str = "registers"
    # a grid of one block an SM, each walking work items (query block, head, sequence); the
    # shared-memory epilogue only
    persistent: bool = False

    @classmethod
    def scheduled(cls, head_dim: int, dtype: str, causal: bool, varlen: bool, schedule: str,
                  lockstep: bool, form: str = "regs") -> ForwardConfig:
        """The configuration of a named schedule (a key of ``SCHEDULES``) and form (of
        ``FORMS``)."""
        overlap, pingpong = SCHEDULES[schedule]
        epilogue, persistent = FORMS[form]
        return cls(head_dim, dtype, causal, varlen, overlap, lockstep, pingpong=pingpong,
                   epilogue=epilogue, persistent=persistent)

    @property
    def stages(self) -> int:
        return 2 if self.head_dim == 128 else 3

    def shared_bytes(self) -> int:
        """Dynamic shared memory: the Q tile and ``stages`` K and V tiles (and, persistent, the
        O tile)."""
        return 2 * self.head_dim * (BM * (1 + self.persistent) + 2 * self.stages * BN)


def make_forward(cfg: ForwardConfig):
    """The kernel ``fwd(o, lse, q_map, k_map, v_map, o_map, cu_q, cu_k, seqlen_q, seqlen_k,
    group, scale_log2)`` for ``cfg``; launch with grid (query blocks, heads, batch) (persistent:
    (blocks,), any number), 384 threads and ``cfg.shared_bytes()`` of dynamic shared memory.
    ``o_map`` is O's tensor map (boxes of 64 rows, one head, 64 columns, 128-byte swizzle) for
    the shared-memory epilogue; the register epilogue never reads it (any map of O's type will
    do). ``seqlen_q`` is the longest sequence's length with ``varlen`` (the persistent grid's
    query blocks a sequence). ``lse`` is the log-sum-exp's contiguous array, flattened to 1-d
    (its rows are (batch * heads, seqlen_q), or with ``varlen`` (heads, o's rows)): flat, its
    specialization does not depend on whether a row's 4 * seqlen_q bytes are a multiple of 16,
    so every sequence length runs one compiled kernel.

    Persistent, each block walks the items ``blockIdx.x, + gridDim.x, ...``; the producer
    reloads Q once the consumers' warps arrived on the ``q_empty`` mbarrier after their last
    GEMM of the item, so the next item's Q and first K/V tiles load under this item's
    epilogue (O has a buffer of its own). That arrival also keeps the ping-pong's named
    barriers paired across items: the first consumer's next turn waits for Q, which waits for
    the second consumer's last turn of the item."""
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
    PINGPONG = int(cfg.pingpong)
    SMEM_EPILOGUE = int(cfg.epilogue == "smem")
    PERSISTENT = int(cfg.persistent)
    # the shared-memory epilogue's buffer: the Q tile, or (persistent: the next item's Q
    # loads during this one's epilogue) its own, after the stages
    O_BASE = K_BASE + 2 * STAGES * KV if PERSISTENT else 0
    Q_EMPTY = 1 + 4 * STAGES                 # the Q tile's "empty" mbarrier (persistent)
    PHASES = 3 if OVERLAP else 1      # overlapped: the first tile, the steady loop, the last P V
    SECTIONS = 1 if OVERLAP else 2    # the passes of the ping-pong token an iteration
    ARMS = 2 if LOCKSTEP and PINGPONG else 1  # lockstep ping-pong: one consumer, then the other
    # compile-time flags (see the consumers' loop): by phase, S_j issued, P_{j-1} V_{j-1}
    # issued behind it, the last pass of the ping-pong token; by part, the producer's and the
    # consumers' code; by section x arm, the section
    S_HERE = (1, 1, 0) if OVERLAP else (1,)
    PV_EARLY = (0, 1, 1) if OVERLAP else (0,)
    LAST_PASS = (0, 0, 1) if OVERLAP else (0,)
    PRODUCES = (1,) if LOCKSTEP else (1, 0)
    CONSUMES = (1,) if LOCKSTEP else (0, 1)
    SEC = tuple(i // ARMS for i in range(SECTIONS * ARMS))

    @kj.jit(device=True)
    def key_limit(row, len_q, len_k):
        """One past the last key query ``row`` sees."""
        if causal:
            return min(len_k, row + 1 + len_k - len_q)
        return len_k

    @kj.jit(device=True)
    def store_o_smem(o, o_map, o_acc, inv_a, inv_b, q0, m0, len_q, h, c, t):
        """O through shared memory: a consumer warpgroup's 64 rows, rounded to pairs and
        stmatrix'd in the 128-byte swizzle into its rows of the O buffer (non-persistent: of
        the Q tile, free once the warpgroup's S GEMMs, its only readers, retired; Q had landed
        before them), then one TMA store an atom, or, for a half that crosses the sequence's
        end (the next sequence's rows follow), 16-byte copies of the rows inside."""
        smem = kj.shared.array(0, dtype)  # the kernel's (addressed directly: 16-byte copies)
        warp, lane = (t % 128) // 32, t % 32
        rows = O_BASE + c * 64 * ATOM  # the warpgroup's rows of the buffer's first atom
        for _ in kj.static_range(PERSISTENT):  # the last item's store has read the buffer,
            if t % 128 == 0:                   # and every thread its copies
                kj.tma.wait_group_read(0)
            kj.named_barrier.sync(EPILOGUE_BAR + c, 128)
        mi = lane // 8  # this lane's matrix of an x4, and the row it addresses
        row = 16 * warp + lane % 8 + 8 * (mi % 2)
        for a in kj.static_range(ATOMS):
            for jj in kj.static_range(ATOM // 16):
                j = a * ATOM // 8 + 2 * jj  # the accumulator's 8-column blocks j, j + 1
                chunk = (2 * jj + mi // 2) ^ (row % 8)  # its 16-byte chunk, swizzled
                kj.stmatrix(smem, a * Q_ATOM + rows + row * ATOM + chunk * 8,
                            kj.cvt_pack(dtype, o_acc[4 * j] * inv_a, o_acc[4 * j + 1] * inv_a),
                            kj.cvt_pack(dtype, o_acc[4 * j + 2] * inv_b,
                                        o_acc[4 * j + 3] * inv_b),
                            kj.cvt_pack(dtype, o_acc[4 * j + 4] * inv_a,
                                        o_acc[4 * j + 5] * inv_a),
                            kj.cvt_pack(dtype, o_acc[4 * j + 6] * inv_b,
                                        o_acc[4 * j + 7] * inv_b))
        r0 = m0 + 64 * c  # the warpgroup's first row
        if r0 + 64 <= len_q:  # all inside the sequence: the copy engine stores them
            kj.fence_proxy_async()  # the writes, before the copy engine's reads
            kj.named_barrier.sync(EPILOGUE_BAR + c, 128)
            if t % 128 == 0:
                for a in kj.static_range(ATOMS):
                    kj.tma.store(o_map, q0 + r0, h, a * ATOM, smem[a * Q_ATOM + rows:])
                kj.tma.commit_group()
                for _ in kj.static_range(1 - PERSISTENT):
                    kj.tma.wait_group_read(0)  # read before the block's memory goes
        else:  # 16 bytes a thread, the rows inside
            kj.named_barrier.sync(EPILOGUE_BAR + c, 128)
            for part in kj.static_range(D * 64 // (8 * 128)):
                idx = part * 128 + t % 128  # (row, 16-byte chunk of the row)
                r = idx // (D // 8)
                ch = idx % (D // 8)
                if r0 + r < len_q:
                    src = rows + (ch // 8) * Q_ATOM + r * ATOM + ((ch ^ r) % 8) * 8  # swizzled
                    for e in kj.static_range(8):
                        o[q0 + r0 + r, h, ch * 8 + e] = smem[src + e]

    # 384 threads: at most 168 registers each (65536 / 384, in steps of 8)
    @kj.jit(max_registers=168)
    def fwd(o, lse, q_map, k_map, v_map, o_map, cu_q, cu_k, seqlen_q, seqlen_k, group,
            scale_log2):
        smem = kj.shared.array(0, dtype)
        # q_full; k_full[s], v_full[s]; k_empty[s], v_empty[s]; q_empty
        bars = kj.shared.array(2 + 4 * STAGES, kj.uint64)
        t = kj.threadIdx.x
        wg = t // 128
        if t == 0:
            kj.mbarrier.init(bars[0:], 1)
            for s in kj.static_range(2 * STAGES):
                kj.mbarrier.init(bars[1 + s:], 1)
                kj.mbarrier.init(bars[1 + 2 * STAGES + s:], EMPTY_COUNT)
            kj.mbarrier.init(bars[Q_EMPTY:], EMPTY_COUNT)
            kj.fence_proxy_async()
        kj.syncthreads()
        heads = o.shape[1]
        # persistent: work items (query block, head, sequence), round robin over the grid;
        # else one item a block, its grid coordinates
        batch = cu_q.shape[0] - 1 if varlen else o.shape[0] // max(seqlen_q, 1)
        n_mb = (seqlen_q + BM - 1) // BM  # seqlen_q: the longest sequence's (varlen)
        first = kj.blockIdx.x if PERSISTENT else 0
        stop = n_mb * heads * batch if PERSISTENT else 1
        stride = kj.gridDim.x if PERSISTENT else 1

        # consumer state (the producer's copies go unused)
        c = (wg + 1) % 2  # a consumer's half: 0, 1 (never negative: aligned vector copies)
        warp, lane = (t % 128) // 32, t % 32
        col_q = 2 * (lane % 4)
        q_rows = c * 64 * ATOM                        # this warpgroup's rows of a Q atom
        s_acc = kj.local.array(BN // 2, kj.float32)
        o_acc = kj.local.array(D // 2, kj.float32)
        p_words = kj.local.array(BN // 4, kj.uint32)
        # The consumers' schedule. Serial: tile j's S, softmax and P V in turn. Overlapped
        # (FA3's intra-warpgroup pipelining), in three phases, so that each phase's wgmma groups
        # in flight are the same on every pass (ptxas serializes them otherwise: C7514): the
        # first tile's S and softmax; then for each later tile j, S_j issued and P_{j-1} V_{j-1}
        # behind it, which runs while the softmax of S_j is computed; then the last tile's P V.
        # Ping-pong (FA3's inter-warpgroup schedule): the consumers pass a token through the
        # named barriers PINGPONG_BAR + c (256 threads: the holder's sync, the other's arrive),
        # the holder issuing its GEMMs while the other computes its softmax; the first consumer
        # holds it first, the second skips its last pass (every barrier phase completes).
        # Lockstep (the cpu backend, which runs a block's threads branch by branch): one loop,
        # each iteration the producer's step, then the consumers' (with ping-pong, each section
        # between passes of the token runs the first consumer's arm, then the second's: the
        # token's order); split (the GPU): part 0 is the producer warpgroup's own loop, part 1
        # the consumers' (ptxas then sees their registers apart).
        # `for _ in kj.static_range(flag)` is an `if` decided at compile time (flag 0 or 1):
        # the code of the other phases and sections is never built.
        # Persistent: the same walk over the items in every part; the stage ring's position
        # (tiles) and Q's barrier parity (items) go on from one item to the next.
        for part in kj.static_range(PARTS):
            if LOCKSTEP or (wg == 0) == (part == 0):  # this warpgroup's part
                if REG_ALLOC and part == 0:   # the producer gives registers up ...
                    kj.warpgroup.reg_dealloc(PRODUCER_REGS)
                if REG_ALLOC and part == 1:   # ... for the consumers' S, P and O
                    kj.warpgroup.reg_alloc(CONSUMER_REGS)
                done = 0                      # items done: Q's barrier parity
                g0 = 0                        # key tiles before this item's: the ring's place
                for item in range(first, stop, stride):
                    if PERSISTENT:
                        if causal:  # the longest rows first, for the round robin's balance
                            mb = n_mb - 1 - item // (heads * batch)
                            rest = item % (heads * batch)
                        else:  # query blocks fastest: the blocks at work share K, V in L2
                            mb = item % n_mb
                            rest = item // n_mb
                        h = rest % heads
                        bi = rest // heads
                    else:
                        h = kj.blockIdx.y
                        bi = kj.blockIdx.z
                        mb = kj.blockIdx.x
                        if causal:  # the longest rows first: they end the grid's last wave
                            mb = kj.gridDim.x - 1 - mb
                    if varlen:
                        q0 = cu_q[bi]
                        len_q = cu_q[bi + 1] - q0
                        k0 = cu_k[bi]
                        len_k = cu_k[bi + 1] - k0
                        lse_at = h * o.shape[0] + q0     # lse: (heads, total_q), flat
                    else:
                        q0 = bi * seqlen_q
                        len_q = seqlen_q
                        k0 = bi * seqlen_k
                        len_k = seqlen_k
                        lse_at = (bi * heads + h) * seqlen_q  # (batch * heads, seqlen_q)
                    m0 = mb * BM
                    if m0 >= len_q:  # past a shorter sequence's end
                        continue
                    hk = h // group
                    n_tiles = max((key_limit(m0 + BM - 1, len_q, len_k) + BN - 1) // BN, 0)
                    row_a = m0 + 64 * c + 16 * warp + lane // 4  # this thread's rows: row_a, +8
                    for i in O_IDX:
                        o_acc[i] = 0.0
                    m_a, m_b = kj.float32(NEG_INF), kj.float32(NEG_INF)
                    l_a, l_b = kj.float32(0.0), kj.float32(0.0)
                    alpha_a, alpha_b = kj.float32(1.0), kj.float32(1.0)
                    lim_a = key_limit(row_a, len_q, len_k)
                    lim_b = key_limit(row_a + 8, len_q, len_k)
                    for _ in kj.static_range(PRODUCES[part]):
                        if wg == 0 and t == 0:
                            if done > 0:  # the consumers' last S GEMMs of the last item retired
                                kj.mbarrier.wait(bars[Q_EMPTY:], (done - 1) % 2)
                            kj.mbarrier.arrive_expect_tx(bars[0:], Q_BYTES)
                            for a in kj.static_range(ATOMS):
                                kj.tma.load(smem[a * Q_ATOM:], q_map, q0 + m0, h, a * ATOM,
                                            bars[0:])
                    for _ in kj.static_range(CONSUMES[part]):
                        if wg > 0:
                            kj.mbarrier.wait(bars[0:], done % 2)
                        if PINGPONG and wg == 1 and n_tiles > 0:
                            kj.named_barrier.arrive(PINGPONG_BAR, 256)
                    for phase in kj.static_range(PHASES):
                        lo = (0, 1, n_tiles)[phase]  # the phases' tiles (one phase if serial)
                        hi = (n_tiles, min(n_tiles, 1), n_tiles, n_tiles + min(n_tiles, 1))[
                            phase + OVERLAP]
                        for j in range(lo, hi):
                            g = g0 + j  # the tile's place in the ring
                            s = g % STAGES
                            use = g // STAGES
                            for _ in kj.static_range(PRODUCES[part] * S_HERE[phase]):
                                if wg == 0 and t == 0:
                                    for kv in kj.static_range(2):  # K_j, then V_j
                                        full = bars[1 + kv * STAGES + s:]
                                        if use > 0:  # the stage's last tile is consumed
                                            kj.mbarrier.wait(bars[1 + (2 + kv) * STAGES + s:],
                                                             (use - 1) % 2)
                                        kj.mbarrier.arrive_expect_tx(full, TILE_BYTES)
                                        for a in kj.static_range(ATOMS):
                                            kj.tma.load(smem[K_BASE + (kv * STAGES + s) * KV
                                                             + a * KV_ATOM:], (k_map, v_map)[kv],
                                                        k0 + j * BN, hk, a * ATOM, full)
                            # section 0: S_j (and the early P V), the softmax; section 1 (serial):
                            # P_j V_j; with ARMS == 2 each section one consumer after the other
                            for sa in kj.static_range(SECTIONS * ARMS * CONSUMES[part]):
                                pv = g - 1 + SEC[sa]  # the tile whose P V this section issues
                                if wg > 0 and (ARMS == 1 or c == sa % ARMS):
                                    for _ in kj.static_range(PINGPONG):  # this consumer's turn
                                        kj.named_barrier.sync(PINGPONG_BAR + c, 256)
                                    for _ in kj.static_range(S_HERE[phase] * (1 - SEC[sa])):
                                        kj.mbarrier.wait(bars[1 + s:], use % 2)  # S_j, 64 rows
                                        kj.wgmma.fence()
                                        ko = K_BASE + s * KV
                                        for kk in kj.static_range(D // 16):
                                            step = (kk % 4) * 16  # a k16 slice: 32 B into the atom
                                            dq = kj.wgmma.descriptor(
                                                smem, (kk // 4) * Q_ATOM + q_rows + step,
                                                swizzle=128, stride_byte_offset=1024)
                                            dk = kj.wgmma.descriptor(
                                                smem, ko + (kk // 4) * KV_ATOM + step, swizzle=128,
                                                stride_byte_offset=1024)
                                            kj.wgmma.mma_async(s_acc, dq, dk, shape=(64, BN, 16),
                                                               dtype=dtype, scale_d=kk > 0)
                                        kj.wgmma.commit_group()
                                    for _ in kj.static_range(PV_EARLY[phase] + SEC[sa]):
                                        st = pv % STAGES  # O += P V, V MN-major
                                        vo = V_BASE + st * KV
                                        kj.mbarrier.wait(bars[1 + STAGES + st:], (pv // STAGES) % 2)
                                        kj.wgmma.fence()  # after the wait's loop (C7519 otherwise)
                                        for kk in kj.static_range(BN // 16):
                                            dv = kj.wgmma.descriptor(
                                                smem, vo + kk * 16 * ATOM, swizzle=128,
                                                leading_byte_offset=BN * 128,
                                                stride_byte_offset=1024)
                                            kj.wgmma.mma_async(o_acc, p_words[4 * kk:], dv,
                                                               dtype=dtype, shape=(64, D, 16),
                                                               trans_b=1)
                                        kj.wgmma.commit_group()
                                    for _ in kj.static_range(PINGPONG):  # the other's turn
                                        if c == 0 or not (LAST_PASS[phase] == 1 or (
                                                SEC[sa] == 1 and j + 1 == n_tiles)):
                                            kj.named_barrier.arrive(PINGPONG_BAR + 1 - c, 256)
                                    for _ in kj.static_range(S_HERE[phase] * (1 - SEC[sa])):
                                        for _w in kj.static_range(PV_EARLY[phase]):
                                            kj.wgmma.wait_group(1, s_acc)  # S_j done; P V may run
                                        for _w in kj.static_range(1 - PV_EARLY[phase]):
                                            kj.wgmma.wait_group(0, s_acc)
                                        if lane == 0:  # K_j is read (wait_group is warp-wide)
                                            kj.mbarrier.arrive(bars[1 + 2 * STAGES + s:])
                                        # masks: keys past the end or a row's causal limit
                                        n0 = j * BN
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
                                        use_a = (mx_a * scale_log2 if mx_a != NEG_INF
                                                 else kj.float32(0.0))
                                        use_b = (mx_b * scale_log2 if mx_b != NEG_INF
                                                 else kj.float32(0.0))
                                        alpha_a = kj.ex2_approx(m_a * scale_log2 - use_a)
                                        alpha_b = kj.ex2_approx(m_b * scale_log2 - use_b)
                                        m_a, m_b = mx_a, mx_b
                                        sum_a, sum_b = kj.float32(0.0), kj.float32(0.0)
                                        for i in S_IDX:
                                            if (i // 2) % 2 == 0:
                                                p = kj.ex2_approx(kj.fma(s_acc[i], scale_log2,
                                                                         -use_a))
                                                sum_a += p
                                            else:
                                                p = kj.ex2_approx(kj.fma(s_acc[i], scale_log2,
                                                                         -use_b))
                                                sum_b += p
                                            s_acc[i] = p
                                        l_a = l_a * alpha_a + sum_a
                                        l_b = l_b * alpha_b + sum_b
                                    # V_j, needed next, waited for here (it came with K_j): the
                                    # wait's loop is a block boundary that keeps ptxas from hoisting
                                    # the wait_group(0) below to the top of the softmax's block (it
                                    # does, and P V then overlaps nothing)
                                    for _ in kj.static_range(PV_EARLY[phase] * S_HERE[phase]):
                                        kj.mbarrier.wait(bars[1 + STAGES + s:], use % 2)
                                    for _ in kj.static_range(PV_EARLY[phase] + SEC[sa]):
                                        kj.wgmma.wait_group(0, o_acc)  # P V is done: V is read
                                        if lane == 0:
                                            kj.mbarrier.arrive(bars[1 + 3 * STAGES + pv % STAGES:])
                                    for _ in kj.static_range(S_HERE[phase] * (1 - SEC[sa])):
                                        for i in O_IDX:  # O to the new maxima; P_j to A registers
                                            if (i // 2) % 2 == 0:
                                                o_acc[i] *= alpha_a
                                            else:
                                                o_acc[i] *= alpha_b
                                        kj.wgmma.acc_to_a(s_acc, p_words, dtype, n=BN)
                    if CONSUMES[part] == 1 and wg > 0:
                        for _ in kj.static_range(PERSISTENT):  # Q may be refilled: S is done
                            if lane == 0:  # (wait_group is warp-wide)
                                kj.mbarrier.arrive(bars[Q_EMPTY:])
                        l_a += kj.shfl_xor_sync(0xFFFFFFFF, l_a, 1)
                        l_a += kj.shfl_xor_sync(0xFFFFFFFF, l_a, 2)
                        l_b += kj.shfl_xor_sync(0xFFFFFFFF, l_b, 1)
                        l_b += kj.shfl_xor_sync(0xFFFFFFFF, l_b, 2)
                        inv_a = 1.0 / l_a if l_a > 0.0 else kj.float32(0.0)
                        inv_b = 1.0 / l_b if l_b > 0.0 else kj.float32(0.0)
                        for _ in kj.static_range(SMEM_EPILOGUE):
                            store_o_smem(o, o_map, o_acc, inv_a, inv_b, q0, m0, len_q, h, c, t)
                        for _ in kj.static_range(1 - SMEM_EPILOGUE):
                            for i in O_IDX:  # from registers, 2 bytes a store
                                col = 8 * (i // 4) + col_q + i % 2
                                if (i // 2) % 2 == 0:
                                    if row_a < len_q:
                                        o[q0 + row_a, h, col] = dtype(o_acc[i] * inv_a)
                                elif row_a + 8 < len_q:
                                    o[q0 + row_a + 8, h, col] = dtype(o_acc[i] * inv_b)
                        if lane % 4 == 0:
                            lse_a = (m_a * scale_log2 + math.log2(l_a)) * LN2
                            lse_b = (m_b * scale_log2 + math.log2(l_b)) * LN2
                            if row_a < len_q:
                                lse[lse_at + row_a] = (
                                    lse_a if l_a > 0.0 else kj.float32(NEG_INF))
                            if row_a + 8 < len_q:
                                lse[lse_at + row_a + 8] = (
                                    lse_b if l_b > 0.0 else kj.float32(NEG_INF))
                    g0 += n_tiles
                    done += 1
                if not LOCKSTEP and part == 0:
                    return
        for _ in kj.static_range(PERSISTENT * SMEM_EPILOGUE):
            if wg > 0 and t % 128 == 0:
                kj.tma.wait_group_read(0)  # the last stores have read shared memory

    return fwd


_KERNELS: dict = {}


def forward_kernel(cfg: ForwardConfig):
    """The kernel for ``cfg``, made once."""
    kernel = _KERNELS.get(cfg)
    if kernel is None:
        kernel = _KERNELS[cfg] = make_forward(cfg)
    return kernel


__all__ = ["BM", "BN", "FORMS", "FORM_BY_HEAD_DIM", "O_BOX", "SCHEDULES", "SCHEDULE_BY_HEAD_DIM",
           "THREADS", "ForwardConfig", "forward_kernel", "make_forward"]
