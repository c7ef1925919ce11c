"""Kernels that use the TMA inline PTX of ``kaiojit.lower.tma_ptx`` exactly as generated code will:
LLVM IR calling ``asm sideeffect`` with those templates and constraints, tensor maps as
``ptr byval([16 x i64]) align 64 "nvvm.grid_constant"`` parameters, compiled to PTX by the same
LLVM NVPTX target machine as kaiojit's kernels. Used by test_tma_ptx.py (ptxas) and
test_tma_gpu.py (an H200)."""

from __future__ import annotations

from llvmlite import binding as llvm

from kaiojit.lower import tma_ptx as P
from kaiojit.lower.ptx import target_machine

TMAP = 'ptr byval([16 x i64]) align 64 "nvvm.grid_constant"'
HEADER = """target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)
"""
FOOTER = "\nattributes #0 = { convergent }\n"
BAR_OFFSET, BAR2_OFFSET, BOX_OFFSET = 0, 8, 1024  # in dynamic shared memory
WAIT_LIMIT = 1 << 16  # bounded waits: a copy that never completes is reported, not a hang


def asm(p: P.InlinePtx, ret: str, *args: str) -> str:
    """``call <ret> asm sideeffect "<template>", "<constraints>"(<args>)``, convergent."""
    text = p.text.replace("\\", "\\5C").replace('"', "\\22").replace("\n", "\\0A")
    return f'call {ret} asm sideeffect "{text}", "{p.constraints}"({", ".join(args)}) #0'


def ptx_of(ir_text: str, arch: str = "sm_90", ptx_version: int = 80) -> str:
    module = llvm.parse_assembly(ir_text)
    module.verify()
    return target_machine(arch, ptx_version, 3).emit_assembly(module)


def every_instruction_ir() -> str:
    """One kernel that issues every template: loads, stores and reduce-adds of rank 1 to 5, the
    mbarrier operations (the wait loop twice, so its label appears twice), fences, groups,
    elect."""
    body = [
        "%bar = ptrtoint ptr addrspace(3) @bars to i32",
        "%buf = ptrtoint ptr addrspace(3) @box to i32",
        "%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
        asm(P.mbarrier_init(), "void", "i32 %bar", "i32 1"),
        asm(P.fence_mbarrier_init(), "void"),
        asm(P.fence_proxy_async(), "void"),
        "%e = " + asm(P.elect_sync(), "i32", "i32 -1"),
        asm(P.prefetch_tensormap(), "void", "ptr %tm"),
        asm(P.mbarrier_expect_tx(), "void", "i32 %bar", "i32 64"),
        "%s0 = " + asm(P.mbarrier_arrive_expect_tx(), "i64", "i32 %bar", "i32 %e"),
    ]
    for rank in range(1, P.MAX_RANK + 1):
        coords = ["i32 %tid"] + ["i32 %e"] * (rank - 1)
        body.append(asm(P.tma_load(rank), "void", "i32 %buf", "ptr %tm", *coords, "i32 %bar"))
        body.append(asm(P.tma_store(rank), "void", "ptr %tm", *coords, "i32 %buf"))
        body.append(asm(P.tma_reduce_add(rank), "void", "ptr %tm", *coords, "i32 %buf"))
    body += [
        "%s1 = " + asm(P.mbarrier_arrive(), "i64", "i32 %bar"),
        "%ok = " + asm(P.mbarrier_try_wait_parity(), "i32", "i32 %bar", "i32 0"),
        asm(P.mbarrier_wait_parity(), "void", "i32 %bar", "i32 %ok"),
        asm(P.mbarrier_wait_parity(), "void", "i32 %bar", "i32 1"),
        asm(P.bulk_commit_group(), "void"),
        asm(P.bulk_wait_group_read(1), "void"),
        asm(P.bulk_wait_group(0), "void"),
        "%s = add i64 %s0, %s1",
        "store i64 %s, ptr %out",
        "ret void",
    ]
    lines = "\n  ".join(body)
    return (HEADER + "@bars = internal addrspace(3) global [2 x i64] undef, align 8\n"
            "@box = internal addrspace(3) global [4096 x i8] undef, align 1024\n\n"
            f"define ptx_kernel void @every(ptr %out, {TMAP} %tm, i32 %n) {{\n  {lines}\n}}\n"
            + FOOTER)


