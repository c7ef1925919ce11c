"""Thread coarsening: a second kernel entry in which each block does the work of ``FACTOR``
consecutive blocks of the kernel the user wrote.

Why: a kernel users write one element a thread (``i = kj.grid(1)``, ``if i < n: out[i] = a *
x[i] + y[i]``) starts one block per 256 elements. On the H200 the SMs start and retire blocks
at about 1.6 a nanosecond over the whole GPU; 2^20 blocks of 256 threads already need 1.3 a
nanosecond, and one load a thread and array keeps few bytes in flight. The same work in a
quarter of the blocks, each thread holding four elements' loads in flight, runs at the memory
system's speed (benchmarks/RESULTS.md, 2026-12-04).

Which kernels: only those whose threads cannot tell the difference. The body is

- first, assignments without loads (pure), among them one or more of the thread's global
  index: ``kj.grid(1)``, or ``blockIdx.x * blockDim.x + threadIdx.x`` (any order, with
  conversions); every copy assigns its own renamed variables;
- then either straight-line statements (the first one that loads ends the prefix), or one
  ``if`` (no ``else``) around straight-line statements; straight-line statements are
  assignments and stores;
- no loop, barrier, warp or block collective, atomic, shared or local array, device-function
  call, print, random number or any other intrinsic than arithmetic (``math``, ``cmath``,
  ``bits``, ``complex``); no other read of a thread or block index, block or grid size.
  ``assert`` statements are left out: the coarse entry is only made without ``debug=True``,
  where they lower to nothing.

Its threads then share nothing and observe nothing of the launch but their own index, so
running four of them one after the other in one thread is one of the orders in which the GPU
may run them (they do not synchronize, so none waits for another).

The coarse entry takes one more parameter, the grid's x extent as launched by the user
(``GRID_PARAM``), and is launched with a quarter of the blocks (rounded up)::

    b = blockIdx.x * 4
    <the prefix, once per copy k = 0..3, the index computed for block b + k>
    if b + 3 < grid and cond_0 and cond_1 and cond_2 and cond_3:
        <the four copies' statements, interleaved: each statement's loads first>
    else:
        for each k: if b + k < grid and cond_k: <copy k>

In the interleaved form each copy's loads are taken out of its statements into temporaries
(outside ``and``, ``or`` and conditional expressions, whose operands may not all be
evaluated), and the copies' statements are emitted statement by statement: all four copies'
loads are issued before the first store. Within a copy the order is the source's; across
copies any order is one the GPU may choose.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import types as T
from ..target import COARSE_FACTOR
from .analysis import is_thread_index, unconverted
from .intrinsics import lookup
from .nodes import Assign, Expr, ExprStmt, If, KFunction, Return, Stmt, Store

FACTOR = COARSE_FACTOR
GRID_PARAM = "__kaiojit_grid"  # the user's grid.x, a parameter after the kernel's own
BLOCK_VAR = "__kaiojit_block"

_PLAIN_OPS = frozenset(("const", "var", "param", "binop", "unop", "not", "cmp", "and", "or",
                        "select", "cast", "shape", "tuple", "getitem", "reuse"))
_CONDITIONAL = frozenset(("and", "or", "select"))  # operands not always evaluated


def coarsenable(kfunc: KFunction) -> bool:
    return _shape(kfunc) is not None


def _shape(kfunc: KFunction) -> tuple[list[Assign], Expr | None, list[Stmt]] | None:
    """(prefix, condition or None, statements) of a kernel of the coarsenable form."""
    if not kfunc.is_kernel or kfunc.callees:
        return None
    stmts = list(kfunc.body)
    if stmts and isinstance(stmts[-1], Return) and stmts[-1].value is None:
        stmts.pop()
    k = 0  # the prefix: the leading assignments without loads (every copy runs them)
    while (k < len(stmts) and isinstance(stmts[k], Assign)
           and (is_thread_index(stmts[k].value) or _allowed(stmts[k].value, loads=False))):
        k += 1
    prefix, rest = stmts[:k], stmts[k:]
    cond = None
    if len(rest) == 1 and isinstance(rest[0], If) and not rest[0].orelse:
        cond, rest = rest[0].cond, rest[0].body
        if not _allowed(cond, loads=True):
            return None
    # without debug=True (a coarse entry's condition) an assert lowers to nothing
    rest = [s for s in rest if not _is_assert(s)]
    if not rest or not all(isinstance(s, (Assign, Store)) for s in rest):
        return None
    has_index = any(is_thread_index(s.value) for s in prefix)
    for s in rest:
        exprs = (s.value,) if isinstance(s, Assign) else (s.array, *s.indices, s.value)
        if not all(_allowed(e, loads=True) for e in exprs):
            return None
    return (prefix, cond, rest) if has_index else None


def _is_assert(s: Stmt) -> bool:
    return (isinstance(s, ExprStmt) and s.expr.op == "intrinsic"
            and s.expr.attr == "debug.assert")


def _allowed(e: Expr, loads: bool) -> bool:
    """Only plain operations, loads where ``loads``, and elementwise intrinsics."""
    if e.op == "intrinsic":
        ok = lookup(e.attr).elementwise
    else:
        ok = e.op in _PLAIN_OPS or (e.op == "load" and loads)
    return ok and all(_allowed(a, loads) for a in e.args)


def coarsen(kfunc: KFunction, factor: int = FACTOR) -> KFunction:
    """The coarse entry of a :func:`coarsenable` kernel (see the module's text)."""
    shape = _shape(kfunc)
    if shape is None:
        raise ValueError(f"{kfunc.name}: not a kernel of the coarsenable form")
    prefix, cond, stmts = shape
    loc = kfunc.loc
    locals_ = dict(kfunc.locals)
    locals_[GRID_PARAM] = T.int64
    locals_[BLOCK_VAR] = T.int32
    body: list[Stmt] = [Assign(BLOCK_VAR, _bin("*", _sreg("sreg.ctaid.x", loc),
                                               _const(factor, T.int32), T.int32), loc)]
    grid = Expr("var", T.int64, (), GRID_PARAM, loc)
    copies = []
    for k in range(factor):
        names: dict[str, str] = {}
        block = f"{BLOCK_VAR}{k}"
        locals_[block] = T.int32
        body.append(Assign(block, _bin("+", _var(BLOCK_VAR, T.int32, loc),
                                       _const(k, T.int32), T.int32), loc))
        virtual = _var(block, T.int32, loc)
        for s in prefix:
            value = (_at_block(s.value, virtual) if is_thread_index(s.value)
                     else _renamed(s.value, names))
            body.append(Assign(_target(s.target, k, names, locals_), value, s.loc))
        copies.append((k, dict(names), virtual))

    def inside(virtual: Expr) -> Expr:  # the virtual block is one the user launched
        return _bin("<", _cast(virtual, T.int64), grid, T.bool_, op="cmp")

    def test(first: Expr, names: dict) -> Expr:  # a fresh copy of the condition each time
        return first if cond is None else Expr("and", T.bool_,
                                               (first, _renamed(cond, names)), loc=loc)
    fast_cond = inside(copies[-1][2])
    for _, names, _ in copies:
        fast_cond = test(fast_cond, names)
    fast = _interleaved(stmts, copies, locals_)
    tail: list[Stmt] = []
    for k, names, virtual in copies:
        tail.append(If(test(inside(virtual), names), _copy(stmts, k, dict(names), locals_),
                       [], loc))
    body.append(If(fast_cond, fast, tail, loc))
    return KFunction(
        name=kfunc.name, qualname=kfunc.qualname,
        params=(*kfunc.params, (GRID_PARAM, T.int64)), return_type=kfunc.return_type,
        locals=locals_, body=body, is_kernel=True, loc=loc, callees=[], mangled="")


# --- the copies ---------------------------------------------------------------------------------

def _copy(stmts: list[Stmt], k: int, names: dict[str, str], locals_: dict) -> list[Stmt]:
    """Copy ``k`` of straight-line statements, its variables renamed."""
    out: list[Stmt] = []
    for s in stmts:
        memo: dict = {}
        if isinstance(s, Assign):
            value = _renamed(s.value, names, memo)
            out.append(Assign(_target(s.target, k, names, locals_), value, s.loc))
        else:
            out.append(Store(_renamed(s.array, names, memo),
                             tuple(_renamed(i, names, memo) for i in s.indices),
                             _renamed(s.value, names, memo), s.loc))
    return out


def _interleaved(stmts: list[Stmt], copies: list, locals_: dict) -> list[Stmt]:
    """Every copy's statements with their loads taken out first, statement by statement."""
    counter = iter(range(1 << 30))
    split = _with_loads_first(stmts, lambda t: _fresh(t, counter, locals_))
    per_copy = [_copy(split, k, dict(names), locals_) for k, names, _ in copies]
    return [s for group in zip(*per_copy) for s in group]


def _with_loads_first(stmts: list[Stmt], fresh: Callable[[T.Type], str]) -> list[Stmt]:
    out: list[Stmt] = []
    for s in stmts:
        memo: dict = {}
        if isinstance(s, Assign):
            out.append(Assign(s.target, _take_loads(s.value, out, fresh, memo), s.loc))
        else:
            array = _take_loads(s.array, out, fresh, memo)
            indices = tuple(_take_loads(i, out, fresh, memo) for i in s.indices)
            out.append(Store(array, indices, _take_loads(s.value, out, fresh, memo), s.loc))
    return out


def _take_loads(e: Expr, out: list[Stmt], fresh: Callable[[T.Type], str], memo: dict) -> Expr:
    """``e`` with each load it always evaluates assigned to a temporary first (into ``out``,
    operands before the loads that use them); a node shared within the statement is taken
    once (``memo``)."""
    done = memo.get(id(e))
    if done is not None:
        return done
    if e.op in _CONDITIONAL:
        new = e
    else:
        args = tuple(_take_loads(a, out, fresh, memo) for a in e.args)
        new = e
        if any(a is not b for a, b in zip(args, e.args)):
            new = Expr(e.op, e.type, args, e.attr, e.loc, e.weak, e.param)
        if new.op == "load" and isinstance(new.type, T.ScalarType):
            name = fresh(new.type)
            out.append(Assign(name, new, new.loc))
            new = Expr("var", new.type, (), name, new.loc)
    memo[id(e)] = new
    return new


def _fresh(t: T.Type, counter, locals_: dict) -> str:
    name = f"__kaiojit_load{next(counter)}"
    locals_[name] = t
    return name


def _target(name: str, k: int, names: dict[str, str], locals_: dict) -> str:
    new = names[name] = f"{name}__copy{k}"
    locals_[new] = locals_[name]
    return new


def _renamed(e: Expr, names: dict[str, str], memo: dict | None = None) -> Expr:
    """A fresh copy of ``e`` with the copy's variable names. Nodes shared within one statement
    (a ``reuse`` node: evaluated at its first use, its later uses dominated by it) stay shared
    within the copy (``memo``, one per statement); no node is shared between two copies, or
    between the interleaved form and the per-copy one, where the first use would not
    dominate the other."""
    memo = {} if memo is None else memo
    done = memo.get(id(e))
    if done is not None:
        return done
    if e.op == "var" and e.attr in names:
        new = Expr("var", e.type, (), names[e.attr], e.loc, e.weak)
    else:
        new = Expr(e.op, e.type, tuple(_renamed(a, names, memo) for a in e.args), e.attr,
                   e.loc, e.weak, e.param)
    memo[id(e)] = new
    return new


def _at_block(e: Expr, virtual: Expr) -> Expr:
    """A thread-index expression computed for the virtual block ``virtual`` (int32): the
    block index replaced; ``kj.grid(1)`` spelled out as its lowering computes it."""
    u = unconverted(e)
    if u.op == "intrinsic" and u.attr == "grid.x":
        loc = u.loc
        wide = _bin("*", _cast(virtual, T.int64), _cast(_sreg("sreg.ntid.x", loc), T.int64),
                    T.int64)
        spelled = _bin("+", wide, _cast(_sreg("sreg.tid.x", loc), T.int64), T.int64)
        return _replace(e, u, spelled)
    return _substitute_block(e, virtual)


def _substitute_block(e: Expr, virtual: Expr) -> Expr:
    if e.op == "intrinsic" and e.attr == "sreg.ctaid.x":
        return virtual if e.type == virtual.type else _cast(virtual, e.type)
    if not e.args:
        return e
    return Expr(e.op, e.type, tuple(_substitute_block(a, virtual) for a in e.args), e.attr,
                e.loc, e.weak)


def _replace(e: Expr, old: Expr, new: Expr) -> Expr:
    if e is old:
        return new
    return Expr(e.op, e.type, tuple(_replace(a, old, new) for a in e.args), e.attr, e.loc,
                e.weak, e.param)


def _sreg(name: str, loc) -> Expr:
    return Expr("intrinsic", T.int32, (), name, loc)


def _var(name: str, t: T.Type, loc) -> Expr:
    return Expr("var", t, (), name, loc)


def _const(value: int, t: T.Type) -> Expr:
    return Expr("const", t, (), value)


def _cast(e: Expr, t: T.Type) -> Expr:
    return e if e.type == t else Expr("cast", t, (e,), None, e.loc)


def _bin(attr: str, a: Expr, b: Expr, t: T.Type, op: str = "binop") -> Expr:
    return Expr(op, t, (a, b), attr, a.loc)


__all__ = ["FACTOR", "GRID_PARAM", "coarsen", "coarsenable"]
