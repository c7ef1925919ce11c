"""A TMA tiled copy of a 16384 x 16384 float32 matrix against the device-to-device copy, in one run.

Rows: ``cuMemcpyDtoD`` through kaiojit's runtime, torch's ``copy_`` when torch imports, and
the TMA copy kernel in several tilings. The TMA kernel is LLVM IR around the inline PTX of
``kaiojit.lower.tma_ptx`` (what kaiojit kernels will emit), loaded with ``kj.Module.from_ptx``:
persistent blocks of one warp, one elected thread per block driving a ring of ``stages``
shared-memory boxes, each with its mbarrier. For every tile it waits for the box's load,
stores the box through the destination map and, once that store has read shared memory,
loads the tile ``stages`` ahead into the same box; loads and stores of a block overlap.
Rows "kaiojit Python ..." are the same pipeline written as a ``@kj.jit`` Python kernel
(``python_copy_kernel``: ``kj.tma``, ``kj.mbarrier``, ``kj.elect_one``), launched like any
kernel with ``kj.TensorMap`` arguments.

Bandwidth counts bytes read plus bytes written. Each result is checked against the source
before timing; times are CUDA-event medians after warm-up, rotating over several buffers.

    PYTHONPATH=. python3 benchmarks/tma.py [--small]
    PYTHONPATH=. python3 benchmarks/tma.py --cpu-check   # the Python kernel, small, cpu backend
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

import kaiojit as kj
import kaiojit.runtime as rt
from kaiojit.lower import tma_ptx as P
from kaiojit.lower.ptx import target_machine
from kaiojit.runtime.stream import stream_handle

N = 16384
SETS = 3
REPS = 15
BATCH = 6
WAIT_LIMIT = 1 << 16
TMAP = 'ptr byval([16 x i64]) align 64 "nvvm.grid_constant"'


@dataclass(frozen=True)
class Tiling:
    box_rows: int
    box_cols: int
    stages: int
    blocks_per_sm: int
    lag: int  # 1: refill the box of the tile before last (wait_group.read 1), 0: the last one

    @property
    def box_bytes(self) -> int:
        return self.box_rows * self.box_cols * 4

    def __str__(self) -> str:
        return (f"TMA {self.box_rows}x{self.box_cols} x{self.stages} "
                f"{self.blocks_per_sm}/SM lag{self.lag}")


TILINGS = [
    Tiling(32, 256, 3, 2, 1),
    Tiling(64, 128, 3, 2, 1),
    Tiling(32, 128, 6, 2, 1),
    Tiling(16, 256, 6, 2, 1),
    Tiling(32, 256, 6, 1, 1),
    Tiling(32, 128, 6, 2, 0),
]


PY_TILINGS = [Tiling(32, 256, 3, 2, 1), Tiling(32, 128, 6, 2, 1), Tiling(64, 128, 3, 2, 1)]


def python_copy_kernel(box_rows: int, box_cols: int, stages: int, lag: int):
    """The pipelined TMA copy as a kaiojit Python kernel: persistent blocks of one warp, one
    elected thread driving a ring of ``stages`` boxes in dynamic shared memory."""
    box = box_rows * box_cols
    box_bytes = box * 4

    @kj.jit
    def tma_copy_py(src, dst, tiles_x, ntiles):
        ring = kj.shared.array(0, kj.float32, alignment=1024)
        bars = kj.shared.array(stages, kj.uint64)
        bid = kj.blockIdx.x
        nb = kj.gridDim.x
        if kj.elect_one() and bid < ntiles:
            count = (ntiles - bid - 1) // nb + 1
            kj.tma.prefetch(src)
            kj.tma.prefetch(dst)
            for s in range(stages):
                kj.mbarrier.init(bars[s:], 1)
            kj.fence_proxy_async()
            for i in range(min(stages, count)):
                tile = i * nb + bid
                kj.mbarrier.arrive_expect_tx(bars[i:], box_bytes)
                kj.tma.load(ring[i * box:], src, tile // tiles_x * box_rows,
                            tile % tiles_x * box_cols, bars[i:])
            for i in range(count):
                s = i % stages
                kj.mbarrier.wait(bars[s:], i // stages % 2)
                tile = i * nb + bid
                kj.tma.store(dst, tile // tiles_x * box_rows, tile % tiles_x * box_cols,
                             ring[s * box:])
                kj.tma.commit_group()
                j = i + stages - lag
                if i >= lag and j < count:
                    kj.tma.wait_group_read(lag)  # the box of tile i - lag has been read
                    r = (i - lag) % stages
                    tile = j * nb + bid
                    kj.mbarrier.arrive_expect_tx(bars[r:], box_bytes)
                    kj.tma.load(ring[r * box:], src, tile // tiles_x * box_rows,
                                tile % tiles_x * box_cols, bars[r:])
            kj.tma.wait_group(0)

    return tma_copy_py


def python_copy(kernel, tiling: Tiling, src, dst, blocks: int):
    """A launch of ``kernel`` copying ``src`` to ``dst`` (square) with at most ``blocks``:
    the maps and sizes made once, the launch a call."""
    n = src.shape[0]
    box = (tiling.box_rows, tiling.box_cols)
    tiles_x = math.ceil(n / tiling.box_cols)
    ntiles = tiles_x * math.ceil(n / tiling.box_rows)
    launch = kernel[min(ntiles, blocks), 32, 0, tiling.stages * tiling.box_bytes]
    args = (kj.TensorMap.tiled(src, box), kj.TensorMap.tiled(dst, box), np.int32(tiles_x),
            np.int32(ntiles))
    return lambda: launch(*args)


def cpu_check() -> None:
    """The Python kernel on the cpu backend, small: its result equals the source."""
    kj.set_backend("cpu")
    n = 200
    host = np.random.default_rng().random((n, n), dtype=np.float32)
    for tiling in [Tiling(16, 64, 3, 1, 1), Tiling(32, 32, 2, 1, 0)]:
        src, dst = kj.to_device(host), kj.to_device(np.full_like(host, np.nan))
        kernel = python_copy_kernel(tiling.box_rows, tiling.box_cols, tiling.stages, tiling.lag)
        python_copy(kernel, tiling, src, dst, blocks=5)()
        assert np.array_equal(dst.copy_to_host(), host), tiling
    print("the Python TMA copy kernel matches its source on the cpu backend")


def asm(p: P.InlinePtx, ret: str, *args: str) -> str:
    text = p.text.replace("\\", "\\5C").replace('"', "\\22").replace("\n", "\\0A")
    return f'call {ret} asm sideeffect "{text}", "{p.constraints}"({", ".join(args)}) #0'


def copy_kernel_ir(stages: int, lag: int) -> str:
    """``tma_copy(src, dst, err, tiles_x, ntiles, box_rows, box_cols, box_bytes)``."""
    inits = "\n  ".join(
        f"%bar{s} = add i32 %base, {8 * s}\n  " + asm(P.mbarrier_init(), "void", f"i32 %bar{s}",
                                                     "i32 1")
        for s in range(stages))
    return f"""target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