def tiles_ir() -> str:
    """``tma_tiles(boxes, src: tensormap, tag: i32, dst: tensormap, flags, row0, col0,
    row_step, col_step, tx_bytes, box_smem)``: block (x, y) handles the 2-D box at
    (row0 + y * row_step, col0 + x * col_step). Its threads poison the box's shared memory, an
    elected thread loads the box through ``src`` (a bounded wait, reported in flags), every
    byte of the box's shared memory is copied to ``boxes[tile]`` (swizzle, padding and fill as
    the GPU left them), and an elected thread stores the box back through ``dst`` (only boxes
    whose coordinates are not negative: a TMA store of any other is an illegal instruction).

    ``flags`` (int32): [tile] = tag ^ tile, [n + tile] = 1 if the load timed out, [2n + tile]
    the shared address of the box, [3n + tile] = 1 if the arrive-count barrier timed out."""
    return HEADER + f"""@smem = external addrspace(3) global [0 x i8], align 1024

define ptx_kernel void @tma_tiles(ptr %boxes, {TMAP} %src, i32 %tag, {TMAP} %dst,
                                  ptr %flags, i32 %row0, i32 %col0, i32 %row_step,
                                  i32 %col_step, i32 %tx_bytes, i32 %box_smem) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %nthreads = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %nx = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %ny = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()
  %t0 = mul i32 %by, %nx
  %tile = add i32 %t0, %bx
  %ntiles = mul i32 %nx, %ny
  %base = ptrtoint ptr addrspace(3) @smem to i32
  %bar = add i32 %base, {BAR_OFFSET}
  %bar2 = add i32 %base, {BAR2_OFFSET}
  %buf = add i32 %base, {BOX_OFFSET}
  %cx = mul i32 %bx, %col_step
  %c0 = add i32 %col0, %cx
  %cy = mul i32 %by, %row_step
  %c1 = add i32 %row0, %cy
  %is0 = icmp eq i32 %tid, 0
  %warp0 = icmp ult i32 %tid, 32
  br label %poison.cond
poison.cond:
  %pi = phi i32 [ %tid, %entry ], [ %pi.next, %poison.body ]
  %pmore = icmp ult i32 %pi, %box_smem
  br i1 %pmore, label %poison.body, label %poison.end
poison.body:
  %poff = add i32 %pi, {BOX_OFFSET}
  %pp = getelementptr i8, ptr addrspace(3) @smem, i32 %poff
  store volatile i8 -91, ptr addrspace(3) %pp
  %pi.next = add i32 %pi, %nthreads
  br label %poison.cond
poison.end:
  {asm(P.fence_proxy_async(), "void")}
  br i1 %is0, label %init, label %init.end
init:
  {asm(P.mbarrier_init(), "void", "i32 %bar", "i32 1")}
  {asm(P.mbarrier_init(), "void", "i32 %bar2", "i32 %nthreads")}
  {asm(P.fence_proxy_async(), "void")}
  br label %init.end
init.end:
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  br i1 %warp0, label %elect, label %wait.start
elect:
  %e = {asm(P.elect_sync(), "i32", "i32 -1")}
  %elected = icmp ne i32 %e, 0
  br i1 %elected, label %issue, label %wait.start
issue:
  {asm(P.prefetch_tensormap(), "void", "ptr %src")}
  %state = {asm(P.mbarrier_arrive_expect_tx(), "i64", "i32 %bar", "i32 %tx_bytes")}
  {asm(P.tma_load(2), "void", "i32 %buf", "ptr %src", "i32 %c0", "i32 %c1", "i32 %bar")}
  br label %wait.start
wait.start:
  br label %wait.cond
wait.cond:
  %k = phi i32 [ 0, %wait.start ], [ %k.next, %wait.retry ]
  %ok = {asm(P.mbarrier_try_wait_parity(), "i32", "i32 %bar", "i32 0")}
  %done = icmp ne i32 %ok, 0
  br i1 %done, label %waited, label %wait.retry
wait.retry:
  %k.next = add i32 %k, 1
  %again = icmp ult i32 %k.next, {WAIT_LIMIT}
  br i1 %again, label %wait.cond, label %waited
waited:
  br i1 %done, label %wait.twice, label %dump.start
wait.twice:
  {asm(P.mbarrier_wait_parity(), "void", "i32 %bar", "i32 0")}
  br label %dump.start
dump.start:
  %tile64 = zext i32 %tile to i64
  %size64 = zext i32 %box_smem to i64
  %first = mul i64 %tile64, %size64
  br label %dump.cond
dump.cond:
  %di = phi i32 [ %tid, %dump.start ], [ %di.next, %dump.body ]
  %dmore = icmp ult i32 %di, %box_smem
  br i1 %dmore, label %dump.body, label %dump.end
dump.body:
  %soff = add i32 %di, {BOX_OFFSET}
  %sp = getelementptr i8, ptr addrspace(3) @smem, i32 %soff
  %byte = load volatile i8, ptr addrspace(3) %sp
  %di64 = zext i32 %di to i64
  %goff = add i64 %first, %di64
  %gp = getelementptr i8, ptr %boxes, i64 %goff
  store i8 %byte, ptr %gp
  %di.next = add i32 %di, %nthreads
  br label %dump.cond
dump.end:
  %arrived = {asm(P.mbarrier_arrive(), "i64", "i32 %bar2")}
  br label %count.cond
count.cond:
  %m = phi i32 [ 0, %dump.end ], [ %m.next, %count.retry ]
  %cok = {asm(P.mbarrier_try_wait_parity(), "i32", "i32 %bar2", "i32 0")}
  %counted = icmp ne i32 %cok, 0
  br i1 %counted, label %report.start, label %count.retry
count.retry:
  %m.next = add i32 %m, 1
  %cagain = icmp ult i32 %m.next, {WAIT_LIMIT}
  br i1 %cagain, label %count.cond, label %report.start
report.start:
  br i1 %is0, label %report, label %report.end
report:
  %f0 = getelementptr i32, ptr %flags, i32 %tile
  %tagged = xor i32 %tag, %tile
  store i32 %tagged, ptr %f0
  %i1 = add i32 %ntiles, %tile
  %f1 = getelementptr i32, ptr %flags, i32 %i1
  %late = zext i1 %done to i32
  %timeout = xor i32 %late, 1
  store i32 %timeout, ptr %f1
  %i2 = add i32 %i1, %ntiles
  %f2 = getelementptr i32, ptr %flags, i32 %i2
  store i32 %buf, ptr %f2
  %i3 = add i32 %i2, %ntiles
  %f3 = getelementptr i32, ptr %flags, i32 %i3
  %clate = zext i1 %counted to i32
  %ctimeout = xor i32 %clate, 1
  store i32 %ctimeout, ptr %f3
  br label %report.end
report.end:
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  br i1 %warp0, label %elect2, label %exit
elect2:
  %e2 = {asm(P.elect_sync(), "i32", "i32 -1")}
  %elected2 = icmp ne i32 %e2, 0
  %loaded = and i1 %elected2, %done
  %c0pos = icmp sge i32 %c0, 0
  %c1pos = icmp sge i32 %c1, 0
  %inside = and i1 %c0pos, %c1pos
  %go = and i1 %loaded, %inside
  br i1 %go, label %store, label %exit
store:
  {asm(P.fence_proxy_async(), "void")}
  {asm(P.tma_store(2), "void", "ptr %dst", "i32 %c0", "i32 %c1", "i32 %buf")}
  {asm(P.bulk_commit_group(), "void")}
  {asm(P.bulk_wait_group_read(0), "void")}
  {asm(P.bulk_wait_group(0), "void")}
  br label %exit
exit:
  ret void
}}
""" + FOOTER


def single_ir(p: P.InlinePtx, ret: str, *args: str) -> str:
    """A kernel that issues one template; operands may name %bar, %buf (shared addresses),
    %tm (the tensor map parameter) and %n (an i32 parameter)."""
    call = asm(p, ret, *args)
    result = "" if ret == "void" else "%r = "
    return (HEADER + "@bars = internal addrspace(3) global [2 x i64] undef, align 8\n"
            "@box = internal addrspace(3) global [4096 x i8] undef, align 1024\n\n"
            f"define ptx_kernel void @one(ptr %out, {TMAP} %tm, i32 %n) {{\n"
            "  %bar = ptrtoint ptr addrspace(3) @bars to i32\n"
            "  %buf = ptrtoint ptr addrspace(3) @box to i32\n"
            f"  {result}{call}\n"
            + (f"  store {ret} %r, ptr %out\n" if result else "")
            + "  ret void\n}\n" + FOOTER)
