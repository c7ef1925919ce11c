"""The typed kernel IR: what the frontend produces and every target lowers.

Expressions are small slotted nodes (an op name, a type, operands, one attribute, a source
location); statements keep Python's structured control flow. ``str(func)`` prints the IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SourceLocation
from ..types import Signature, Type

# Expression ops, and what `attr` holds for each:
#   const      attr = the Python value
#   var        attr = variable name
#   param      attr = parameter name (a kernel/device-function argument, read-only binding)
#   binop      attr = operator ('+', '-', '*', '/', '//', '%', '**', '<<', '>>', '&', '|', '^')
#   unop       attr = '-', '+', '~'
#   not        logical not of a bool
#   cmp        attr = '<', '<=', '>', '>=', '==', '!='
#   and / or   short-circuit, both operands bool
#   select     args = (cond, then, else)
#   cast       convert args[0] to self.type
#   load       args = (array, *indices)
#   shape      args = (array,), attr = dimension
#   tuple      args = elements
#   getitem    args = (tuple,), attr = constant index
#   intrinsic  attr = intrinsic name ('sreg.tid.x', 'math.sqrt', 'atomic.add', ...)
#   call       attr = the callee KFunction (a device function)
#   shared     attr = (shape, dtype, name): a static shared array (shape () = dynamic)
#   local      attr = (shape, dtype): a per-thread local array
#   constarray attr = (ndarray, name): a constant-memory array
#   reuse      args = (value,): one node used in two places, evaluated once (the middle operand
#              of a chained comparison that has side effects); its first use dominates the rest
EXPR_OPS = frozenset(
    "const var param binop unop not cmp and or select cast load shape tuple getitem intrinsic "
    "call shared local constarray reuse".split()
)


@dataclass(slots=True, eq=False)
class Expr:
    op: str
    type: Type
    args: tuple[Expr, ...] = ()
    attr: object = None
    loc: SourceLocation | None = None
    weak: bool = False  # a Python literal's type (NEP 50): yields to a typed operand

    def __str__(self) -> str:
        if self.op == "const":
            return repr(self.attr) if self.weak else f"{self.type}({self.attr!r})"
        if self.op in ("var", "param"):
            return str(self.attr)
        if self.op == "binop":
            return f"({self.args[0]} {self.attr} {self.args[1]})"
        if self.op == "cmp":
            return f"({self.args[0]} {self.attr} {self.args[1]})"
        if self.op in ("and", "or"):
            return f"({self.args[0]} {self.op} {self.args[1]})"
        if self.op == "unop":
            return f"({self.attr}{self.args[0]})"
        if self.op == "not":
            return f"(not {self.args[0]})"
        if self.op == "select":
            c, a, b = self.args
            return f"({a} if {c} else {b})"
        if self.op == "cast":
            return f"{self.type}({self.args[0]})"
        if self.op == "load":
            idx = ", ".join(str(i) for i in self.args[1:])
            return f"{self.args[0]}[{idx}]"
        if self.op == "shape":
            return f"{self.args[0]}.shape[{self.attr}]"
        if self.op == "tuple":
            return "(" + ", ".join(str(a) for a in self.args) + ("," if len(self.args) == 1 else "") + ")"
        if self.op == "getitem":
            return f"{self.args[0]}[{self.attr}]"
        if self.op == "intrinsic":
            return f"{self.attr}({', '.join(str(a) for a in self.args)})"
        if self.op == "call":
            return f"{self.attr.name}({', '.join(str(a) for a in self.args)})"
        if self.op == "shared":
            shape, dtype, name = self.attr
            return f"shared.array({shape}, {dtype})"
        if self.op == "local":
            shape, dtype = self.attr
            return f"local.array({shape}, {dtype})"
        if self.op == "constarray":
            return f"const.array_like({self.attr[1]})"
        if self.op == "reuse":
            return str(self.args[0])
        return f"<{self.op}>"


# --- statements ----------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Assign:
    target: str
    value: Expr
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class Store:
    array: Expr
    indices: tuple[Expr, ...]
    value: Expr
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class If:
    cond: Expr
    body: list
    orelse: list
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class While:
    cond: Expr
    body: list
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class ForRange:
    """``for var in range(start, stop, step)``; ``step`` is never zero at run time (checked)."""

    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: list
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class Break:
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class Continue:
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class Return:
    value: Expr | None
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class ExprStmt:
    expr: Expr
    loc: SourceLocation | None = None


Stmt = Assign | Store | If | While | ForRange | Break | Continue | Return | ExprStmt


@dataclass(slots=True, eq=False)
class KFunction:
    """One typed function: a kernel or a device function specialized to argument types."""

    name: str
    qualname: str
    params: tuple[tuple[str, Type], ...]
    return_type: Type
    locals: dict[str, Type]
    body: list
    is_kernel: bool
    loc: SourceLocation | None = None
    callees: list[KFunction] = field(default_factory=list)
    uses_sync: bool = False  # barriers or warp operations anywhere (the cpu backend needs to know)
    mangled: str = ""

    @property
    def signature(self) -> Signature:
        return Signature(tuple(t for _, t in self.params), self.return_type)

    def __str__(self) -> str:
        kind = "kernel" if self.is_kernel else "device"
        params = ", ".join(f"{n}: {t}" for n, t in self.params)
        lines = [f"{kind} {self.qualname}({params}) -> {self.return_type}:"]
        for name, t in self.locals.items():
            lines.append(f"    local {name}: {t}")
        _print_block(self.body, 1, lines)
        text = "\n".join(lines)
        for callee in self.callees:
            text += "\n\n" + str(callee)
        return text


def _print_block(body: list, depth: int, lines: list[str]) -> None:
    pad = "    " * depth
    if not body:
        lines.append(pad + "pass")
    for s in body:
        if isinstance(s, Assign):
            lines.append(f"{pad}{s.target} = {s.value}")
        elif isinstance(s, Store):
            idx = ", ".join(str(i) for i in s.indices)
            lines.append(f"{pad}{s.array}[{idx}] = {s.value}")
        elif isinstance(s, If):
            lines.append(f"{pad}if {s.cond}:")
            _print_block(s.body, depth + 1, lines)
            if s.orelse:
                lines.append(f"{pad}else:")
                _print_block(s.orelse, depth + 1, lines)
        elif isinstance(s, While):
            lines.append(f"{pad}while {s.cond}:")
            _print_block(s.body, depth + 1, lines)
        elif isinstance(s, ForRange):
            lines.append(f"{pad}for {s.var} in range({s.start}, {s.stop}, {s.step}):")
            _print_block(s.body, depth + 1, lines)
        elif isinstance(s, Break):
            lines.append(f"{pad}break")
        elif isinstance(s, Continue):
            lines.append(f"{pad}continue")
        elif isinstance(s, Return):
            lines.append(f"{pad}return" + (f" {s.value}" if s.value is not None else ""))
        elif isinstance(s, ExprStmt):
            lines.append(f"{pad}{s.expr}")


def walk_stmts(body: list):
    """Every statement in a block, nested ones included, in order."""
    for s in body:
        yield s
        if isinstance(s, If):
            yield from walk_stmts(s.body)
            yield from walk_stmts(s.orelse)
        elif isinstance(s, (While, ForRange)):
            yield from walk_stmts(s.body)


def stmt_exprs(s) -> tuple[Expr, ...]:
    """The expressions a statement evaluates directly (not those of nested statements)."""
    if isinstance(s, Assign):
        return (s.value,)
    if isinstance(s, Store):
        return (s.array, *s.indices, s.value)
    if isinstance(s, (If, While)):
        return (s.cond,)
    if isinstance(s, ForRange):
        return (s.start, s.stop, s.step)
    if isinstance(s, Return):
        return (s.value,) if s.value is not None else ()
    if isinstance(s, ExprStmt):
        return (s.expr,)
    return ()


def walk_expr(e: Expr):
    """An expression and all its operands, depth first."""
    yield e
    for a in e.args:
        yield from walk_expr(a)
