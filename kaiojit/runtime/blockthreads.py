"""A thread per block: the native runner of the cpu backend's cooperative launches.

Every block of a launch that synchronizes its grid must be live while any block waits at the
grid barrier, so each gets a POSIX thread of its own. Native code creates and joins them
(``kaiojit_run_blocks``, compiled once per process from the IR below): no Python runs per
block, so thousands of blocks do not queue for the GIL, and the caller waits in one ctypes call
(the GIL released).

A block of a cluster (a launch of ``kaiojit/runtime/clusters.py``) that returns leaves its
cluster's live blocks: it completes a cluster barrier phase every other live block arrived on
(the barrier waits for the blocks that have not exited, as on the GPU; the counter is word 0
of the cluster's state, see ``kaiojit/lower/cluster_host.py``) and bumps the cluster's epoch.
A block's thread that ends while the launch records a fault bumps the grid barrier's wake
sequence and wakes its sleepers, which then see the fault and stop (the barrier's host lowering
is in ``kaiojit/intrinsics/cg.py``). If the system refuses a thread, the runner records a fault
the same way, so the blocks already started end, and returns how many it started.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from kaiojit.target import LAUNCH_ERROR, LAUNCH_GRID_BARRIER

# One call of a block's thread: run, slots, ctx, first block, end block, &error, &sequence,
# and the state of the block's cluster (kaiojit/runtime/clusters.py), or null.
CALL_WORDS = 8

_RUNNER_IR = r"""
%call = type { ptr, ptr, ptr, i64, i64, ptr, ptr, ptr }
declare i32 @pthread_attr_init(ptr)
declare i32 @pthread_attr_setstacksize(ptr, i64)
declare i32 @pthread_attr_destroy(ptr)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i64 @syscall(i64, ...)

define internal void @wake(ptr %c) {
  %qp = getelementptr %call, ptr %c, i32 0, i32 6
  %seq = load ptr, ptr %qp
  %old = atomicrmw add ptr %seq, i32 1 seq_cst
  WAKE
  ret void
}

define internal ptr @block_thread(ptr %c) {
  %fp = getelementptr %call, ptr %c, i32 0, i32 0
  %fn = load ptr, ptr %fp
  %sp = getelementptr %call, ptr %c, i32 0, i32 1
  %slots = load ptr, ptr %sp
  %cp = getelementptr %call, ptr %c, i32 0, i32 2
  %ctx = load ptr, ptr %cp
  %lp = getelementptr %call, ptr %c, i32 0, i32 3
  %lo = load i64, ptr %lp
  %hp = getelementptr %call, ptr %c, i32 0, i32 4
  %hi = load i64, ptr %hp
  call void %fn(ptr %slots, ptr %ctx, i64 %lo, i64 %hi)
  %kp = getelementptr %call, ptr %c, i32 0, i32 7
  %cluster = load ptr, ptr %kp
  %in_cluster = icmp ne ptr %cluster, null
  br i1 %in_cluster, label %returned, label %check
returned:
  %live = getelementptr i64, ptr %cluster, i64 LIVE
  %was = atomicrmw sub ptr %live, i64 1 seq_cst
  %now = sub i64 %was, 1
  %word = load atomic i64, ptr %cluster seq_cst, align 8
  %arrived = and i64 %word, 9223372036854775807
  %some = icmp ugt i64 %arrived, 0
  %all = icmp uge i64 %arrived, %now
  %complete = and i1 %some, %all
  br i1 %complete, label %flip, label %bump
flip:
  %phase = and i64 %word, -9223372036854775808
  %next = xor i64 %phase, -9223372036854775808
  %swap = cmpxchg ptr %cluster, i64 %word, i64 %next seq_cst seq_cst
  br label %bump
bump:
  %epoch = getelementptr i64, ptr %cluster, i64 EPOCH
  %then = atomicrmw add ptr %epoch, i64 1 seq_cst
  br label %check
check:
  %ep = getelementptr %call, ptr %c, i32 0, i32 5
  %errp = load ptr, ptr %ep
  %err = load atomic i64, ptr %errp seq_cst, align 8
  %failed = icmp ne i64 %err, 0
  br i1 %failed, label %wake, label %out
wake:
  call void @wake(ptr %c)
  br label %out
out:
  ret ptr null
}

