"""The checked variant's unchecked blocks: a kernel of the fast path (no barrier) whose every
access is provably in bounds and race-free for a whole block runs that block unchecked.

A streaming kernel (``out[i] = a * x[i] + y[i]``) checked access by access cannot be
vectorized: the report calls on its bounds checks keep each thread's loop scalar. Its indices
are simple functions of the thread index, though, so the driver can bound every index over
the block's threads before the block runs (interval arithmetic on the block's coordinates,
the kernel's scalar parameters and constants) and compare the bounds with the arrays' shapes.
Where every access of the block is in bounds and every array it touches is one the launch
needs no racecheck on (``SAN_QUIET``: read-only, or thread-private in a one-dimensional
launch, with arguments that do not overlap), no check of the block can find anything, and the
block runs a plain copy of the kernel. Other blocks (the grid's edges, where ``x[i + 1]`` may
run past the end under an ``if``) run the checked one, so findings are what they were.

Used only where every access of the kernel (none in device functions, no atomics or views) is
to a kernel array parameter at indices this module can bound; otherwise the kernel is
checked everywhere, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .. import kir
from .. import types as T
from ..kir import Expr
from ..kir.intrinsics import lookup
from ..target import CTX_CHECK, SAN_QUIET, SAN_UNINIT_COUNT
from .host_sanitize_analysis import quiet_params
from .llvmtypes import I1, I64

MAX_DEPTH = 8        # single-assignment variables followed this deep
WIDE = 1 << 40       # every bound stays within +-WIDE (no i64 overflow in a sum)
FACTOR = 1 << 31     # a product's operands stay within +-FACTOR
_AXES = "xyz"


@dataclass(frozen=True)
class BlockPlan:
    """What the driver tests before each block: each access (array parameter, its quiet
    bits, its indices) and the variables the indices use."""
    accesses: tuple[tuple[str, int, tuple[Expr, ...]], ...]
    values: dict  # single-assignment variable -> its value


def plan_for(kfunc: kir.KFunction, quiet: dict[str, int]) -> BlockPlan | None:
    """The block test of a fast-path kernel, or None where some access cannot be bounded."""
    arrays = {n for n, t in kfunc.params if isinstance(t, T.ArrayType)}
    for f in kir.walk_functions(kfunc):
        if f is not kfunc and _has_accesses(f):
            return None
    assigned: dict[str, list[Expr | None]] = {}
    for s in kir.walk_stmts(kfunc.body):
        if isinstance(s, kir.Assign):
            assigned.setdefault(s.target, []).append(s.value)
        elif isinstance(s, kir.ForRange):
            assigned.setdefault(s.var, []).append(None)
    values = {name: vs[0] for name, vs in assigned.items() if len(vs) == 1 and vs[0] is not None}
    accesses = []
    for s in kir.walk_stmts(kfunc.body):
        if isinstance(s, kir.Store):
            accesses.append((s.array, s.indices))
        for top in kir.stmt_exprs(s):
            for e in kir.walk_expr(top):
                if e.op == "load":
                    accesses.append((e.args[0], tuple(e.args[1:])))
                elif e.op in ("shared", "local") or (e.op == "intrinsic" and e.args and
                                                     isinstance(e.args[0].type, T.ArrayType)):
                    return None  # shared or local memory, an atomic or a view: checked
    plan = []
    for arr, indices in accesses:
        name = arr.attr if arr.op in ("var", "param") else None
        if name not in arrays or name in assigned or not quiet.get(name):
            return None
        if not all(_boundable(i, values, set(assigned), MAX_DEPTH) for i in indices):
            return None
        plan.append((name, quiet[name], tuple(indices)))
    if not plan:
        return None
    return BlockPlan(tuple(plan), values)


def _has_accesses(f: kir.KFunction) -> bool:
    if any(isinstance(s, kir.Store) for s in kir.walk_stmts(f.body)):
        return True
    return any(e.op == "load" or (e.op == "intrinsic" and lookup(e.attr).writes)
               for e in kir.function_exprs(f))


def _boundable(e: Expr, values: dict, assigned: set, depth: int) -> bool:
    op = e.op
    if not (isinstance(e.type, T.ScalarType) and e.type.is_int):
        return False
    if op == "const":
        return True
    if op in ("var", "param"):
        if e.attr in values:
            return depth > 0 and _boundable(values[e.attr], values, assigned, depth - 1)
        return e.attr not in assigned  # a scalar parameter
    if op == "intrinsic":
        return _special(e.attr) is not None
    if op == "shape":  # a kernel array parameter's extent
        arr = e.args[0]
        return arr.op in ("var", "param") and arr.attr not in assigned and \
            isinstance(arr.type, T.ArrayType) and arr.attr not in values
    if op == "cast":
        return _boundable(e.args[0], values, assigned, depth)
    if op == "binop" and e.attr in ("+", "-", "*"):
        return all(_boundable(a, values, assigned, depth) for a in e.args)
    return False


def _special(name: str) -> tuple[str, int] | None:
    """A thread-position intrinsic this module bounds: (kind, axis)."""
    kind, _, axis = name.rpartition(".")
    if axis not in _AXES:
        return None
    if kind in ("grid", "gridsize", "sreg.tid", "sreg.ctaid", "sreg.ntid", "sreg.nctaid"):
        return kind, _AXES.index(axis)
    return None


class BlockBounds:
    """The driver's test of one block (``emit``): an i1, true where the plain copy may run."""

    def __init__(self, b: ir.IRBuilder, plan: BlockPlan, ctx, params: dict, grid, block_idx,
                 dims):
        self.b, self.plan, self.ctx, self.params = b, plan, ctx, params
        self.grid, self.block_idx, self.dims = grid, block_idx, dims
        self.ok = ir.Constant(I1, 1)

    def emit(self):
        b = self.b
        state = b.inttoptr(b.load(b.gep(self.ctx, [ir.Constant(I64, CTX_CHECK)],
                                        source_etype=I64), typ=I64), ir.PointerType())
        quiet = _state_word(b, state, SAN_QUIET)
        # a launch with kj.device_array memory nobody wrote yet is initchecked everywhere
        self._require(b.icmp_unsigned("==", _state_word(b, state, SAN_UNINIT_COUNT),
                                      ir.Constant(I64, 0)))
        for name, bits in sorted({(n, q) for n, q, _ in self.plan.accesses}):
            self._require(b.icmp_unsigned("!=", b.and_(quiet, ir.Constant(I64, bits)),
                                          ir.Constant(I64, 0)))
        for name, _, indices in self.plan.accesses:
            for d, index in enumerate(indices):
                lo, hi = self.bounds(index, MAX_DEPTH)
                shape = self.params[f"{name}.shape{d}"]
                self._require(b.icmp_signed(">=", lo, ir.Constant(I64, 0)))
                self._require(b.icmp_signed("<", hi, shape))
        return self.ok

    def _require(self, cond) -> None:
        self.ok = self.b.and_(self.ok, cond)

    def _within(self, lo, hi, low: int, high: int) -> None:
        b = self.b
        self._require(b.icmp_signed(">=", lo, ir.Constant(I64, low)))
        self._require(b.icmp_signed("<=", hi, ir.Constant(I64, high)))

    def bounds(self, e: Expr, depth: int):
        """(lo, hi) of ``e`` over the block's threads (i64s); the value's type must hold
        them, as must +-WIDE."""
        lo, hi = self._bounds(e, depth)
        t = e.type
        if t.bits < 64:
            low, high = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed \
                else (0, (1 << t.bits) - 1)
            self._within(lo, hi, low, high)
        elif not t.is_signed:
            self._within(lo, hi, 0, WIDE)
        self._within(lo, hi, -WIDE, WIDE)
        return lo, hi

    def _bounds(self, e: Expr, depth: int):
        b = self.b
        op = e.op
        if op == "const":
            c = ir.Constant(I64, int(e.attr))
            return c, c
        if op in ("var", "param"):
            if e.attr in self.plan.values:
                return self.bounds(self.plan.values[e.attr], depth - 1)
            v = self.params[e.attr]
            v = b.sext(v, I64) if e.type.is_signed and v.type.width < 64 else \
                (b.zext(v, I64) if v.type.width < 64 else v)
            return v, v
        if op == "cast":
            return self.bounds(e.args[0], depth)
        if op == "intrinsic":
            return self._special(e.attr)
        if op == "shape":
            v = self.params[f"{e.args[0].attr}.shape{e.attr}"]
            return v, v
        (alo, ahi), (blo, bhi) = (self.bounds(a, depth) for a in e.args)
        if e.attr == "+":
            return b.add(alo, blo), b.add(ahi, bhi)
        if e.attr == "-":
            return b.sub(alo, bhi), b.sub(ahi, blo)
        for v in (alo, ahi, blo, bhi):
            self._within(v, v, -FACTOR, FACTOR)
        products = [b.mul(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return _fold(b, products, "<"), _fold(b, products, ">")

    def _special(self, name: str):
        b = self.b
        kind, axis = _special(name)
        one = ir.Constant(I64, 1)
        if kind == "sreg.tid":
            return ir.Constant(I64, 0), b.sub(self.dims[axis], one)
        if kind == "sreg.ctaid":
            return self.block_idx[axis], self.block_idx[axis]
        if kind == "sreg.ntid":
            return self.dims[axis], self.dims[axis]
        if kind == "sreg.nctaid":
            return self.grid[axis], self.grid[axis]
        if kind == "gridsize":
            size = b.mul(self.grid[axis], self.dims[axis])
            return size, size
        first = b.mul(self.block_idx[axis], self.dims[axis])  # grid
        return first, b.sub(b.add(first, self.dims[axis]), one)


def _fold(b: ir.IRBuilder, values: list, cmp: str):
    out = values[0]
    for v in values[1:]:
        out = b.select(b.icmp_signed(cmp, v, out), v, out)
    return out


def _state_word(b: ir.IRBuilder, state, index: int):
    return b.load(b.gep(state, [ir.Constant(I64, index)], source_etype=I64), typ=I64)


def unchecked_copy(mod, kfunc: kir.KFunction, symbol: str, lowering):
    """The kernel's per-thread body lowered without checks, for the blocks that
    ``host_sanitize_blocks`` proves cannot have findings (None where it proves none)."""
    plan = plan_for(kfunc, quiet_params(kfunc))
    if plan is None:
        return None
    fn = mod.target.define_kernel(mod, kfunc, f"{symbol}.unchecked", set())
    mod.target.sanitize = False
    try:
        lowering(mod, kfunc, fn, None).lower()
    finally:
        mod.target.sanitize = True
    mod.unchecked_plan = plan
    return fn


def versioned_threads(b: ir.IRBuilder, mod, kfunc, ctx, params, grid, block_idx, dims, body,
                      threads) -> None:
    """The driver's loops over a block's threads (``threads(fn)``): of the plain copy where
    the block's test passes, else of the checked ``body``."""
    from .target import Target

    plain = mod.unchecked_body
    if plain is None:
        threads(body)
        return
    names = [name for name, _ in Target.flat_param_types(kfunc)]
    ok = BlockBounds(b, mod.unchecked_plan, ctx, dict(zip(names, params)), grid, block_idx,
                     dims).emit()
    with b.if_else(ok, likely=True) as (unchecked, checked):
        with unchecked:
            threads(plain)
        with checked:
            threads(body)


__all__ = ["BlockBounds", "BlockPlan", "plan_for", "unchecked_copy", "versioned_threads"]
