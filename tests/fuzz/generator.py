"""Seeded random kernels: ``generate(seed) -> Program`` (``render(program)`` is its source).

Expressions over int32/int64/uint32/uint64/float16/float32/float64 scalars and array elements,
casts, Python's operators, math functions, min/max/abs, conditional expressions, if/elif/else,
for/while with break and continue, local and shared arrays, device functions, tuples, atomics
with a defined result, warp shuffles and votes over full and partial masks and barriers in
uniform control flow. Every program is race-free and defined (docs/semantics.md), so its three
executions (GPU, cpu backend, reference) must agree:

* a shared array is written once, at the kernel's top level, each thread its own element, then
  a barrier; it is only read after that;
* an atomic counter element only ever sees one commutative family of operations (add and sub,
  or one of max, min, and, or, xor, inc with one bound, dec with one bound) and is compared
  after the launch; an atomic's returned value is used only where one thread owns the element;
* float atomics add integer values: an f32 ``atomic.add`` on the GPU flushes subnormals
  (docs/semantics.md), and float ``max``/``min`` atomics see no NaN and no negative zero;
* warp collectives run only where exactly their mask's lanes are (the kernel's top level, loops
  and ifs the same for the whole block, ``if lane < K``-style regions), and shuffles read only
  lanes inside the mask;
* results of math functions whose last bits libraries round differently (sin, exp, pow...) go
  straight to an output slot compared within a few units in the last place, never into control
  flow or other arithmetic;
* integers are raised to non-negative powers only, and a Python literal fits its partner's type
  (NumPy 2 refuses one that does not).

Size ``stream`` makes kernels without loops (one block of at most ``N_INPUT`` threads) that
also read inputs at the thread's own index, ``a[tid]``: what the L2 prefetch pass works on.
Size ``elementwise`` makes straight-line kernels over several blocks that read no thread index
but ``tid``: kernels with a coarse entry (kaiojit/kir/coarsen.py), which the harness runs on
the cpu backend beside the kernel's own entry.
"""

from __future__ import annotations

from .exprgen import INEXACT_TOLERANCE, SHUFFLE_TYPES, ExprGenerator, Scope
from .program import CAST_SPELLING, FULL_MASK, N_COUNTERS, DeviceFunction, Expr, Program, Stmt
from .semantics import FLOATS, INTS, NUMERIC, is_float, is_int

ATOMIC_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
AUG_OPS = ("+", "-", "*", "//", "%")
INT_AUG_OPS = ("&", "|", "^", ">>", "<<")


class Context:
    """Where statements are being generated: ``uniform`` when every thread of the block is
    here together (barriers allowed), ``mask`` the lanes here together (warp collectives
    allowed; None: none), ``loop`` inside a loop that may break, ``top`` the kernel's level."""

    def __init__(self, uniform=False, mask=None, loop=False, top=False, depth=0, family=None):
        self.uniform, self.mask, self.loop, self.top = uniform, mask, loop, top
        self.depth = depth
        # the lanes of a partial mask: ('prefix', K), ('even',) or ('suffix', K)
        self.family = family

    def inner(self, **changes) -> Context:
        c = Context(False, None, self.loop, False, self.depth + 1)
        for k, v in changes.items():
            setattr(c, k, v)
        return c