define i64 @kaiojit_run_blocks(ptr %calls, i64 %n, i64 %stack, ptr %threads, i64 %fault) {
entry:
  %attr = alloca [128 x i8], align 16
  call i32 @pthread_attr_init(ptr %attr)
  call i32 @pthread_attr_setstacksize(ptr %attr, i64 %stack)
  br label %create
create:
  %i = phi i64 [0, %entry], [%next, %body]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %try, label %joins
try:
  %t = getelementptr i64, ptr %threads, i64 %i
  %c = getelementptr %call, ptr %calls, i64 %i
  %rc = call i32 @pthread_create(ptr %t, ptr %attr, ptr @block_thread, ptr %c)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %body, label %failed
body:
  %next = add i64 %i, 1
  br label %create
failed:
  %ep = getelementptr %call, ptr %calls, i64 0, i32 5
  %errp = load ptr, ptr %ep
  store atomic i64 %fault, ptr %errp seq_cst, align 8
  call void @wake(ptr %calls)
  br label %joins
joins:
  %made = phi i64 [%n, %create], [%i, %failed]
  br label %join
join:
  %j = phi i64 [0, %joins], [%jn, %joinbody]
  %jmore = icmp ult i64 %j, %made
  br i1 %jmore, label %joinbody, label %done
joinbody:
  %tp = getelementptr i64, ptr %threads, i64 %j
  %th = load i64, ptr %tp
  call i32 @pthread_join(i64 %th, ptr null)
  %jn = add i64 %j, 1
  br label %join
done:
  call i32 @pthread_attr_destroy(ptr %attr)
  ret i64 %made
}
"""
RUN_BLOCKS_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)
THREAD_REFUSED = -1  # the fault word's value while the runner ends a launch it could not start

_lock = threading.Lock()
_runner: tuple[Any, Any] | None = None  # (the engine that owns the code, the ctypes entry)


def _compile() -> tuple[Any, Any]:
    from llvmlite import binding as llvm

    from kaiojit.runtime.native.cbuiltins import compile_ir
    from kaiojit.target import CLUSTER_EPOCH, CLUSTER_LIVE, FUTEX_WAKE_PRIVATE, SYS_FUTEX

    wake = "" if SYS_FUTEX is None else (
        f"call i64 (i64, ...) @syscall(i64 {SYS_FUTEX}, ptr %seq, i32 {FUTEX_WAKE_PRIVATE}, "
        "i32 2147483647, ptr null)")
    for name in ("pthread_attr_init", "pthread_attr_setstacksize", "pthread_attr_destroy",
                 "pthread_create", "pthread_join", "syscall"):  # kaiojit's own code: by address
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value)
    text = _RUNNER_IR.replace("WAKE", wake).replace(" LIVE\n", f" {CLUSTER_LIVE}\n")
    engine = compile_ir(text.replace(" EPOCH\n", f" {CLUSTER_EPOCH}\n"), ())
    return engine, RUN_BLOCKS_TYPE(engine.get_function_address("kaiojit_run_blocks"))


def run_blocks(fn: Any, calls: list[tuple[int, int, int, int]], stack_bytes: int,
               launch: np.ndarray, cluster_state: int = 0) -> int:
    """Run ``fn(slots, ctx, first, end)`` (a host entry) for every ``(slots, ctx, first, end)``
    of ``calls``, each on a new thread of ``stack_bytes``; return when all returned, with how
    many threads were started (fewer than the calls when the system refused one: the launch
    state ``launch`` then records nothing, the blocks started having stopped). With a
    ``cluster_state`` (an address), each thread counts its block out of the cluster's live
    blocks when it returns."""
    global _runner
    table = np.empty((len(calls), CALL_WORDS), np.uint64)
    table[:, 0] = ctypes.cast(fn, ctypes.c_void_p).value
    table[:, 1:5] = calls
    table[:, 5] = launch[LAUNCH_ERROR:].ctypes.data
    table[:, 6] = launch.view(np.int32)[2 * LAUNCH_GRID_BARRIER + 1:].ctypes.data
    table[:, 7] = cluster_state
    handles = np.empty(len(calls), np.uint64)
    if _runner is None:
        with _lock:
            if _runner is None:
                _runner = _compile()
    made = _runner[1](table.ctypes.data, len(calls), stack_bytes, handles.ctypes.data,
                      THREAD_REFUSED)
    if made < len(calls):
        launch[LAUNCH_ERROR] = 0
    return made


__all__ = ["run_blocks"]
