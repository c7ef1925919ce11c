"""A generated kernel as a small tree: typed expressions and statements that print as kaiojit
Python source (``render``) and that the reference (``reference.py``) executes.

The kernel's parameters are fixed by the dtypes it uses: an output array ``o_<t>`` of
``(threads, slots)`` per dtype written, inputs ``a_<t>`` (``N_INPUT`` elements), scalars
``s_<t>`` and atomic counters ``c_<t>``. Every thread writes its own output row only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

N_INPUT = 64  # elements of every input array
N_COUNTERS = 4  # elements of every atomic counter array
FULL_MASK = 0xFFFFFFFF


@dataclass(eq=False)
class Expr:
    """``kind`` says what it is; ``type`` is a dtype name (``bool`` for conditions);
    ``weak`` marks a Python literal (NEP 50); ``exact`` is False for values from math functions
    whose last bits the platforms' libraries may round differently."""

    kind: str
    type: str
    args: tuple = ()
    attr: Any = None
    weak: bool = False
    exact: bool = True

    def children(self) -> tuple:
        return tuple(a for a in self.args if isinstance(a, Expr))


@dataclass(eq=False)
class Stmt:
    kind: str
    attr: Any = None
    exprs: tuple = ()  # the expressions it evaluates
    body: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@dataclass(eq=False)
class DeviceFunction:
    name: str
    params: list  # [(name, type)]
    body: list  # statements (no collectives)
    returns: tuple  # expressions: one, or several for a tuple


@dataclass(eq=False)
class Program:
    seed: int
    grid: int
    block: int
    kernel: list  # statements
    functions: list  # DeviceFunction
    slots: dict  # dtype -> output slots written (also which dtypes have an output array)
    inputs: tuple  # dtypes with an input array and a scalar
    counters: tuple  # dtypes with an atomic counter array
    tolerance: dict = field(default_factory=dict)  # (dtype, slot) -> ulps allowed
    # dtype -> the values of an input ``z_<dtype>``: the constants of a constant expression,
    # which its twin loads at run time (the folded and the computed value must agree)
    constants: dict = field(default_factory=dict)
    name: str = "kern"
    # size "elementwise": the kernel reads no thread index but ``tid`` (no ``tx``, ``lane``),
    # so it has a coarse entry (kaiojit/kir/coarsen.py), checked against its own entry
    elementwise: bool = False

    @property
    def threads(self) -> int:
        return self.grid * self.block

    def params(self) -> list[str]:
        return ([f"o_{t}" for t in sorted(self.slots)] + [f"c_{t}" for t in self.counters]
                + [f"a_{t}" for t in self.inputs] + [f"s_{t}" for t in self.inputs]
                + [f"z_{t}" for t in sorted(self.constants)])

    def copy(self) -> Program:
        return deep_copy(self)


def deep_copy(node):
    if isinstance(node, (Expr, Stmt, DeviceFunction, Program)):
        return dataclasses.replace(node, **{f.name: deep_copy(getattr(node, f.name))
                                            for f in dataclasses.fields(node)})
    if isinstance(node, list):
        return [deep_copy(x) for x in node]
    if isinstance(node, tuple):
        return tuple(deep_copy(x) for x in node)
    if isinstance(node, dict):
        return {k: deep_copy(v) for k, v in node.items()}
    return node


# --- printing ------------------------------------------------------------------------------------

CAST_SPELLING = {"int32": "kj.int32", "int64": "kj.int64", "uint32": "kj.uint32",
                 "uint64": "kj.uint64", "float16": "kj.float16", "float32": "kj.float32",
                 "float64": "kj.float64"}
PASS_SPELLING = {"int8": "kj.int8", "int16": "kj.int16", "uint8": "kj.uint8",
                 "uint16": "kj.uint16", "bool": "kj.bool_", "bfloat16": "kj.bfloat16"}
NP_SPELLING = {t: f"np.{t}" for t in CAST_SPELLING}


def literal(value, t: str) -> str:
    if t == "bool":
        return "True" if value else "False"
    if t.startswith(("int", "uint")):
        return str(int(value))
    v = float(value)
    if v != v:
        return "math.nan"
    if v in (float("inf"), float("-inf")):
        return "math.inf" if v > 0 else "-math.inf"
    return repr(v)


def expr_source(e: Expr) -> str:
    k = e.kind
    a = e.args
    if k == "var":
        return e.attr
    if k == "const":
        if e.weak:
            text = literal(e.attr, e.type)
            return f"({text})" if text.startswith("-") else text
        spelling = NP_SPELLING[e.type] if a and a[0] == "np" else CAST_SPELLING[e.type]
        return f"{spelling}({literal(e.attr, e.type)})"
    if k == "load":  # attr: array name; args: index expressions
        return f"{e.attr}[{', '.join(expr_source(i) for i in a)}]"
    if k == "bin":
        return f"({expr_source(a[0])} {e.attr} {expr_source(a[1])})"
    if k == "cmp":
        return f"({expr_source(a[0])} {e.attr} {expr_source(a[1])})"
    if k == "chain":  # a < b <= c
        ops = e.attr
        text = expr_source(a[0])
        for op, x in zip(ops, a[1:]):
            text += f" {op} {expr_source(x)}"
        return f"({text})"
    if k == "bool":  # and / or
        return "(" + f" {e.attr} ".join(expr_source(x) for x in a) + ")"
    if k == "not":
        return f"(not {expr_source(a[0])})"
    if k == "un":
        return f"({e.attr}{expr_source(a[0])})"
    if k == "cast":  # attr: spelling
        return f"{e.attr}({expr_source(a[0])})"
    if k == "call":  # attr: function spelling
        return f"{e.attr}({', '.join(expr_source(x) for x in a)})"
    if k == "effect":  # attr: (array, slot): an atomic add on the thread's own element
        return f"kj.atomic.add({e.attr[0]}, (tid, {e.attr[1]}), {expr_source(a[0])})"
    if k == "ifexp":
        return f"({expr_source(a[1])} if {expr_source(a[0])} else {expr_source(a[2])})"
    if k == "item":  # attr: index into a tuple variable args[0]
        return f"{expr_source(a[0])}[{e.attr}]"
    if k == "tuple":
        return "(" + ", ".join(expr_source(x) for x in a) + ("," if len(a) == 1 else "") + ")"
    raise AssertionError(k)