class Generator(ExprGenerator):
    def __init__(self, seed: int):
        super().__init__(seed)
        self.counter_use: dict[tuple[str, int], tuple] = {}  # (dtype, element) -> op family
        self.elementwise = False  # size "elementwise"

    # --- blocks ----------------------------------------------------------------------------------

    def block_of(self, n: int, ctx: Context) -> list:
        self.scope = Scope(self.scope)
        out: list = []
        for _ in range(n):
            out += self.statement(ctx)
        self.scope = self.scope.parent
        return out

    def statement(self, ctx: Context) -> list:
        r = self.r
        if self.in_function:  # no arrays in device functions
            kinds = ["newvar", "newvar", "reassign", "tuple"] + (["if", "for", "while"]
                                                                 if ctx.depth < 3 else [])
            if ctx.loop:
                kinds.append("jump")
            return getattr(self, f"s_{r.choice(kinds)}")(ctx)
        if self.elementwise:  # straight-line: what a coarse entry takes
            kind = r.choice(["newvar", "newvar", "reassign", "store", "store", "store",
                             "inexact", "augstore", "fold"])
            return getattr(self, f"s_{kind}")(ctx)
        kinds = ["newvar", "newvar", "reassign", "store", "store", "store", "if", "tuple",
                 "atomic", "inexact", "augstore", "fold", "paths", "effects"]
        loops = not self.stream  # a stream program's kernel has none (device functions may)
        if ctx.depth < 3:
            kinds += ["if", "for", "while"] if loops else ["if"]
        if ctx.loop:
            kinds += ["jump", "jump"]
        if any(a[3] == "local" for a in self.arrays):
            kinds.append("setlocal")
        if ctx.top:
            kinds += ["local", "shared", "counters", "region", "region"] if loops else \
                ["shared", "counters", "region", "region"]
        if ctx.uniform:
            kinds += ["barrier", "uniform_loop", "uniform_if"] if loops else \
                ["barrier", "uniform_if"]
        if ctx.mask is not None:
            kinds += ["shuffle", "shuffle", "shuffle", "vote", "syncwarp"]
        kind = r.choice(kinds)
        return getattr(self, f"s_{kind}")(ctx)

    def declare(self, name: str, t) -> None:
        self.scope.vars[name] = t

    # --- plain statements ------------------------------------------------------------------------

    def s_newvar(self, ctx) -> list:
        t = self.r.choice(NUMERIC)
        name = self.fresh("v")
        e = self.expr(t, 3)
        self.declare(name, t)
        return [Stmt("assign", name, (e,))]

    def s_reassign(self, ctx) -> list:
        ro = self.scope.readonly_names()
        names = [n for n, t in self.scope.all().items() if isinstance(t, str) and n not in ro]
        if not names:
            return self.s_newvar(ctx)
        name = self.r.choice(names)
        t = self.scope.all()[name]
        if t == "bool":
            return [Stmt("assign", name, (self.cond(2),))]
        if self.chance(0.5):
            return [Stmt("assign", name, (self.expr(t, 3),))]
        op = self.r.choice(AUG_OPS + (INT_AUG_OPS if is_int(t) else ()))
        value = self.weak(t) if self.chance(0.5) else self.expr(t, 2)
        return [Stmt("augassign", (name, op, t), (value,))]

    def slot(self, t: str) -> tuple[str, int]:
        k = self.slots.get(t, 0)
        self.slots[t] = k + 1
        return f"o_{t}", k

    def s_store(self, ctx) -> list:
        t = self.r.choice(NUMERIC)
        return [Stmt("store", self.slot(t), (self.expr(t, 3),))]

    def s_augstore(self, ctx) -> list:
        """``o[tid, k] op= value`` on a slot this thread stored before (same type: no cast)."""
        t = self.r.choice(NUMERIC)
        array, k = self.slot(t)
        op = self.r.choice(AUG_OPS + (INT_AUG_OPS if is_int(t) else ()))
        value = self.weak(t) if self.chance(0.4) else self.expr(t, 2)
        return [Stmt("store", (array, k), (self.expr(t, 2),)),
                Stmt("augstore", (array, k, op), (value,))]

    def s_fold(self, ctx) -> list:
        """An expression of constants only (special values among them), which the compiler
        folds, stored beside its twin that loads the same constants at run time: both must
        be what the reference computes, bit for bit."""
        t = self.r.choice(NUMERIC)
        self.const_only = True
        e = self.expr(t, 2)
        self.const_only = False
        return [Stmt("store", self.slot(t), (e,)),
                Stmt("store", self.slot(t), (self.folded_twin(e),))]

    def s_paths(self, ctx) -> list:
        """A variable assigned on every path of an if/elif/else (and read after it)."""
        t = self.r.choice(NUMERIC)
        name = self.fresh("v")
        stmt = Stmt("if", None, (self.cond(2),), [Stmt("assign", name, (self.expr(t, 2),))])
        tail = stmt
        for _ in range(self.r.choice([0, 1, 2])):
            nxt = Stmt("if", "elif", (self.cond(2),), [Stmt("assign", name, (self.expr(t, 2),))])
            tail.orelse = [nxt]
            tail = nxt
        tail.orelse = [Stmt("assign", name, (self.expr(t, 2),))]
        self.declare(name, t)
        return [stmt, Stmt("store", self.slot(t), (Expr("var", t, attr=name),))]

    def s_effects(self, ctx) -> list:
        """A comparison chain some of whose operands add to the thread's own output element
        (``kj.atomic.add(o, (tid, k), 1)``, the old count): the element's final count shows
        which operands ran (once each, none after a false comparison)."""
        t = self.r.choice(("int32", "int64", "uint32", "uint64"))
        array, k = self.slot(t)

        def effect(operand_t: str) -> Expr:
            add = Expr("effect", t, (Expr("const", "int64", attr=self.r.randint(1, 3),
                                          weak=True),), attr=(array, k))
            return add if operand_t == t else Expr("cast", operand_t, (add,),
                                                   attr=CAST_SPELLING[operand_t])

        init = Stmt("store", (array, k), (Expr("const", t, ("kj",), attr=0),))
        chain = self.chain(1, effect)
        if self.chance(0.5):
            one = Expr("const", "int64", attr=1, weak=True)
            zero = Expr("const", "int64", attr=0, weak=True)
            use = Stmt("store", self.slot("int32"), (Expr("ifexp", "int32", (chain, one, zero)),))
        else:
            use = Stmt("if", None, (chain,), [Stmt("store", self.slot("int64"),
                                                  (self.expr("int64", 1),))])
        return [init, use]

    def s_inexact(self, ctx) -> list:
        t = self.r.choice(FLOATS)
        array, k = self.slot(t)
        self.tolerance[(t, k)] = INEXACT_TOLERANCE[t]
        return [Stmt("store", (array, k), (self.inexact(t, 2),))]

    def s_if(self, ctx) -> list:
        inner = ctx.inner(loop=ctx.loop)
        stmt = Stmt("if", None, (self.cond(2),), self.block_of(self.r.randint(1, 3), inner))
        tail = stmt
        for _ in range(self.r.choice([0, 0, 1, 2])):
            nxt = Stmt("if", "elif", (self.cond(2),), self.block_of(self.r.randint(1, 2), inner))
            tail.orelse = [nxt]
            tail = nxt
        if self.chance(0.5):
            tail.orelse = self.block_of(self.r.randint(1, 2), inner)
        return [stmt]

    def int64_bound(self, mask: int) -> Expr:
        """A small int64 loop bound: a literal, or an int64 expression ``& mask``."""
        if self.chance(0.5):
            return Expr("const", "int64", attr=self.r.randint(0, mask), weak=True)
        return Expr("bin", "int64", (self.expr("int64", 1),
                                     Expr("const", "int64", attr=mask, weak=True)), attr="&")

    def s_for(self, ctx) -> list:
        var = self.fresh("j")
        r = self.r
        form = r.choice(["stop", "start", "step"])
        if form == "stop":
            args = (self.int64_bound(7),)
        elif form == "start":
            args = (self.int64_bound(3), self.int64_bound(7))
        else:
            step = r.choice([1, 2, 3, -1, -2])
            lo, hi = self.int64_bound(3), self.int64_bound(7)
            args = (lo, hi) if step > 0 else (hi, lo)
            args += (Expr("const", "int64", attr=step, weak=True),)
        self.scope = Scope(self.scope)
        self.declare(var, "int64")
        self.scope.readonly.add(var)
        if all(a.weak for a in args):  # over literals the counter is a Python int (weak)
            self.scope.weak.add(var)
        body = self.block_of(r.randint(1, 4), ctx.inner(loop=True))
        self.scope = self.scope.parent
        return [Stmt("for", var, args, body)]

    def s_while(self, ctx) -> list:
        var = self.fresh("w")
        self.scope = Scope(self.scope)
        self.declare(var, "int64")
        self.scope.readonly.add(var)
        self.scope.weak.add(var)  # w = 0; w += 1: a Python int
        limit = self.int64_bound(7)
        body = self.block_of(self.r.randint(1, 4), ctx.inner(loop=True))
        self.scope = self.scope.parent
        return [Stmt("while", var, (limit,), body)]

    def s_jump(self, ctx) -> list:
        jump = Stmt(self.r.choice(["break", "continue"]))
        return [Stmt("if", None, (self.cond(1),), [jump])]

    def s_tuple(self, ctx) -> list:
        r = self.r
        form = r.choice(["pack", "swap", "var", "call"])
        if form == "swap":
            ro = self.scope.readonly_names()
            by_type: dict = {}
            for n, t in self.scope.all().items():
                if isinstance(t, str) and n not in ro:
                    by_type.setdefault(t, []).append(n)
            pairs = [v for v in by_type.values() if len(v) >= 2]
            if pairs:
                a, b = r.sample(r.choice(pairs), 2)
                t = self.scope.all()[a]
                return [Stmt("assign", f"{a}, {b}",
                             (Expr("tuple", "tuple", (Expr("var", t, attr=b),
                                                      Expr("var", t, attr=a))),))]
            form = "pack"
        if form == "call":
            fns = [f for f in self.functions if len(f.returns) == 2]
            if fns:
                f = r.choice(fns)
                names = [self.fresh("p") for _ in f.returns]
                call = Expr("call", "tuple", tuple(self.expr(pt, 2) for _, pt in f.params),
                            attr=f.name)
                for n, e in zip(names, f.returns):
                    self.declare(n, e.type)
                return [Stmt("assign", ", ".join(names), (call,))]
            form = "pack"
        types = [r.choice(NUMERIC) for _ in range(r.choice([2, 2, 3]))]
        values = tuple(self.expr(t, 2) for t in types)
        if form == "var":
            name = self.fresh("t")
            stmt = Stmt("assign", name, (Expr("tuple", "tuple", values),))
            self.declare(name, ("tuple", *types))
            return [stmt]
        names = [self.fresh("p") for _ in types]
        stmt = Stmt("assign", ", ".join(names), (Expr("tuple", "tuple", values),))
        for n, t in zip(names, types):
            self.declare(n, t)
        return [stmt]

    # --- arrays ----------------------------------------------------------------------------------

    def s_local(self, ctx) -> list:
        t = self.r.choice(NUMERIC)
        n = self.r.choice([4, 8])
        name = self.fresh("l")
        var = self.fresh("j")
        self.scope = Scope(self.scope)
        self.declare(var, "int64")
        self.scope.readonly.add(var)
        self.scope.weak.add(var)
        init = Stmt("setitem", name, (Expr("var", "int64", attr=var, weak=True),
                                      self.expr(t, 2)))
        self.scope = self.scope.parent
        loop = Stmt("for", var, (Expr("const", "int64", attr=n, weak=True),), [init])
        self.arrays.append((name, t, n, "local"))
        return [Stmt("local", (name, n, t)), loop]

    def s_setlocal(self, ctx) -> list:
        name, t, n, _ = self.r.choice([a for a in self.arrays if a[3] == "local"])
        return [Stmt("setitem", name, (self.index(n), self.expr(t, 2)))]

    def s_shared(self, ctx) -> list:
        t = self.r.choice(NUMERIC)
        name = self.fresh("sh")
        value = self.expr(t, 2)
        self.arrays.append((name, t, self.block, "shared"))
        return [Stmt("shared", (name, self.block, t)),
                Stmt("setitem", name, (Expr("var", "int32", attr="tx"), value)), Stmt("sync")]

    # --- atomics ---------------------------------------------------------------------------------

    def atomic_value(self, t: str) -> Expr:
        """A value for an atomic on a ``t`` array: any integer; for floats a small integer
        (exact sums, no NaN, no negative zero, no subnormal)."""
        if is_int(t):
            return self.expr(t, 2) if self.chance(0.7) else self.weak(t)
        small = Expr("bin", "int32", (self.expr("int32", 1),
                                      Expr("const", "int64", attr=16, weak=True)), attr="%")
        return Expr("cast", t, (small,), attr=CAST_SPELLING[t])

    def s_atomic(self, ctx) -> list:
        t = self.r.choice(ATOMIC_TYPES)
        if self.chance(0.5):
            return self.atomic_private(t)
        return self.atomic_counter(t, f"c_{t}", N_COUNTERS)

    def atomic_private(self, t: str) -> list:
        """An atomic on the thread's own output element: its returned value is defined."""
        ops = ["add", "sub", "max", "min", "exch", "cas"]
        if is_int(t):
            ops += ["and_", "or_", "xor"]
        if t.startswith("uint"):
            ops += ["inc", "dec"]
        op = self.r.choice(ops)
        array, k = self.slot(t)
        old = self.fresh("v")
        values = (self.atomic_value(t), self.atomic_value(t)) if op == "cas" else \
            (self.atomic_value(t),)
        init = Stmt("store", (array, k), (self.atomic_value(t),))
        stmt = Stmt("atomic", (old, op, array, ("row", k)), values)
        self.declare(old, t)
        return [init, stmt, Stmt("store", self.slot(t), (Expr("var", t, attr=old),))]

    def atomic_counter(self, t: str, array: str, size: int, shared: bool = False) -> list:
        r = self.r
        families = [("add",), ("max",), ("min",)]
        if is_int(t):
            families += [("and_",), ("or_",), ("xor",)]
        if t.startswith("uint"):
            families += [("inc", r.randint(0, 20)), ("dec", r.randint(0, 20))]
        element = r.randrange(size)
        key = (array, element)
        family = self.counter_use.setdefault(key, r.choice(families))
        if not shared:
            self.counters.add(t)
        op = family[0]
        if op == "add" and self.chance(0.3):
            op = "sub"
        if op in ("inc", "dec"):
            values = (Expr("const", t, ("kj",), attr=family[1]),)
        else:
            values = (self.atomic_value(t),)
        index = Expr("const", "int64", attr=element, weak=True)
        return [Stmt("atomic", (None, op, array, ("flat",)), (index, *values))]

    def s_counters(self, ctx) -> list:
        """A shared counter array: set by 4 threads, a barrier, atomics, a barrier, read."""
        t = self.r.choice(ATOMIC_TYPES)
        name = self.fresh("sc")
        tx = Expr("var", "int32", attr="tx")
        four = Expr("const", "int64", attr=4, weak=True)
        init = Stmt("if", None, (Expr("cmp", "bool", (tx, four), attr="<"),),
                    [Stmt("setitem", name, (tx, self.atomic_value(t)))])
        body = []
        for _ in range(self.r.randint(1, 3)):
            atom = self.atomic_counter(t, name, 4, shared=True)
            if self.chance(0.4):
                atom = [Stmt("if", None, (self.cond(1),), atom)]
            body += atom
        read = Stmt("store", self.slot(t),
                    (Expr("load", t, (Expr("bin", "int32", (tx, four), attr="%"),), attr=name),))
        return [Stmt("shared", (name, 4, t)), init, Stmt("sync"), *body, Stmt("sync"), read]

    # --- collectives -----------------------------------------------------------------------------

    def s_barrier(self, ctx) -> list:
        kind = self.r.choice(["sync", "count", "and", "or"])
        if kind == "sync":
            return [Stmt("sync")]
        name = self.fresh("n" if kind == "count" else "b")
        t = "int32" if kind == "count" else "bool"
        stmt = Stmt("collective", (name, f"kj.syncthreads_{kind}", None), (self.cond(2),))
        self.declare(name, t)
        return [stmt]

    def s_uniform_loop(self, ctx) -> list:
        var = self.fresh("j")
        self.scope = Scope(self.scope)
        self.declare(var, "int64")
        self.scope.readonly.add(var)
        self.scope.weak.add(var)
        inner = ctx.inner(uniform=True, mask=ctx.mask, family=ctx.family, loop=False)
        body = self.block_of(self.r.randint(1, 4), inner)
        self.scope = self.scope.parent
        n = Expr("const", "int64", attr=self.r.randint(1, 4), weak=True)
        return [Stmt("for", var, (n,), body)]

    def s_uniform_if(self, ctx) -> list:
        """An if whose condition is the same for every thread: a scalar argument's."""
        t = self.r.choice(NUMERIC)
        self.inputs.add(t)
        cond = Expr("cmp", "bool", (Expr("var", t, attr=f"s_{t}"), self.weak(t)),
                    attr=self.r.choice(("<", ">", "==", "!=")))
        inner = ctx.inner(uniform=True, mask=ctx.mask, family=ctx.family, loop=False)
        stmt = Stmt("if", None, (cond,), self.block_of(self.r.randint(1, 3), inner))
        if self.chance(0.5):
            stmt.orelse = self.block_of(self.r.randint(1, 2), inner)
        return [stmt]

    def s_region(self, ctx) -> list:
        """``if lane < K:`` (or even lanes, or ``lane >= K``) with collectives over those lanes."""
        r = self.r
        lane = Expr("var", "int32", attr="lane")
        form = r.choice(["prefix", "prefix", "even", "suffix"])
        if form == "prefix":
            k = r.choice([1, 2, 4, 8, 16, 5, 13, 24, 31])
            cond = Expr("cmp", "bool", (lane, Expr("const", "int64", attr=k, weak=True)), attr="<")
            mask, family = (1 << k) - 1, ("prefix", k)
        elif form == "suffix":
            k = r.choice([1, 8, 16, 20, 31])
            cond = Expr("cmp", "bool", (lane, Expr("const", "int64", attr=k, weak=True)),
                        attr=">=")
            mask, family = FULL_MASK & ~((1 << k) - 1), ("suffix", k)
        else:
            two = Expr("const", "int64", attr=2, weak=True)
            cond = Expr("cmp", "bool", (Expr("bin", "int32", (lane, two), attr="%"),
                                        Expr("const", "int64", attr=0, weak=True)), attr="==")
            mask, family = 0x55555555, ("even",)
        inner = ctx.inner(mask=mask, family=family, loop=False)
        return [Stmt("if", None, (cond,), self.block_of(r.randint(1, 4), inner))]

    def lane_operand(self, kind: str, family) -> Expr | None:
        """The lane (idx), delta (up, down) or lane mask (xor) operand, reading inside the mask;
        None when this shuffle cannot stay inside it."""
        r = self.r

        def lit(v):
            return Expr("const", "int64", attr=v, weak=True)

        def mod(e, m):
            return Expr("bin", e.type, (e, lit(m)), attr="%")

        anyint = self.expr(r.choice(INTS), 1)
        if family is None:  # the full warp: any operand (its low 5 bits count)
            if kind == "idx" or self.chance(0.3):
                return anyint
            return lit(r.randint(0, 40))
        name = family[0]
        if name == "prefix":
            k = family[1]
            if kind == "idx":
                return mod(anyint, k)
            if kind == "up":
                return lit(r.randint(0, 31))
            if kind == "xor" and k & (k - 1) == 0 and k > 1:
                return lit(r.randrange(1, k))
            return None
        if name == "even":
            if kind == "idx":
                return Expr("bin", anyint.type, (mod(anyint, 16), lit(2)), attr="*")
            return lit(2 * r.randint(0, 15))
        k = family[1]
        if kind == "idx":
            return Expr("bin", anyint.type, (lit(k), mod(anyint, 32 - k)), attr="+")
        if kind == "down":
            return lit(r.randint(0, 31))
        return None

    def s_shuffle(self, ctx) -> list:
        r = self.r
        kind = r.choice(["idx", "up", "down", "xor"])
        operand = self.lane_operand(kind, ctx.family)
        if operand is None:
            kind, operand = "idx", self.lane_operand("idx", ctx.family)
        t = r.choice(SHUFFLE_TYPES)
        name = self.fresh("v")
        fn = "kj.shfl_sync" if kind == "idx" else f"kj.shfl_{kind}_sync"
        stmt = Stmt("collective", (name, fn, ctx.mask), (self.expr(t, 2), operand))
        self.declare(name, t)
        return [stmt, Stmt("store", self.slot(t), (Expr("var", t, attr=name),))]

    def s_vote(self, ctx) -> list:
        kind = self.r.choice(["all", "any", "ballot"])
        name = self.fresh("b" if kind != "ballot" else "v")
        stmt = Stmt("collective", (name, f"kj.{kind}_sync", ctx.mask), (self.cond(2),))
        t = "uint32" if kind == "ballot" else "bool"
        self.declare(name, t)
        if t == "uint32":
            return [stmt, Stmt("store", self.slot(t), (Expr("var", t, attr=name),))]
        return [stmt]

    def s_syncwarp(self, ctx) -> list:
        return [Stmt("syncwarp", ctx.mask)]

    # --- device functions ------------------------------------------------------------------------

    def function(self) -> DeviceFunction:
        r = self.r
        name = self.fresh("dev")
        params = [(self.fresh("x"), r.choice(NUMERIC)) for _ in range(r.randint(1, 3))]
        outer, self.scope, self.in_function = self.scope, Scope(), True
        for n, t in params:
            self.declare(n, t)
        body: list = []
        ctx = Context(depth=1)
        for _ in range(r.randint(0, 3)):
            body += r.choice([self.s_newvar, self.s_newvar, self.s_reassign, self.s_if])(ctx)
        rt = r.choice(NUMERIC)
        returns = (self.expr(rt, 3),) if self.chance(0.7) else \
            (self.expr(rt, 2), self.expr(r.choice(NUMERIC), 2))
        if len(returns) == 1 and self.chance(0.3):
            body.append(Stmt("if", None, (self.cond(1),), [Stmt("return", None,
                                                                 (self.expr(rt, 2),))]))
        self.scope, self.in_function = outer, False
        return DeviceFunction(name, params, body, returns)


