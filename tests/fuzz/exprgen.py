"""Random typed expressions and conditions for the kernel generator (``generator.py``, whose
docstring says what makes every generated program defined)."""

from __future__ import annotations

import math
import random

from .program import CAST_SPELLING, N_INPUT, PASS_SPELLING, DeviceFunction, Expr
from .semantics import (
    EXACT_MATH, FLOATS, INEXACT_MATH, INTS, NUMERIC, PASS_THROUGH, int_range, is_int,
    result_type,
)

SHUFFLE_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
ATOMIC_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
ARITH = ("+", "-", "*", "//", "%")
BITWISE = ("&", "|", "^", "<<", ">>")
CMP = ("<", "<=", ">", ">=", "==", "!=")
INEXACT_TOLERANCE = {"float16": 2, "float32": 16, "float64": 16}

# float constants at the edges: NaN, infinities, zeros, subnormals, past float16's and float32's
# range (a conversion saturates or overflows them)
SPECIAL_FLOATS = (math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, -1e-45, 6e-8, 1e-40,
                  70000.0, -65520.0, 1e39, -3.5e38, 2.0**31, -(2.0**63), 2.0**64, 1.8e19, 127.5,
                  -128.5, 32767.9, -32768.5, 255.5)

# strong operand pairs giving each result type
PAIRS = {t: [(a, b) for a in NUMERIC for b in NUMERIC if result_type(a, False, b, False) == t]
         for t in NUMERIC}


class Scope:
    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self.vars: dict[str, object] = {}
        self.readonly: set[str] = set()
        self.weak: set[str] = set()

    def all(self) -> dict:
        out = dict(self.parent.all()) if self.parent else {}
        out.update(self.vars)
        return out

    def readonly_names(self) -> set:
        return (self.parent.readonly_names() if self.parent else set()) | self.readonly

    def weak_names(self) -> set:
        return (self.parent.weak_names() if self.parent else set()) | self.weak