@smem = external addrspace(3) global [0 x i8], align 1024
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()

define ptx_kernel void @tma_copy({TMAP} %src, {TMAP} %dst, ptr %err, i32 %tiles_x,
                                 i32 %ntiles, i32 %box_rows, i32 %box_cols, i32 %box_bytes) {{
entry:
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %nb = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %base = ptrtoint ptr addrspace(3) @smem to i32
  %bufs = add i32 %base, 1024
  %e = {asm(P.elect_sync(), "i32", "i32 -1")}
  %elected = icmp ne i32 %e, 0
  %has = icmp ult i32 %bid, %ntiles
  %go = and i1 %elected, %has
  br i1 %go, label %setup, label %exit
setup:
  %rem = sub i32 %ntiles, %bid
  %rem1 = sub i32 %rem, 1
  %q = udiv i32 %rem1, %nb
  %count = add i32 %q, 1
  {asm(P.prefetch_tensormap(), "void", "ptr %src")}
  {asm(P.prefetch_tensormap(), "void", "ptr %dst")}
  {inits}
  {asm(P.fence_proxy_async(), "void")}
  br label %pro.cond
pro.cond:
  %pi = phi i32 [ 0, %setup ], [ %pi.next, %pro.body ]
  %pin = icmp ult i32 %pi, {stages}
  %pic = icmp ult i32 %pi, %count
  %pgo = and i1 %pin, %pic
  br i1 %pgo, label %pro.body, label %main.cond
pro.body:
  %ptile0 = mul i32 %pi, %nb
  %ptile = add i32 %ptile0, %bid
  %prow = udiv i32 %ptile, %tiles_x
  %pcolt = urem i32 %ptile, %tiles_x
  %pc0 = mul i32 %pcolt, %box_cols
  %pc1 = mul i32 %prow, %box_rows
  %pbar0 = mul i32 %pi, 8
  %pbar = add i32 %base, %pbar0
  %pbuf0 = mul i32 %pi, %box_bytes
  %pbuf = add i32 %bufs, %pbuf0
  %pst = {asm(P.mbarrier_arrive_expect_tx(), "i64", "i32 %pbar", "i32 %box_bytes")}
  {asm(P.tma_load(2), "void", "i32 %pbuf", "ptr %src", "i32 %pc0", "i32 %pc1", "i32 %pbar")}
  %pi.next = add i32 %pi, 1
  br label %pro.cond
main.cond:
  %i = phi i32 [ 0, %pro.cond ], [ %i.next, %main.latch ]
  %more = icmp ult i32 %i, %count
  br i1 %more, label %main.body, label %done
main.body:
  %s = urem i32 %i, {stages}
  %use = udiv i32 %i, {stages}
  %par = and i32 %use, 1
  %bar.o = mul i32 %s, 8
  %bar = add i32 %base, %bar.o
  %buf.o = mul i32 %s, %box_bytes
  %buf = add i32 %bufs, %buf.o
  br label %wait.cond
wait.cond:
  %k = phi i32 [ 0, %main.body ], [ %k.next, %wait.retry ]
  %ok = {asm(P.mbarrier_try_wait_parity(), "i32", "i32 %bar", "i32 %par")}
  %ready = icmp ne i32 %ok, 0
  br i1 %ready, label %copy, label %wait.retry
wait.retry:
  %k.next = add i32 %k, 1
  %again = icmp ult i32 %k.next, {WAIT_LIMIT}
  br i1 %again, label %wait.cond, label %timeout
timeout:
  store volatile i32 1, ptr %err
  br label %done
copy:
  %tile0 = mul i32 %i, %nb
  %tile = add i32 %tile0, %bid
  %row = udiv i32 %tile, %tiles_x
  %colt = urem i32 %tile, %tiles_x
  %c0 = mul i32 %colt, %box_cols
  %c1 = mul i32 %row, %box_rows
  {asm(P.tma_store(2), "void", "ptr %dst", "i32 %c0", "i32 %c1", "i32 %buf")}
  {asm(P.bulk_commit_group(), "void")}
  %enough = icmp uge i32 %i, {lag}
  %j0 = add i32 %i, {stages - lag}
  %jin = icmp ult i32 %j0, %count
  %refill.go = and i1 %enough, %jin
  br i1 %refill.go, label %refill, label %main.latch
refill:
  {asm(P.bulk_wait_group_read(lag), "void")}
  %r.i = sub i32 %i, {lag}
  %rs = urem i32 %r.i, {stages}
  %rbar.o = mul i32 %rs, 8
  %rbar = add i32 %base, %rbar.o
  %rbuf.o = mul i32 %rs, %box_bytes
  %rbuf = add i32 %bufs, %rbuf.o
  %rtile0 = mul i32 %j0, %nb
  %rtile = add i32 %rtile0, %bid
  %rrow = udiv i32 %rtile, %tiles_x
  %rcolt = urem i32 %rtile, %tiles_x
  %rc0 = mul i32 %rcolt, %box_cols
  %rc1 = mul i32 %rrow, %box_rows
  %rst = {asm(P.mbarrier_arrive_expect_tx(), "i64", "i32 %rbar", "i32 %box_bytes")}
  {asm(P.tma_load(2), "void", "i32 %rbuf", "ptr %src", "i32 %rc0", "i32 %rc1", "i32 %rbar")}
  br label %main.latch
main.latch:
  %i.next = add i32 %i, 1
  br label %main.cond
done:
  {asm(P.bulk_wait_group(0), "void")}
  br label %exit
exit:
  ret void
}}