SIZES = {  # top-level statements, device functions, deepest expression
    "tiny": ((2, 5), (0, 1), 2),
    "small": ((3, 8), (0, 1), 2),
    "normal": ((5, 13), (0, 3), 3),
    # a kernel without loops that reads its inputs at the thread's own index too, as a
    # one-element-a-thread kernel does (the arrays kir.analysis.streamed_arrays finds, which
    # the NVPTX lowering prefetches); one block of at most N_INPUT threads
    "stream": ((3, 8), (0, 1), 2),
    # straight-line statements only, inputs read at the thread's own index too, no thread
    # index but tid, several blocks: a kernel with a coarse entry (kaiojit/kir/coarsen.py),
    # which the harness runs beside the kernel's own
    "elementwise": ((3, 9), (0, 0), 2),
}


def generate(seed: int, size: str = "normal") -> Program:
    """The random kernel of ``seed`` (the same seed and size, the same program)."""
    statements, functions, g_depth = SIZES[size]
    g = Generator(seed)
    g.max_depth = g_depth
    r = g.r
    if size == "stream":
        g.stream = True
        g.block, grid = r.choice([32, 64]), 1  # every thread's own index is an input's
    elif size == "elementwise":
        g.stream = g.elementwise = True
        g.block, grid = r.choice([32, 64]), r.choice([1, 2, 3, 4, 5, 6, 7, 9, 13])
    else:
        g.block = r.choice([32, 64, 64, 96])
        grid = r.choice([1, 2])
    for name, t in (("tid", "int64"), ("tx", "int32"), ("lane", "int32")):
        if g.elementwise and name != "tid":
            continue
        g.declare(name, t)
        g.scope.readonly.add(name)
    for _ in range(r.randint(*functions)):
        g.functions.append(g.function())
    top = Context(uniform=True, mask=FULL_MASK, top=True)
    body: list = []
    for _ in range(r.randint(*statements)):
        body += g.statement(top)
    if not g.slots:
        body += g.s_store(top)
    return Program(seed=seed, grid=grid, block=g.block, kernel=body, functions=g.functions,
                   slots=dict(g.slots), inputs=tuple(sorted(g.inputs)),
                   counters=tuple(sorted(g.counters)), tolerance=dict(g.tolerance),
                   elementwise=g.elementwise, constants={t: list(v) for t, v in
                                                         g.constants.items()})


__all__ = ["generate", "is_float"]
