"""Facts about typed functions that the lowering and the compiler use, read from the IR and
the intrinsics' declared properties (never from their names):

* ``written_params``: the array parameters a kernel may write (the others are read through
  the GPU's read-only data cache);
* ``nonnegative_vars`` / ``is_nonnegative``: integers that are never negative (indexing with
  them needs no wraparound of negative indices);
* ``is_pure``: expressions without side effects;
* ``uses_sync`` / ``is_split_point``: barriers and warp collectives, which the cpu backend
  runs block-synchronously;
* ``shared_layout`` / ``static_shared_bytes``: where each static shared array lives;
* ``streamed_arrays``: the arrays a one-element-a-thread kernel reads at the thread's own
  index (which the NVPTX lowering prefetches into L2 ahead of later blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .. import types as T
from .intrinsics import lookup
from .nodes import Assign, Expr, ForRange, KFunction, Store, While
from .walk import function_exprs, stmt_exprs, walk_expr, walk_functions, walk_stmts


def written_params(kfunc: KFunction, _typing: frozenset = frozenset()) -> set[str]:
    """Parameters whose array may be written (stored to, written by an intrinsic such as an
    atomic, passed to a device function that writes it, or aliased). A call of a function
    this one is inside of (recursion) may write every array it is passed."""
    written: set[str] = set()
    _typing = _typing | {id(kfunc)}
    params = {n for n, t in kfunc.params if isinstance(t, (T.ArrayType, T.RecordType))}

    def root(e: Expr) -> str | None:
        while e.op == "cast" or (e.op == "intrinsic" and lookup(e.attr).view):
            e = e.args[0]
        return e.attr if e.op == "var" and e.attr in params else None

    for s in walk_stmts(kfunc.body):
        if isinstance(s, Store):
            r = root(s.array)
            if r:
                written.add(r)
        if isinstance(s, Assign) and isinstance(s.value.type, (T.ArrayType, T.RecordType)):
            r = root(s.value)
            if r and r != s.target:
                written.add(r)  # aliased: be conservative
        for top in stmt_exprs(s):
            for e in walk_expr(top):
                if e.op == "intrinsic":
                    for i in lookup(e.attr).writes:
                        r = root(e.args[i])
                        if r:
                            written.add(r)
                elif e.op == "call":
                    callee_written = ({n for n, _ in e.attr.params} if id(e.attr) in _typing
                                      else written_params(e.attr, _typing))
                    for (pname, _), arg in zip(e.attr.params, e.args):
                        r = root(arg)
                        if r and pname in callee_written:
                            written.add(r)
    for name in params:
        if name in kfunc.locals and any(
            isinstance(s, Assign) and s.target == name for s in walk_stmts(kfunc.body)
        ):
            written.add(name)
    return written


# --- integers that are never negative ------------------------------------------------------------

_NONNEG_OPS = ("+", "*", "//", "%", ">>", "|", "^", "<<")


def nonnegative_vars(kfunc: KFunction) -> frozenset[str]:
    """Integer variables that only ever hold values built from non-negative intrinsics (thread
    and block indices, sizes), shapes and non-negative constants: indexing with them needs no
    wraparound of negative indices. Overflow is ignored here, as CUDA C's signed arithmetic
    does."""
    assigned: dict[str, list] = {}
    for s in walk_stmts(kfunc.body):
        if isinstance(s, Assign):
            assigned.setdefault(s.target, []).append(s.value)
        elif isinstance(s, ForRange):
            step_ok = s.step.op == "const" and s.step.attr > 0
            assigned.setdefault(s.var, []).append(s.start if step_ok else None)
    params = {n for n, _ in kfunc.params}
    candidates = {n for n in assigned if n not in params}
    changed = True
    while changed:
        changed = False
        for name in list(candidates):
            if not all(v is not None and is_nonnegative(v, candidates)
                       for v in assigned[name]):
                candidates.discard(name)
                changed = True
    return frozenset(candidates)


def is_nonnegative(e: Expr, nonneg_vars) -> bool:
    """Whether ``e`` is never negative, given variables known to be never negative."""
    if isinstance(e.type, T.ScalarType) and e.type.kind == "u":
        return True
    op = e.op
    if op == "const":
        return isinstance(e.attr, (int, float)) and e.attr >= 0
    if op == "var":
        return e.attr in nonneg_vars
    if op == "shape":
        return True
    if op == "intrinsic":
        return lookup(e.attr).nonnegative
    if op == "cast":
        src = e.args[0].type
        return (isinstance(src, T.ScalarType) and src.is_int and e.type.bits >= src.bits
                and is_nonnegative(e.args[0], nonneg_vars))
    if op == "binop" and e.attr in _NONNEG_OPS:
        return all(is_nonnegative(a, nonneg_vars) for a in e.args)
    if op == "binop" and e.attr == "&":
        return any(is_nonnegative(a, nonneg_vars) for a in e.args)
    if op == "select":
        return all(is_nonnegative(a, nonneg_vars) for a in e.args[1:])
    if op == "getitem" and e.args[0].op == "tuple":
        return is_nonnegative(e.args[0].args[e.attr], nonneg_vars)
    return False


# --- side effects and synchronization ------------------------------------------------------------

def is_pure(e: Expr) -> bool:
    """No side effects, and safe to evaluate speculatively: evaluating it twice, or where the
    source would not evaluate it, is the same as evaluating it once. So no device-function
    call, only ``pure`` intrinsics, and no load (a condition may be what keeps an index in
    bounds: ``x[i] if i < n else 0.0``)."""
    for x in walk_expr(e):
        if x.op in ("call", "load") or (x.op == "intrinsic" and not lookup(x.attr).pure):
            return False
    return True


def uses_sync(kfunc: KFunction) -> bool:
    """Whether a function, or a device function it calls, has a barrier or a warp collective
    (the cpu backend then runs it block-synchronously)."""
    return any(e.op == "intrinsic" and lookup(e.attr).split_point
               for f in walk_functions(kfunc) for e in function_exprs(f))


def arch_specific(kfunc: KFunction) -> Expr | None:
    """The first use, in a function or a device function it calls, of an intrinsic that needs
    an arch-specific GPU arch (its ``min_arch`` ends in 'a': wgmma's 'sm_90a'), else None."""
    for f in walk_functions(kfunc):
        for e in function_exprs(f):
            if e.op == "intrinsic":
                need = lookup(e.attr).min_arch
                if need is not None and need.endswith("a"):
                    return e
    return None


def is_split_point(e: Expr, needs_block: Callable[[KFunction], bool]) -> bool:
    """A barrier, a warp collective, or a call of a function that has one (``needs_block``
    answers that, usually ``uses_sync`` memoized): where the cpu backend's block-synchronous
    lowering ends one loop over the block's threads and starts another."""
    if e.op == "intrinsic":
        return lookup(e.attr).split_point
    return e.op == "call" and needs_block(e.attr)


# --- static shared memory ------------------------------------------------------------------------

SHARED_ALIGN = 16
SWIZZLE_ALIGN = 1024  # arch-specific kernels (wgmma): the 128B swizzle atom, on both targets


class SharedLayout(NamedTuple):
    """The static shared arrays of a kernel and the device functions it calls: each array's
    byte offset (16-byte aligned, by name) and the bytes they take together (a multiple of 16,
    where the dynamic shared buffer starts on the host)."""

    offsets: dict[str, int]
    size: int


def shared_layout(kfunc: KFunction) -> SharedLayout:
    """Lay out the static shared arrays of ``kfunc`` and its callees, each once, in order."""
    offsets: dict[str, int] = {}
    total = 0
    dynamic_align = SHARED_ALIGN
    base = SWIZZLE_ALIGN if arch_specific(kfunc) is not None else SHARED_ALIGN
    for f in walk_functions(kfunc):
        for e in function_exprs(f):
            if e.op != "shared":
                continue
            align = max(base, e.attr[3] if len(e.attr) > 3 else SHARED_ALIGN)  # alignment=
            if not e.attr[0]:  # the dynamic buffer starts after the static arrays, aligned
                dynamic_align = max(dynamic_align, align)
            elif e.attr[2] not in offsets:
                shape, dtype, name = e.attr[:3]
                n = dtype.itemsize
                for d in shape:
                    n *= d
                total = -(-total // align) * align
                offsets[name] = total
                total += -(-n // SHARED_ALIGN) * SHARED_ALIGN  # the next array aligns its own start
    return SharedLayout(offsets, -(-total // dynamic_align) * dynamic_align)


def shared_array_vars(kfunc: KFunction) -> dict[str, str]:
    """Local variables that only ever hold one shared array (assigned once, from
    ``kj.shared.array``): variable name -> the shared array's name. An access through such a
    variable may address shared memory directly, where its alignment is known."""
    params = {n for n, _ in kfunc.params}
    found: dict[str, str] = {}
    other: set[str] = set(params)
    for s in walk_stmts(kfunc.body):
        if not isinstance(s, Assign) or not isinstance(s.value.type, T.ArrayType):
            continue
        if s.value.op == "shared" and s.target not in found and s.target not in other:
            found[s.target] = s.value.attr[2] if s.value.attr[0] else "$dynamic_shared"
        else:
            other.add(s.target)
    return {v: name for v, name in found.items() if v not in other}


def static_shared_bytes(kfunc: KFunction) -> int:
    """Bytes of static shared memory a block of this kernel uses (see ``SharedLayout``)."""
    return shared_layout(kfunc).size


def streamed_arrays(kfunc: KFunction) -> tuple[str, ...]:
    """The one-dimensional C-contiguous array parameters that a kernel without loops reads at
    the thread's own index in a one-dimensional grid: ``x[i]`` where every assignment of ``i``
    is ``kj.grid(1)`` or ``blockIdx.x * blockDim.x + threadIdx.x``. Each thread reads one
    element and later blocks read on where earlier ones stop: a stream. In the order of their
    first load."""
    if not kfunc.is_kernel:
        return ()
    stmts = list(walk_stmts(kfunc.body))
    if any(isinstance(s, (While, ForRange)) for s in stmts):
        return ()
    values: dict[str, list[Expr]] = {}
    for s in stmts:
        if isinstance(s, Assign):
            values.setdefault(s.target, []).append(s.value)
    params = dict(kfunc.params)
    index_vars = {v for v, vs in values.items()
                  if v not in params and all(is_thread_index(e) for e in vs)}
    found: list[str] = []
    for e in function_exprs(kfunc):
        if e.op != "load" or len(e.args) != 2:
            continue
        arr, idx = e.args
        t = params.get(arr.attr) if arr.op == "var" else None
        if (isinstance(t, T.ArrayType) and t.ndim == 1 and t.layout == "C"
                and arr.attr not in values and idx.op == "var" and idx.attr in index_vars
                and arr.attr not in found):
            found.append(arr.attr)
    return tuple(found)


def is_thread_index(e: Expr) -> bool:
    """``kj.grid(1)``, or ``blockIdx.x * blockDim.x + threadIdx.x`` (in either order, with
    conversions)."""
    e = unconverted(e)
    if e.op == "intrinsic" and e.attr == "grid.x":
        return True
    if e.op != "binop" or e.attr != "+":
        return False
    for prod, tid in (e.args, reversed(e.args)):
        prod = unconverted(prod)
        if (_sreg(tid) == "sreg.tid.x" and prod.op == "binop" and prod.attr == "*"
                and {_sreg(a) for a in prod.args} == {"sreg.ctaid.x", "sreg.ntid.x"}):
            return True
    return False


def unconverted(e: Expr) -> Expr:
    while e.op == "cast":
        e = e.args[0]
    return e


def _sreg(e: Expr) -> str | None:
    e = unconverted(e)
    return e.attr if e.op == "intrinsic" else None


__all__ = [
    "SharedLayout", "arch_specific", "is_nonnegative", "is_pure", "is_split_point", "nonnegative_vars",
    "is_thread_index", "shared_array_vars", "shared_layout", "static_shared_bytes",
    "streamed_arrays", "unconverted", "uses_sync", "written_params",
]
