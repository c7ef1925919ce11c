"""Facts about a typed function that the lowering uses: which array parameters a kernel may
write (the others are read through the read-only data cache), and which integer variables
are never negative (their indices need no wraparound)."""

from __future__ import annotations

from .. import types as T
from ..frontend import kir
from ..frontend.kir import Expr


def written_params(kfunc: kir.KFunction, _seen=None) -> set[str]:
    """Parameters whose array may be written (stored to, atomics, or passed on or aliased)."""
    written: set[str] = set()
    params = {n for n, t in kfunc.params if isinstance(t, T.ArrayType)}

    def root(e: Expr):
        while e.op == "cast" or (e.op == "intrinsic"
                                 and e.attr.startswith(("array.view", "array.slice"))):
            e = e.args[0]
        return e.attr if e.op == "var" and e.attr in params else None

    for s in kir.walk_stmts(kfunc.body):
        if isinstance(s, kir.Store):
            r = root(s.array)
            if r:
                written.add(r)
        if isinstance(s, kir.Assign) and isinstance(s.value.type, T.ArrayType):
            r = root(s.value)
            if r and r != s.target:
                written.add(r)  # aliased: be conservative
        for top in kir.stmt_exprs(s):
            for e in kir.walk_expr(top):
                if e.op == "intrinsic" and e.attr.startswith("atomic."):
                    r = root(e.args[0])
                    if r:
                        written.add(r)
                elif e.op == "call":
                    callee_written = written_params(e.attr)
                    for (pname, _), arg in zip(e.attr.params, e.args):
                        r = root(arg)
                        if r and pname in callee_written:
                            written.add(r)
    for name in params:
        if name in kfunc.locals and any(
            isinstance(s, kir.Assign) and s.target == name for s in kir.walk_stmts(kfunc.body)
        ):
            written.add(name)
    return written


_NONNEG_INTRINSICS = ("sreg.", "grid.", "gridsize.", "bits.popc", "bits.clz", "bits.ffs")
_NONNEG_OPS = ("+", "*", "//", "%", ">>", "|", "^", "<<")


def nonnegative_vars(kfunc: kir.KFunction) -> frozenset[str]:
    """Integer variables that only ever hold values built from thread and block indices,
    sizes, shapes and non-negative constants: indexing with them needs no wraparound of
    negative indices. Overflow is ignored here, as CUDA C's signed arithmetic does."""
    assigned: dict[str, list] = {}
    for s in kir.walk_stmts(kfunc.body):
        if isinstance(s, kir.Assign):
            assigned.setdefault(s.target, []).append(s.value)
        elif isinstance(s, kir.ForRange):
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
        return e.attr.startswith(_NONNEG_INTRINSICS)
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
