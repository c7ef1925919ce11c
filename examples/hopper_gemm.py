"""A warp-specialized, persistent Hopper GEMM (sm_90a): C = A @ B.T, checked against NumPy.

A (M x K) and B (N x K) are bfloat16 (or fp8 e4m3 / e5m2), C (M x N) is bfloat16, the sums
float32. It is the kernel Hopper's fastest GEMMs share (CUTLASS, Triton's Gluon tutorial,
ThunderKittens), written in kaiojit:

* a block of 3 warpgroups (384 threads): warpgroup 0, the producer, lowers its registers to 40
  (``kj.warpgroup.reg_dealloc``) and lets one elected thread issue every TMA load; warpgroups 1
  and 2, the consumers, raise theirs to 232 (``reg_alloc``) and each own a 64 x 256 float32
  accumulator (``wgmma.m64n256k16``; k32 for fp8) of the block's 128 x 256 tile;
* K in steps of 64 (128 for fp8: 128 bytes a row, the 128-byte swizzle) through a ring of
  ``STAGES`` shared-memory stages of 48 KB, each with a "full" mbarrier (completed by the
  TMA's transaction bytes) and an "empty" one (one arrival per consumer warpgroup once the
  wgmma that read the stage has retired: ``wgmma.wait_group(1)`` keeps one in flight);
* a persistent grid (one block per SM, ``kj.sm_count()``) walking the output tiles in groups
  of 8 tile rows (L2 reuse of B), the producer running ahead into the next tile while the
  consumers store this one;
* an epilogue that rounds the accumulator to bfloat16 pairs (``kj.cvt_pack``), writes them with
  ``kj.stmatrix`` into 64 x 64 swizzled shared buffers (two per consumer, so one is written
  while the TMA store of the other reads), fences the async proxy and stores with
  ``kj.tma.store``; the consumers of a warpgroup meet at a named barrier.

Each step of that structure is a knob of :class:`GemmConfig` (benchmarks/gemm.py times
them). The loops are written so every warpgroup runs the same iterations (the producer's
and the consumers' work are the two arms of one ``if``): on the GPU they still run apart,
as far as the mbarriers let them, and kaiojit's cpu backend, which runs a block's threads
branch by branch, runs the kernel too, with the same results:
``KAIOJIT_BACKEND=cpu python examples/hopper_gemm.py``.

TMA needs rows of 16-byte multiples: K and N multiples of 8 (of 16 for fp8); M, N and K need
not be multiples of the tile (loads past the edges read zeros, stores past them are dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

import kaiojit as kj
from kaiojit.lib import pipeline

BM, BN = 128, 256        # the block tile: two consumer warpgroups of 64 x 256 (BN: GemmConfig.bn)
THREADS = 384            # producer + 2 consumers
ROW_BYTES = 128          # a K step is one 128-byte swizzled row of A and of B
EPI = 64                 # the epilogue's chunks: 64 x 64 bfloat16, one swizzled row each
GROUP_M = 8              # tile rows walked together (L2 reuse of B)
ENTRY_REGISTERS = 168    # 384 threads at 168: 64K registers; then 40 + 2 x 232 (setmaxnreg)
INPUTS = {"bf16": kj.bfloat16, "e4m3": kj.float8_e4m3fn, "e5m2": kj.float8_e5m2}


@dataclass(frozen=True)
class GemmConfig:
    """The kernel's structure: each field one step the benchmark can switch off."""

    dtype: str = "bf16"          # the inputs: bf16, e4m3 or e5m2 (C is always bfloat16)
    stages: int = 4              # shared-memory stages (2 to 4)
    wait: int = 1                # wgmma groups left in flight by the consumers (0 or 1)
    tma_epilogue: bool = True    # stmatrix + TMA store; False: stores from registers
    persistent: bool = True      # one block per SM walking tiles; False: one block a tile
    reg_alloc: bool = True       # setmaxnreg 40 / 232; False: 168 registers for everyone
    # the producer's loop merged into the consumers' (its step one arm of an if in each
    # iteration): what the cpu backend runs (it runs one arm's threads before the other's);
    # on the GPU it cannot reallocate registers (ptxas sees one region for all warpgroups)
    lockstep: bool = False
    bn: int = BN                 # the block tile's columns (each consumer's wgmma N)
    # fp8: the wgmma's own sums keep about 14 bits (DeepSeek-V3's report, section 3.3.2), so
    # each stage's partial sums restart from zero and are added into a float32 total in
    # registers (DeepGEMM's promotion); twice the accumulator registers: bn 128 with it
    promote: bool = False

    @property
    def bk(self) -> int:
        """K elements of a stage: one 128-byte row."""
        return ROW_BYTES // INPUTS[self.dtype].itemsize

    def shared_bytes(self) -> int:
        """Dynamic shared memory: the stages, then two epilogue buffers per consumer."""
        stage = (BM + self.bn) * ROW_BYTES
        return self.stages * stage + (2 * 2 * EPI * EPI * 2 if self.tma_epilogue else 0)