class ExprGenerator:
    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.seed = seed
        self.counter = 0
        self.inputs: set[str] = set()
        self.slots: dict[str, int] = {}
        self.counters: set[str] = set()
        self.tolerance: dict = {}
        self.functions: list[DeviceFunction] = []
        self.arrays: list[tuple[str, str, int, str]] = []  # (name, dtype, size, 'local'|'shared')
        self.scope = Scope()
        self.in_function = False
        self.block = 32
        self.in_index = 0
        self.max_depth = 3
        self.stream = False  # inputs read at the thread's own index too (size "stream")
        self.const_only = False  # leaves are constants only (an expression to fold)
        self.constants: dict[str, list] = {}  # z_<t> inputs: constants loaded at run time

    # --- names and helpers ------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def const(self, t: str, small: bool = False) -> Expr:
        r = self.r
        if is_int(t):
            lo, hi = int_range(t)
            v = r.choice([r.randint(-9, 9), r.randint(-300, 300)] if small or r.random() < 0.7
                         else [lo, hi, lo + 1, hi - 1, r.randint(lo, hi)])
            v = min(max(v, lo), hi)
        elif not small and r.random() < (0.35 if self.const_only else 0.06):
            v = r.choice(SPECIAL_FLOATS)
        else:
            v = r.choice([r.uniform(-10, 10), r.randint(-20, 20), r.choice([0.5, -1.5, 2.5])]
                         if small or r.random() < 0.8 else [1e4, -65504.0, 3e-5, 1e30, 1e-30])
            if t == "float16" and abs(v) > 65504:
                v = 65504.0
        return Expr("const", t, ("np" if r.random() < 0.3 else "kj",), attr=v)

    def weak(self, partner: str) -> Expr:
        """A Python literal meeting ``partner`` (it fits an integer partner, NumPy 2 rule)."""
        r = self.r
        weak_vars = sorted(self.scope.weak_names() & set(self.scope.all()))
        if weak_vars and r.random() < 0.3:  # a counter: a small non-negative Python int
            return Expr("var", "int64", attr=r.choice(weak_vars), weak=True)
        if is_int(partner) or r.random() < 0.5:
            lo, hi = int_range(partner) if is_int(partner) else (-1000, 1000)
            v = r.choice([r.randint(0, 9), r.randint(-9, 9), r.randint(-200, 200), 3, 7, 31])
            return Expr("const", "int64", attr=min(max(v, lo), hi), weak=True)
        v = r.choice([0.5, 1.5, -2.25, 3.0, 1e-3, round(r.uniform(-100, 100), 3), 0.1])
        return Expr("const", "float64", attr=v, weak=True)

    def index(self, size: int) -> Expr:
        """An index into ``size`` elements: non-negative, or counting from the end."""
        self.in_index += 1
        e = self.expr(self.r.choice(INTS), 1)
        self.in_index -= 1
        i = Expr("bin", e.type, (e, Expr("const", "int64", attr=size, weak=True)), attr="%")
        if self.chance(0.25):  # -1 - i: a negative index, Python's meaning
            i = Expr("bin", i.type, (Expr("const", "int64", attr=-1, weak=True), i), attr="-")
            if not i.type.startswith("int"):  # unsigned: stay non-negative
                i = i.args[1]
        return i

    def vars_of(self, t: str) -> list[str]:
        """Variables of type ``t`` holding typed values (not the weak ones: counters of
        ``range`` over literals and ``w = 0; w += 1`` counters, which act as Python ints)."""
        weak = self.scope.weak_names()
        return [n for n, vt in self.scope.all().items() if vt == t and n not in weak]

    # --- expressions -----------------------------------------------------------------------------

    def expr(self, t: str, depth: int) -> Expr:
        depth = min(depth, self.max_depth)
        if depth <= 0 or self.chance(0.25):
            return self.leaf(t)
        forms = ["arith", "arith", "unary", "cast", "minmax", "ifexp", "leaf", "convert"]
        if is_int(t):
            forms += ["bitwise", "bitwise"]
            if t == "int64":
                forms.append("toint")
        else:
            forms += ["math", "math"]
            if t == "float64":
                forms.append("truediv")
        forms.append("call")
        form = self.r.choice(forms)
        return getattr(self, f"form_{form}")(t, depth - 1)

    def leaf(self, t: str) -> Expr:
        r = self.r
        if self.const_only:
            return self.const(t)
        options = []
        names = self.vars_of(t)
        if names:
            options += ["var"] * 3
        if not self.in_function:
            options.append("scalar")
            # loads in indices of loads, but not many levels deep
            if self.in_index == 0 or (self.in_index == 1 and r.random() < 0.3):
                options += ["input", "input"]
                if any(a[1] == t for a in self.arrays):
                    options.append("array")
        items = [(n, i) for n, vt in self.scope.all().items()
                 if isinstance(vt, tuple) for i, et in enumerate(vt[1:]) if et == t]
        if items:
            options.append("item")
        options.append("const")
        kind = r.choice(options)
        if kind == "item":
            n, i = r.choice(items)
            return Expr("item", t, (Expr("var", "tuple", attr=n),), attr=i)
        if kind == "var":
            return Expr("var", t, attr=r.choice(names))
        if kind == "input":
            self.inputs.add(t)
            if self.stream and r.random() < 0.6:
                return Expr("load", t, (Expr("var", "int64", attr="tid"),), attr=f"a_{t}")
            return Expr("load", t, (self.index(N_INPUT),), attr=f"a_{t}")
        if kind == "scalar":
            self.inputs.add(t)
            return Expr("var", t, attr=f"s_{t}")
        if kind == "array":
            name, _, size, _ = r.choice([a for a in self.arrays if a[1] == t])
            return Expr("load", t, (self.index(size),), attr=name)
        return self.const(t)

    def operands(self, t: str, depth: int, ints_only: bool = False) -> tuple[Expr, Expr]:
        r = self.r
        if r.random() < 0.35:
            a, b = self.expr(t, depth), self.weak(t)
            return (a, b) if r.random() < 0.6 else (b, a)
        pairs = [p for p in PAIRS[t] if not ints_only or (is_int(p[0]) and is_int(p[1]))]
        ta, tb = r.choice(pairs)
        return self.expr(ta, depth), self.expr(tb, depth)

    def form_arith(self, t: str, depth: int) -> Expr:
        op = self.r.choice(ARITH + ("**",))
        if op == "**":
            base = self.expr(t, depth)
            if is_int(t):
                exp = (Expr("const", "int64", attr=self.r.randint(0, 5), weak=True)
                       if self.chance(0.6) else
                       Expr("bin", t, (self.expr(t, 0), Expr("const", "int64", attr=3, weak=True)),
                            attr="&"))
            else:  # the exponents the lowering computes exactly (x * x, x, sqrt: folded
                # constants too); other float powers are inexact (form_math)
                value = self.r.choice([2, 2.0, 0.5, 1.0])
                exp = Expr("const", "int64" if value == 2 else "float64", attr=value,
                           weak=True)
            return Expr("bin", t, (base, exp), attr="**")
        a, b = self.operands(t, depth)
        return Expr("bin", t, (a, b), attr=op)

    def form_truediv(self, t: str, depth: int) -> Expr:
        ta, tb = self.r.choice(INTS), self.r.choice(INTS)
        return Expr("bin", "float64", (self.expr(ta, depth), self.expr(tb, depth)), attr="/")

    def form_bitwise(self, t: str, depth: int) -> Expr:
        op = self.r.choice(BITWISE)
        a, b = self.operands(t, depth, ints_only=True)
        if op in ("<<", ">>") and self.chance(0.5):  # a literal amount, mostly in range
            if a.weak or a.type != t:
                a = self.expr(t, depth)
            b = Expr("const", "int64", attr=self.r.randint(0, 70), weak=True)
        return Expr("bin", t, (a, b), attr=op)

    def form_unary(self, t: str, depth: int) -> Expr:
        op = self.r.choice(["-", "+", "~"] if is_int(t) else ["-", "+"])
        return Expr("un", t, (self.expr(t, depth),), attr=op)

    def form_cast(self, t: str, depth: int) -> Expr:
        src = self.r.choice(NUMERIC)
        inner = self.expr(src, depth)
        spelling = CAST_SPELLING[t] if self.chance(0.7) else f"np.{t}"
        if t == "int64" and src in ("int64",) + FLOATS and self.chance(0.3):
            spelling = "int"  # int() of another integer type keeps that type (numba's rule)
        if t == "float64" and self.chance(0.3):
            spelling = "float"
        return Expr("cast", t, (inner,), attr=spelling)

    def form_convert(self, t: str, depth: int) -> Expr:
        """``t`` through another scalar type: a narrow integer, bool, float16 or bfloat16
        (``kj.int32(kj.bfloat16(x))``), or a condition made a number (``kj.float32(a < b)``)."""
        r = self.r
        if self.chance(0.2):
            return Expr("cast", t, (self.cond(max(depth, 1)),), attr=CAST_SPELLING[t])
        mid = r.choice(PASS_THROUGH + ("float16", "float32", "int32", "uint64"))
        inner = self.expr(r.choice(NUMERIC), depth)
        spelling = PASS_SPELLING.get(mid) or CAST_SPELLING[mid]
        return Expr("cast", t, (Expr("cast", mid, (inner,), attr=spelling),),
                    attr=CAST_SPELLING[t])

    def folded_twin(self, e: Expr) -> Expr:
        """``e`` with each typed constant loaded from ``z_<type>`` at run time instead (the
        input holds the same value), so the kernel computes what the compiler folded in
        ``e``; Python literals stay (they are weak: a load would type them)."""
        if e.kind == "const" and not e.weak:
            values = self.constants.setdefault(e.type, [])
            values.append(e.attr)
            index = Expr("const", "int64", attr=len(values) - 1, weak=True)
            return Expr("load", e.type, (index,), attr=f"z_{e.type}")
        if not e.children():
            return e
        args = tuple(self.folded_twin(a) if isinstance(a, Expr) else a for a in e.args)
        return Expr(e.kind, e.type, args, e.attr, e.weak, e.exact)

    def form_toint(self, t: str, depth: int) -> Expr:
        fn = self.r.choice(["math.floor", "math.ceil", "math.trunc", "round"])
        return Expr("call", "int64", (self.expr(self.r.choice(FLOATS), depth),), attr=fn)

    def form_minmax(self, t: str, depth: int) -> Expr:
        fn = self.r.choice(["min", "max", "abs"])
        if fn == "abs":
            return Expr("call", t, (self.expr(t, depth),), attr="abs")
        args = [self.expr(t, depth), self.expr(t, depth) if self.chance(0.7) else self.weak(t)]
        if self.chance(0.2):
            args.append(self.expr(t, depth))
        return Expr("call", t, tuple(args), attr=fn)

    def form_ifexp(self, t: str, depth: int) -> Expr:
        return Expr("ifexp", t, (self.cond(depth), self.expr(t, depth), self.expr(t, depth)))

    def form_math(self, t: str, depth: int) -> Expr:
        name = self.r.choice(EXACT_MATH + ("fma", "np.floor"))
        if name == "fma":
            return Expr("call", t, tuple(self.expr(t, depth) for _ in range(3)), attr="kj.fma")
        if name == "copysign":
            # the sign of a NaN is unspecified (a GPU's NaN is positive, an x86 one negative):
            # a NaN sign source is replaced by 1.0
            sign = self.expr(t, depth)
            sign = Expr("ifexp", t, (Expr("cmp", "bool", (sign, sign), attr="=="), sign,
                                     Expr("const", t, ("np",), attr=1.0)))
            return Expr("call", t, (self.expr(t, depth), sign), attr="math.copysign")
        if name == "fmod":
            return Expr("call", t, (self.expr(t, depth), self.expr(t, depth)), attr=f"math.{name}")
        if name in ("floor", "ceil", "trunc", "np.floor", "rint"):
            fn = "np.floor" if name == "rint" else name if name.startswith("np.") else f"np.{name}"
            return Expr("call", t, (self.expr(t, depth),), attr=fn)
        return Expr("call", t, (self.expr(t, depth),), attr=f"math.{name}")

    def form_call(self, t: str, depth: int) -> Expr:
        fns = [f for f in self.functions if len(f.returns) == 1 and f.returns[0].type == t]
        if not fns:
            return self.leaf(t)
        f = self.r.choice(fns)
        args = tuple(self.expr(pt, depth) for _, pt in f.params)
        return Expr("call", t, args, attr=f.name)

    def form_leaf(self, t: str, depth: int) -> Expr:
        return self.leaf(t)

    def inexact(self, t: str, depth: int) -> Expr:
        """A math function whose last bits may differ between libraries."""
        name = self.r.choice(INEXACT_MATH + ("**",))
        if name == "**":
            a, b = self.expr(t, depth), self.expr(t, depth)
            return Expr("bin", t, (a, b), attr="**", exact=False)
        nargs = 2 if name in ("atan2", "pow", "hypot") else 1
        args = tuple(self.expr(t, depth) for _ in range(nargs))
        spelling = f"math.{name}"
        return Expr("call", t, args, attr=spelling, exact=False)

    # --- conditions ------------------------------------------------------------------------------

    def cond(self, depth: int) -> Expr:
        r = self.r
        form = r.choice(["cmp", "cmp", "cmp", "chain", "bool", "not", "pred", "boolvar"]
                        if depth > 0 else ["cmp", "pred", "boolvar"])
        if form == "boolvar":
            names = self.vars_of("bool")
            if names:
                return Expr("var", "bool", attr=r.choice(names))
            form = "cmp"
        if form == "cmp":
            ta = r.choice(NUMERIC)
            a = self.expr(ta, depth - 1)
            b = self.weak(ta) if r.random() < 0.4 else self.expr(r.choice(NUMERIC), depth - 1)
            return Expr("cmp", "bool", (a, b), attr=r.choice(CMP))
        if form == "chain":
            return self.chain(depth - 1)
        if form == "bool":
            return Expr("bool", "bool", (self.cond(depth - 1), self.cond(depth - 1)),
                        attr=r.choice(["and", "or"]))
        if form == "not":
            return Expr("not", "bool", (self.cond(depth - 1),))
        fn = r.choice(["isnan", "isinf", "isfinite"])
        return Expr("call", "bool", (self.expr(r.choice(FLOATS), depth - 1),), attr=f"math.{fn}")

    def chain(self, depth: int, operand=None) -> Expr:
        """``a < b <= c ...`` of 2 to 5 operators over operands of one type or of several
        (loads, calls, Python literals; ``operand(t)`` makes some, e.g. with side effects):
        each operand is evaluated once, and a false comparison skips the rest."""
        r = self.r
        n = r.choice([2, 2, 3, 3, 4, 5])
        one_type = r.choice(NUMERIC) if self.chance(0.5) else None
        types = [one_type or r.choice(NUMERIC) for _ in range(n + 1)]
        operands = []
        for k, t in enumerate(types):
            if operand is not None and self.chance(0.4):
                operands.append(operand(t))
            elif 0 < k < n and self.chance(0.12):  # a literal that fits either neighbour
                operands.append(Expr("const", "int64", attr=r.randint(0, 9), weak=True))
            elif k in (0, n) and self.chance(0.15):
                operands.append(self.weak(types[1] if k == 0 else types[n - 1]))
            else:
                operands.append(self.expr(t, depth))
        return Expr("chain", "bool", tuple(operands), attr=tuple(r.choice(CMP) for _ in range(n)))