def block_source(stmts: list, indent: int, out: list[str]) -> None:
    pad = "    " * indent
    if not stmts:
        out.append(pad + "pass")
    for s in stmts:
        stmt_source(s, indent, out)


def stmt_source(s: Stmt, indent: int, out: list[str]) -> None:
    pad = "    " * indent
    k = s.kind
    x = [expr_source(e) for e in s.exprs]
    if k == "assign":  # attr: target text (a name, "a, b", "loc[...]" is 'lstore')
        out.append(f"{pad}{s.attr} = {x[0]}")
    elif k == "augassign":  # attr: (name, op)
        out.append(f"{pad}{s.attr[0]} {s.attr[1]}= {x[0]}")
    elif k == "store":  # attr: (array, slot) ; o_t[tid, slot] = value
        out.append(f"{pad}{s.attr[0]}[tid, {s.attr[1]}] = {x[0]}")
    elif k == "augstore":  # attr: (array, slot, op) ; o_t[tid, slot] op= value
        out.append(f"{pad}{s.attr[0]}[tid, {s.attr[1]}] {s.attr[2]}= {x[0]}")
    elif k == "setitem":  # attr: array name; exprs: index, value
        out.append(f"{pad}{s.attr}[{x[0]}] = {x[1]}")
    elif k == "local":  # attr: (name, n, dtype)
        out.append(f"{pad}{s.attr[0]} = kj.local.array({s.attr[1]}, {CAST_SPELLING[s.attr[2]]})")
    elif k == "shared":
        out.append(f"{pad}{s.attr[0]} = kj.shared.array({s.attr[1]}, {CAST_SPELLING[s.attr[2]]})")
    elif k == "if":
        out.append(f"{pad}if {x[0]}:")
        block_source(s.body, indent + 1, out)
        orelse = s.orelse
        while len(orelse) == 1 and orelse[0].kind == "if" and orelse[0].attr == "elif":
            out.append(f"{pad}elif {expr_source(orelse[0].exprs[0])}:")
            block_source(orelse[0].body, indent + 1, out)
            orelse = orelse[0].orelse
        if orelse:
            out.append(f"{pad}else:")
            block_source(orelse, indent + 1, out)
    elif k == "for":  # attr: loop variable; exprs: range arguments
        out.append(f"{pad}for {s.attr} in range({', '.join(x)}):")
        block_source(s.body, indent + 1, out)
    elif k == "while":  # attr: counter; exprs: (limit,) ; the counter steps first in the body
        out.append(f"{pad}{s.attr} = 0")
        out.append(f"{pad}while {s.attr} < {x[0]}:")
        out.append(f"{pad}    {s.attr} += 1")
        block_source(s.body, indent + 1, out)
    elif k in ("break", "continue"):
        out.append(f"{pad}{k}")
    elif k == "expr":  # a call for its effect
        out.append(f"{pad}{x[0]}")
    elif k == "sync":
        out.append(f"{pad}kj.syncthreads()")
    elif k == "syncwarp":
        out.append(f"{pad}kj.syncwarp({s.attr:#x})")
    elif k == "collective":  # attr: (target, function spelling, mask); exprs: operands
        target, fn, mask = s.attr
        args = ([f"{mask:#x}"] if mask is not None else []) + x
        out.append(f"{pad}{target} = {fn}({', '.join(args)})")
    elif k == "atomic":  # attr: (target or None, op, array, ("row", slot) or ("flat",))
        target, op, array, where = s.attr
        if where[0] == "row":
            index, values = f"(tid, {where[1]})", x
        else:
            index, values = x[0], x[1:]
        call = f"kj.atomic.{op}({array}, {index}, {', '.join(values)})"
        out.append(f"{pad}{target} = {call}" if target else f"{pad}{call}")
    elif k == "return":
        out.append(f"{pad}return {', '.join(x)}")
    else:
        raise AssertionError(k)


def render(p: Program) -> str:
    """The program as a Python module defining its device functions and ``kern``."""
    out = ["import math", "", "import numpy as np", "", "import kaiojit as kj", ""]
    for f in p.functions:
        out += ["", "@kj.jit(device=True)",
                f"def {f.name}({', '.join(n for n, _ in f.params)}):"]
        block_source(f.body, 1, out)
        rets = ", ".join(expr_source(e) for e in f.returns)
        out.append(f"    return {rets}")
        out.append("")
    out += ["", "@kj.jit(contract=False)", f"def {p.name}({', '.join(p.params())}):"]
    out.append("    tid = kj.grid(1)")
    if not p.elementwise:
        out.append("    tx = kj.threadIdx.x")
        out.append("    lane = kj.laneid")
    block_source(p.kernel, 1, out)
    return "\n".join(out) + "\n"