@kj.jit(device=True)
def tile_origin(tile, tiles_m, tiles_n, bn):
    """The first row and column of output tile ``tile`` (``bn`` columns wide): tiles in groups
    of ``GROUP_M`` tile rows, column by column, so the blocks at work at once share B's tiles
    in L2."""
    per_group = GROUP_M * tiles_n
    first = tile // per_group * GROUP_M
    rows = min(tiles_m - first, GROUP_M)
    return (first + tile % per_group % rows) * BM, tile % per_group // rows * bn


def make_gemm(cfg: GemmConfig):
    """The kernel of one configuration."""
    elem = INPUTS[cfg.dtype]
    store = kj.bfloat16 if cfg.dtype == "bf16" else kj.uint8  # fp8 travels as bytes
    bk = cfg.bk
    kw = 32 // elem.itemsize              # K of one wgmma: 16 (bf16) or 32 (fp8)
    bn, promote = cfg.bn, cfg.promote
    a_tile, b_tile = BM * bk, bn * bk     # elements of A's and B's part of a stage
    stage = a_tile + b_tile
    stage_bytes = stage * elem.itemsize
    stages, wait, tma_epilogue, reg_alloc = (cfg.stages, cfg.wait, cfg.tma_epilogue,
                                             cfg.reg_alloc)
    lockstep = cfg.lockstep
    epi_base = stages * stage_bytes // 2  # bfloat16 elements before the epilogue buffers
    acc_regs = tuple(range(bn // 2))      # constant indices: the accumulator stays in registers
    total_regs = bn // 2 if promote else 1

    @kj.jit(max_registers=ENTRY_REGISTERS)
    def gemm(a_map, b_map, c_map, c, m, n, k):
        full = kj.shared.array(stages, kj.uint64)   # the ring's mbarriers (kaiojit.lib.pipeline)
        empty = kj.shared.array(stages, kj.uint64)
        smem = kj.shared.array(0, store)      # the stages (1024-byte aligned)
        cbuf = kj.shared.array(0, kj.bfloat16)  # the same buffer, as C's epilogue buffers
        acc = kj.local.array(bn // 2, kj.float32)
        total = kj.local.array(total_regs, kj.float32)  # promote: the stages' sums
        t = kj.threadIdx.x
        wg = kj.warpgroup.index()
        leader = kj.elect_one() and t < 32    # the producer's one thread
        if t == 0:
            pipeline.init(full, empty, 1, 2)  # full: the leader's arrival; empty: 2 consumers
        kj.syncthreads()
        tiles_m, tiles_n = (m + BM - 1) // BM, (n + bn - 1) // bn
        tiles, k_tiles = tiles_m * tiles_n, (k + bk - 1) // bk
        w = wg - 1                            # a consumer's half of the tile
        it = 0                                # K steps so far: the ring's position
        if not lockstep and wg == 0:          # the producer, on its own
            if reg_alloc:
                kj.warpgroup.reg_dealloc(40)
            if leader:
                for tile in range(kj.blockIdx.x, tiles, kj.gridDim.x):
                    m0, n0 = tile_origin(tile, tiles_m, tiles_n, bn)
                    for kt in range(k_tiles):
                        s = it % stages       # wait for the stage to be free, then fill it
                        pipeline.wait_empty(empty, it)
                        kj.mbarrier.arrive_expect_tx(full[s:], stage_bytes)
                        kj.tma.load(smem[s * stage:], a_map, m0, kt * bk, full[s:])
                        kj.tma.load(smem[s * stage + a_tile:], b_map, n0, kt * bk, full[s:])
                        it += 1
            return
        if not lockstep and reg_alloc:
            kj.warpgroup.reg_alloc(232)
        for tile in range(kj.blockIdx.x, tiles, kj.gridDim.x):  # the consumers (lockstep: all)
            m0, n0 = tile_origin(tile, tiles_m, tiles_n, bn)
            for kt in range(k_tiles):
                s = it % stages
                if lockstep and wg == 0:      # lockstep only: the producer's step, in line
                    if leader:
                        pipeline.wait_empty(empty, it)
                        kj.mbarrier.arrive_expect_tx(full[s:], stage_bytes)
                        kj.tma.load(smem[s * stage:], a_map, m0, kt * bk, full[s:])
                        kj.tma.load(smem[s * stage + a_tile:], b_map, n0, kt * bk, full[s:])
                else:
                    pipeline.wait_full(full, it)
                    kj.wgmma.fence()
                    for kk in kj.static_range(ROW_BYTES // 32):
                        da = kj.wgmma.descriptor(smem, s * stage + w * 64 * bk + kk * kw,
                                                 swizzle=128, stride_byte_offset=1024)
                        db = kj.wgmma.descriptor(smem, s * stage + a_tile + kk * kw,
                                                 swizzle=128, stride_byte_offset=1024)
                        kj.wgmma.mma_async(acc, da, db, shape=(64, bn, kw), dtype=elem,
                                           scale_d=(kk > 0) if promote else kt + kk > 0)
                    kj.wgmma.commit_group()
                    if promote:               # this stage's sums, added in float32
                        kj.wgmma.wait_group(0, acc)
                        for i in acc_regs:
                            total[i] = acc[i] if kt == 0 else total[i] + acc[i]
                    else:
                        kj.wgmma.wait_group(wait, acc)
                    if t % 128 == 0:          # the stage the retired wgmmas read is free
                        if wait == 0 or promote:
                            pipeline.release(empty, it)
                        elif kt > 0:
                            pipeline.release(empty, it - 1)
                it += 1
            if wg != 0:
                kj.wgmma.wait_group(0, acc)
                if wait != 0 and not promote and t % 128 == 0:
                    pipeline.release(empty, it - 1)
                if promote:
                    for i in acc_regs:
                        acc[i] = total[i]
                lt = t % 128
                warp, lane = lt // 32, lt % 32
                if tma_epilogue:
                    # four 64 x 64 chunks: rounded to bfloat16 pairs, stmatrix'd into a
                    # swizzled buffer (two alternate), TMA-stored by one thread
                    mi, rr = lane // 8, lane % 8  # this lane's matrix of an x4, its row there
                    row = 16 * warp + rr + 8 * (mi % 2)
                    for ch in kj.static_range(bn // EPI):
                        buf = epi_base + (w * 2 + ch % 2) * EPI * EPI
                        if lt == 0:
                            kj.tma.wait_group_read(1)  # the store of two chunks ago has read it
                        kj.named_barrier.sync(1 + w, 128)
                        for jj in kj.static_range(EPI // 16):
                            j = ch * EPI // 8 + 2 * jj   # the accumulator's 8-column blocks
                            chunk = (2 * jj + mi // 2) ^ (row % 8)  # 16-byte chunk, swizzled
                            kj.stmatrix(cbuf, buf + row * EPI + chunk * 8,
                                        kj.cvt_pack(kj.bfloat16, acc[4 * j], acc[4 * j + 1]),
                                        kj.cvt_pack(kj.bfloat16, acc[4 * j + 2],
                                                    acc[4 * j + 3]),
                                        kj.cvt_pack(kj.bfloat16, acc[4 * j + 4],
                                                    acc[4 * j + 5]),
                                        kj.cvt_pack(kj.bfloat16, acc[4 * j + 6],
                                                    acc[4 * j + 7]))
                        kj.fence_proxy_async()  # these writes, before the copy engine's reads
                        kj.named_barrier.sync(1 + w, 128)
                        if lt == 0:
                            kj.tma.store(c_map, m0 + w * 64, n0 + ch * EPI, cbuf[buf:])
                            kj.tma.commit_group()
                else:  # from registers, in the wgmma D layout; nothing past the edges
                    r0 = m0 + w * 64 + 16 * warp + lane // 4
                    c0 = n0 + 2 * (lane % 4)
                    for i in acc_regs:
                        row = r0 + 8 * ((i // 2) % 2)
                        col = c0 + 8 * (i // 4) + i % 2
                        if row < m and col < n:
                            c[row, col] = kj.bfloat16(acc[i])
        if tma_epilogue and wg != 0 and t % 128 == 0:
            kj.tma.wait_group_read(0)         # the last stores have read shared memory

    return gemm


_KERNELS: dict = {}


def kernel(cfg: GemmConfig):
    if cfg not in _KERNELS:
        _KERNELS[cfg] = make_gemm(cfg)
    return _KERNELS[cfg]


def prepare(a, b, c, cfg: GemmConfig = GemmConfig(), stream=0):
    """A function that computes ``c[:] = a @ b.T`` each time it is called: ``a`` (M, K), ``b``
    (N, K) of the config's input type (fp8 as uint8 views of its bytes), ``c`` (M, N)
    bfloat16; device arrays or CUDA tensors. The tensor maps are made once, here. On the cpu
    backend the kernel is the config's ``lockstep`` form."""
    m, k = a.shape
    n = b.shape[0]
    if kj.backend() == "cpu" and not cfg.lockstep:  # the form the cpu backend can run
        cfg = replace(cfg, lockstep=True)
    bk = cfg.bk
    a_map = kj.TensorMap.tiled(a, (BM, bk), swizzle="128B")
    b_map = kj.TensorMap.tiled(b, (cfg.bn, bk), swizzle="128B")
    c_map = kj.TensorMap.tiled(c, (EPI, EPI), swizzle="128B")
    tiles = -(-m // BM) * -(-n // cfg.bn)
    grid = min(tiles, kj.sm_count()) if cfg.persistent else tiles
    launch = kernel(cfg)[grid, THREADS, stream, cfg.shared_bytes()]
    return lambda: launch(a_map, b_map, c_map, c, m, n, k)


def matmul(a, b, c, cfg: GemmConfig = GemmConfig(), stream=0) -> None:
    """``c[:] = a @ b.T`` (see :func:`prepare`)."""
    prepare(a, b, c, cfg, stream)()


def check(m: int, n: int, k: int, cfg: GemmConfig = GemmConfig()) -> float:
    """The kernel against NumPy on fresh inputs, C poisoned first: the largest error as a
    fraction of the bound (sums of exact products to the precision the hardware keeps,
    bfloat16 rounding of C)."""
    import ml_dtypes

    rng = np.random.default_rng()
    np_type = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
               "e5m2": ml_dtypes.float8_e5m2}[cfg.dtype]
    a = rng.standard_normal((m, k)).astype(np_type)
    b = rng.standard_normal((n, k)).astype(np_type)
    raw = (lambda x: x) if cfg.dtype == "bf16" else (lambda x: x.view(np.uint8))
    c = kj.to_device(np.full((m, n), np.nan, ml_dtypes.bfloat16))
    matmul(kj.to_device(raw(a)), kj.to_device(raw(b)), c, cfg)
    got = c.copy_to_host().astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64.T
    # the sums: float32 (2 k ulps); fp8 on the GPU: each wgmma (k32) keeps about 14 bits of
    # its sum (DeepSeek-V3's report, 3.3.2), taken as 13 here; promoted: a stage's 4 of them
    sums = 2 * k * 2.0 ** -23
    if cfg.dtype != "bf16":
        sums += 2.0 ** -13 * (4 if cfg.promote else -(-k // 32))
    bound = 2.0 ** -8 * np.abs(want) + sums * (np.abs(a64) @ np.abs(b64).T)
    err = float(np.max(np.abs(got - want) / bound))
    assert np.all(np.isfinite(got)) and err <= 1, f"{cfg}: error {err:.2f}x the bound"
    return err


def main() -> None:
    for cfg, shape in ((GemmConfig(), (200, 264, 136)),
                       (GemmConfig(dtype="e4m3", stages=3), (136, 272, 160))):
        err = check(*shape, cfg)
        print(f"Hopper GEMM {cfg.dtype} {'x'.join(map(str, shape))} on the {kj.backend()} "
              f"backend: matches NumPy ({err:.3f} of the bound)")


if __name__ == "__main__":
    main()
