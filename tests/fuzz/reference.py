"""The reference execution of a generated program, written from docs/semantics.md: every thread
is Python running the program's tree with the numerics of ``semantics.py``. A block's threads
are generators that stop at each barrier and warp collective; the scheduler runs every thread
up to its next one, then completes a warp collective once all the lanes of its mask are there
(and a barrier once the whole block is), so shuffles, votes and shared memory behave as the
CUDA programming model defines them. Blocks run one after another.
"""

from __future__ import annotations

import numpy as np

from . import semantics as S
from .program import Expr, Program, Stmt


class ReferenceError_(Exception):
    """The program is not one the generator should write (a collective that cannot complete,
    a shuffle reading outside its mask): a bug in the generator, not in kaiojit."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, values):
        self.values = values


class Thread:
    __slots__ = ("env", "locals", "tid", "tx", "block")

    def __init__(self, tid: int, tx: int, block: Block):
        self.tid, self.tx = tid, tx
        self.env = {"tid": tid, "tx": tx, "lane": tx % 32}
        self.locals: dict = {}
        self.block = block


class Block:
    def __init__(self):
        self.shared: dict = {}


class Reference:
    def __init__(self, program: Program, arrays: dict):
        """``arrays``: every kernel argument by name (NumPy arrays and scalars); the output
        and counter arrays are copied and written."""
        self.p = program
        self.arrays = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}
        self.functions = {f.name: f for f in program.functions}
        for t in program.inputs:
            s = self.arrays[f"s_{t}"]
            self.arrays[f"s_{t}"] = int(s) if S.is_int(t) else S.NP[t](s)

    # --- running ---------------------------------------------------------------------------------

    def run(self) -> dict:
        p = self.p
        with np.errstate(all="ignore"):
            for b in range(p.grid):
                self.run_block(b)
        return {k: v for k, v in self.arrays.items() if k.startswith(("o_", "c_"))}

    def run_block(self, b: int) -> None:
        p = self.p
        block = Block()
        threads = [Thread(b * p.block + i, i, block) for i in range(p.block)]
        gens = [self.exec_block(p.kernel, th) for th in threads]
        active = set(range(p.block))
        pending: dict[int, tuple] = {}
        replies: dict[int, object] = {}
        while active:
            for i in sorted(active - pending.keys()):
                try:
                    pending[i] = gens[i].send(replies.pop(i, None))
                except StopIteration:
                    active.discard(i)
            if not pending:
                break
            if not self.resolve_warps(pending, replies, p.block):
                self.resolve_barrier(pending, replies, active)

    def resolve_warps(self, pending: dict, replies: dict, nthreads: int) -> bool:
        groups: dict = {}
        for i, req in pending.items():
            if req[0] == "warp":
                groups.setdefault((i // 32, id(req[1])), []).append(i)
        done = False
        for (w, _), members in groups.items():
            mask = pending[members[0]][3]
            lanes = {i % 32 for i in members}
            want = {lane for lane in range(32) if mask >> lane & 1 and w * 32 + lane < nthreads}
            if not lanes <= want:
                raise ReferenceError_(f"lanes {sorted(lanes - want)} outside mask {mask:#x}")
            if lanes != want:
                continue
            reqs = {i % 32: pending.pop(i) for i in members}
            for lane, value in self.warp_results(reqs).items():
                replies[w * 32 + lane] = value
            done = True
        return done

    @staticmethod
    def warp_results(reqs: dict) -> dict:
        kind = next(iter(reqs.values()))[2]
        if kind in ("all", "any", "ballot"):
            preds = {lane: r[4] for lane, r in reqs.items()}
            if kind == "ballot":
                bits = sum(1 << lane for lane, v in preds.items() if v)
                return {lane: bits for lane in preds}
            value = all(preds.values()) if kind == "all" else any(preds.values())
            return {lane: value for lane in preds}
        out = {}
        for lane, r in reqs.items():
            bval = r[5] & 31  # PTX: the operand's low 5 bits
            if kind == "idx":
                j = bval
            elif kind == "up":
                j = lane - bval if lane - bval >= 0 else lane
            elif kind == "down":
                j = lane + bval if lane + bval <= 31 else lane
            else:
                j = lane ^ bval
            if j not in reqs:
                raise ReferenceError_(f"lane {lane} shuffles from lane {j} outside the mask")
            out[lane] = reqs[j][4]
        return out

    @staticmethod
    def resolve_barrier(pending: dict, replies: dict, active: set) -> None:
        if set(pending) != active or any(r[0] != "bar" for r in pending.values()):
            raise ReferenceError_("a barrier or collective that cannot complete")
        kinds = {r[1] for r in pending.values()}
        if len(kinds) != 1:
            raise ReferenceError_(f"threads at different barriers: {kinds}")
        kind = kinds.pop()
        preds = [r[2] for r in pending.values()]
        value = {"sync": None, "count": sum(bool(x) for x in preds), "and": all(preds),
                 "or": any(preds)}[kind]
        for i in list(pending):
            del pending[i]
            replies[i] = value

    # --- statements ------------------------------------------------------------------------------

    def exec_block(self, stmts: list, th: Thread):
        for s in stmts:
            k = s.kind
            if k in ("assign", "augassign", "store", "augstore", "setitem", "local", "shared",
                     "atomic"):
                self.exec_simple(s, th)
            elif k == "if":
                if self.ev(s.exprs[0], th):
                    yield from self.exec_block(s.body, th)
                else:
                    yield from self.exec_block(s.orelse, th)
            elif k == "for":
                for v in range(*(int(self.ev(e, th)) for e in s.exprs)):
                    th.env[s.attr] = v
                    try:
                        yield from self.exec_block(s.body, th)
                    except _Break:
                        break
                    except _Continue:
                        continue
            elif k == "while":
                limit = s.exprs[0]
                th.env[s.attr] = 0
                while S.compare("<", th.env[s.attr], "int64", self.ev(limit, th), limit.type):
                    th.env[s.attr] += 1
                    try:
                        yield from self.exec_block(s.body, th)
                    except _Break:
                        break
                    except _Continue:
                        continue
            elif k == "break":
                raise _Break
            elif k == "continue":
                raise _Continue
            elif k == "return":
                raise _Return(tuple(self.ev(e, th) for e in s.exprs))
            elif k == "sync":
                yield ("bar", "sync", None)
            elif k == "syncwarp":
                pass  # orders memory within the warp; nothing to compute
            elif k == "collective":
                target, fn, mask = s.attr
                if fn.startswith("kj.syncthreads_"):
                    value = yield ("bar", fn[len("kj.syncthreads_"):], self.ev(s.exprs[0], th))
                elif fn.endswith("_sync") and fn[3:].split("_")[0] in ("all", "any", "ballot"):
                    kind = fn[3:].split("_")[0]
                    value = yield ("warp", s, kind, mask, bool(self.ev(s.exprs[0], th)))
                else:
                    kind = "idx" if fn == "kj.shfl_sync" else fn.split("_")[1]
                    v = self.ev(s.exprs[0], th)
                    op = s.exprs[1]
                    lane = self.conv(op, self.ev(op, th), "int32")
                    value = yield ("warp", s, kind, mask, v, lane)
                th.env[target] = value
            else:
                raise AssertionError(k)

    def exec_simple(self, s: Stmt, th: Thread) -> None:
        k = s.kind
        if k == "assign":
            value = self.ev(s.exprs[0], th)
            names = [n.strip() for n in s.attr.split(",")]
            if len(names) == 1:
                th.env[names[0]] = value
            else:
                for n, v in zip(names, value):
                    th.env[n] = v
        elif k == "augassign":
            name, op, t = s.attr
            e = s.exprs[0]
            th.env[name] = S.binop(op, th.env[name], self.conv(e, self.ev(e, th), t), t)
        elif k == "store":
            array, slot = s.attr
            e = s.exprs[0]
            t = array[2:]
            self.arrays[array][th.tid, slot] = self.conv(e, self.ev(e, th), t)
        elif k == "augstore":
            array, slot, op = s.attr
            e = s.exprs[0]
            t = array[2:]
            old = self.arrays[array][th.tid, slot]
            old = int(old) if S.is_int(t) else S.NP[t](old)
            self.arrays[array][th.tid, slot] = S.binop(op, old, self.conv(e, self.ev(e, th), t), t)
        elif k == "setitem":
            store, t, size = self.array_of(s.attr, th)
            i = self.ev(s.exprs[0], th)
            e = s.exprs[1]
            store[i + size if i < 0 else i] = self.conv(e, self.ev(e, th), t)
        elif k == "local":
            name, n, t = s.attr
            th.locals[name] = ([None] * n, t)
        elif k == "shared":
            name, n, t = s.attr
            th.block.shared.setdefault(name, ([None] * n, t))
        elif k == "atomic":
            self.exec_atomic(s, th)
        else:
            raise AssertionError(k)

    def array_of(self, name: str, th: Thread):
        if name in th.locals:
            store, t = th.locals[name]
            return store, t, len(store)
        if name in th.block.shared:
            store, t = th.block.shared[name]
            return store, t, len(store)
        arr = self.arrays[name]
        return arr, arr.dtype.name, arr.shape[0]

    def exec_atomic(self, s: Stmt, th: Thread) -> None:
        target, op, array, where = s.attr
        if where[0] == "row":
            store, t = self.arrays[array], array[2:]
            at, vals = (th.tid, where[1]), s.exprs
            old = store[at]
        else:
            store, t, _ = self.array_of(array, th)
            at, vals = int(self.ev(s.exprs[0], th)), s.exprs[1:]
            old = store[at]
        old = int(old) if S.is_int(t) else S.NP[t](old)
        v = [self.conv(e, self.ev(e, th), t) for e in vals]
        new = atomic_op(op, old, v, t)
        store[at] = new
        if target:
            th.env[target] = old

    # --- expressions ------------------------------------------------------------------------------

    def conv(self, e: Expr, v, t: str):
        """``v``, the value of ``e``, converted to type ``t`` (a weak literal as NEP 50 does)."""
        if e.weak:
            if S.is_int(t):
                return S.wrap(int(v), t)
            if isinstance(v, int):
                return S.int_to_float(v, t)
            return S.NP[t](v)
        return S.convert(v, e.type, t)

    def ev(self, e: Expr, th: Thread):
        k = e.kind
        a = e.args
        if k == "var":
            if e.attr.startswith("s_"):
                return self.arrays[e.attr]
            return th.env[e.attr]
        if k == "const":
            if e.weak:
                return e.attr
            return S.convert(e.attr, "int64", e.type) if S.is_int(e.type) else S.NP[e.type](e.attr)
        if k == "load":
            store, t, size = self.array_of(e.attr, th)
            i = int(self.ev(a[0], th))
            v = store[i + size if i < 0 else i]
            if v is None:
                raise ReferenceError_(f"{e.attr}[{i}] read before it was written")
            return int(v) if S.is_int(t) else S.NP[t](v)
        if k == "bin":
            t = e.type
            if e.attr == "**" and S.is_float(t) and a[1].kind == "const" and \
                    float(a[1].attr) in (0.5, 1.0, 2.0):
                # a constant exponent: x ** 0.5 is sqrt (so (-0.0) ** 0.5 is -0.0, as NumPy's
                # power of a scalar), x ** 1.0 is x, x ** 2.0 is x * x
                x = self.conv(a[0], self.ev(a[0], th), t)
                c = float(a[1].attr)
                return S.math_fn("sqrt", [x], t) if c == 0.5 else x if c == 1.0 else x * x
            return S.binop(e.attr, self.conv(a[0], self.ev(a[0], th), t),
                           self.conv(a[1], self.ev(a[1], th), t), t)
        if k == "cmp":
            return self.compare(e.attr, a[0], self.ev(a[0], th), a[1], self.ev(a[1], th))
        if k == "chain":  # each operand evaluated once, from the left, until one is false
            left = self.ev(a[0], th)
            for i, op in enumerate(e.attr):
                right = self.ev(a[i + 1], th)
                if not self.compare(op, a[i], left, a[i + 1], right):
                    return False
                left = right
            return True
        if k == "effect":  # atomic add on the thread's own output element: the old value
            array, slot = e.attr
            store = self.arrays[array]
            old = int(store[th.tid, slot])
            store[th.tid, slot] = S.binop("+", old, self.conv(a[0], self.ev(a[0], th), e.type),
                                          e.type)
            return old
        if k == "bool":
            if e.attr == "and":
                return bool(self.ev(a[0], th)) and bool(self.ev(a[1], th))
            return bool(self.ev(a[0], th)) or bool(self.ev(a[1], th))
        if k == "not":
            return not self.ev(a[0], th)
        if k == "un":
            return S.unary(e.attr, self.ev(a[0], th), e.type)
        if k == "cast":
            return S.convert(self.ev(a[0], th), a[0].type, e.type)
        if k == "ifexp":
            return self.ev(a[1], th) if self.ev(a[0], th) else self.ev(a[2], th)
        if k == "item":
            return th.env[a[0].attr][e.attr]
        if k == "tuple":
            return tuple(self.ev(x, th) for x in a)
        if k == "call":
            return self.call(e, th)
        raise AssertionError(k)

    def compare(self, op: str, ea: Expr, va, eb: Expr, vb) -> bool:
        if ea.weak or eb.weak:
            t = S.result_type(ea.type, ea.weak, eb.type, eb.weak)
            return S.compare(op, self.conv(ea, va, t), t, self.conv(eb, vb, t), t)
        return S.compare(op, va, ea.type, vb, eb.type)

    def call(self, e: Expr, th: Thread):
        fn, a, t = e.attr, e.args, e.type
        if fn in self.functions:
            return self.call_function(self.functions[fn], [self.ev(x, th) for x in a], th)
        if fn == "abs":
            return S.py_abs(self.ev(a[0], th), t)
        if fn in ("min", "max"):
            values = [self.conv(x, self.ev(x, th), t) for x in a]
            out = values[0]
            for v in values[1:]:
                out = S.py_min(out, v) if fn == "min" else S.py_max(out, v)
            return out
        if fn in ("math.floor", "math.ceil", "math.trunc", "round"):
            return S.math_to_int(fn.split(".")[-1], self.ev(a[0], th))
        if fn in ("math.isnan", "math.isinf", "math.isfinite"):
            return bool(getattr(np, fn[5:])(self.ev(a[0], th)))
        if fn == "kj.fma":
            return S.fma(*(self.ev(x, th) for x in a), t)
        name = fn.split(".")[1]
        return S.math_fn(name, [self.ev(x, th) for x in a], t)

    def call_function(self, f, args: list, th: Thread):
        inner = Thread(th.tid, th.tx, th.block)
        inner.env = dict(zip((n for n, _ in f.params), args))
        try:
            for _ in self.exec_block(f.body, inner):
                raise ReferenceError_("a collective in a device function")
        except _Return as r:
            values = r.values
        else:
            values = tuple(self.ev(x, inner) for x in f.returns)
        return values[0] if len(values) == 1 and len(f.returns) == 1 else values


def atomic_op(op: str, old, v: list, t: str):
    if op == "add":
        return S.binop("+", old, v[0], t)
    if op == "sub":
        return S.binop("-", old, v[0], t)
    if op == "max":
        return v[0] if v[0] > old else old
    if op == "min":
        return v[0] if v[0] < old else old
    if op == "exch":
        return v[0]
    if op in ("and_", "or_", "xor"):
        return S.binop({"and_": "&", "or_": "|", "xor": "^"}[op], old, v[0], t)
    if op == "inc":
        return 0 if old >= v[0] else old + 1
    if op == "dec":
        return v[0] if old == 0 or old > v[0] else old - 1
    if op == "cas":
        same = old == v[0] if S.is_int(t) else S.bits_of(old, t) == S.bits_of(v[0], t)
        return v[1] if same else old
    raise AssertionError(op)