attributes #0 = {{ convergent }}
"""


def ptx_of(ir_text: str) -> str:
    from llvmlite import binding as llvm

    module = llvm.parse_assembly(ir_text)
    module.verify()
    return target_machine("sm_90", 80, 3).emit_assembly(module)


def sm_count() -> int:
    from cuda.bindings import driver as drv

    attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    err, value = drv.cuDeviceGetAttribute(attr, kj.runtime.get_backend().current_device())
    return int(value)


def time_ms(launch, reps: int = REPS) -> float:
    """Median ms of one ``launch(k)``: each sample times BATCH launches queued back to back
    (so the host's time to issue them is hidden), rotating k over the buffer sets."""
    for k in range(SETS):
        launch(k)
    kj.synchronize()
    start, end = kj.Event(), kj.Event()
    times = []
    for _ in range(reps):
        start.record()
        for b in range(BATCH):
            launch(b % SETS)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / BATCH)
    return float(np.median(times))


def tbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e12


def main() -> None:
    n = N // 4 if "--small" in sys.argv else N
    nbytes = n * n * 4
    moved = 2 * nbytes  # read + written
    backend = rt.get_backend()
    host = np.random.default_rng().random((n, n), dtype=np.float32)
    srcs = [rt.to_device(host) for _ in range(SETS)]
    dsts = [rt.device_array((n, n), np.float32) for _ in range(SETS)]
    stream = stream_handle(None)
    rows = []

    def check(k: int, who: str) -> None:
        if not np.array_equal(dsts[k].copy_to_host(), host):
            raise AssertionError(f"{who}: the copy differs from the source")
        backend.memset(dsts[k].ptr, 0xFF, nbytes)

    def dtod(k: int) -> None:
        backend.memcpy_dtod(dsts[k].ptr, srcs[k].ptr, nbytes, stream)

    dtod(0)
    check(0, "cuMemcpyDtoD")
    ms = time_ms(dtod)
    rows.append(("cuMemcpyDtoD (kaiojit runtime)", ms, tbps(moved, ms)))
    d2d = rows[-1][2]

    try:
        import torch
    except Exception:  # noqa: BLE001 - torch is optional
        torch = None
    if torch is not None:
        ts = [torch.from_numpy(host).cuda() for _ in range(SETS)]
        td = [torch.empty_like(t) for t in ts]
        td[0].copy_(ts[0])
        torch.cuda.synchronize()
        if not torch.equal(td[0], ts[0]):
            raise AssertionError("torch copy_ differs from the source")
        ms = time_ms(lambda k: td[k].copy_(ts[k]))
        rows.append(("torch copy_", ms, tbps(moved, ms)))
        del ts, td

    sms = sm_count()
    err = rt.to_device(np.zeros(1, np.int32))
    modules = {}
    for tiling in TILINGS:
        key = (tiling.stages, tiling.lag)
        if key not in modules:
            modules[key] = rt.Module.from_ptx(ptx_of(copy_kernel_ir(*key)))
        fn = modules[key].get_function("tma_copy")
        box = (tiling.box_rows, tiling.box_cols)
        smaps = [rt.TensorMap.tiled(s, box=box) for s in srcs]
        dmaps = [rt.TensorMap.tiled(d, box=box) for d in dsts]
        tiles_x = math.ceil(n / tiling.box_cols)
        ntiles = tiles_x * math.ceil(n / tiling.box_rows)
        grid = min(ntiles, sms * tiling.blocks_per_sm)
        shared = 1024 + tiling.stages * tiling.box_bytes

        launches = [
            fn.grid(grid).block(32).shared_mem(shared).arg_tensormap(smaps[k])
            .arg_tensormap(dmaps[k]).arg_ptr(err).arg_i32(tiles_x).arg_i32(ntiles)
            .arg_i32(tiling.box_rows).arg_i32(tiling.box_cols).arg_i32(tiling.box_bytes)
            for k in range(SETS)]

        def tma(k: int, launches=launches) -> None:
            launches[k].launch()

        tma(0)
        kj.synchronize()
        if err.copy_to_host()[0]:
            raise AssertionError(f"{tiling}: a box's mbarrier never completed")
        check(0, str(tiling))
        ms = time_ms(tma)
        if err.copy_to_host()[0]:
            raise AssertionError(f"{tiling}: a box's mbarrier never completed")
        rows.append((str(tiling), ms, tbps(moved, ms)))

    for tiling in PY_TILINGS:
        kernel = python_copy_kernel(tiling.box_rows, tiling.box_cols, tiling.stages, tiling.lag)
        launches = [python_copy(kernel, tiling, srcs[k], dsts[k], sms * tiling.blocks_per_sm)
                    for k in range(SETS)]

        def py(k: int, launches=launches) -> None:
            launches[k]()

        py(0)
        kj.synchronize()
        check(0, f"kaiojit Python {tiling}")
        ms = time_ms(py)
        rows.append((f"kaiojit Python {tiling}", ms, tbps(moved, ms)))

    print(f"copy of a {n} x {n} float32 matrix ({nbytes / 2**30:.2f} GiB), {sms} SMs")
    print(f"{'who':<52} {'ms':>8} {'TB/s':>6} {'of D2D':>7}")
    for who, ms, bw in rows:
        print(f"{who:<52} {ms:>8.3f} {bw:>6.2f} {bw / d2d:>7.1%}")


if __name__ == "__main__":
    if "--cpu-check" in sys.argv:
        cpu_check()
    else:
        main()
