"""The nodes of the typed kernel IR: what the frontend produces and every target lowers.

Expressions are small slotted nodes (an op name, a type, operands, one attribute, a source
location); statements keep Python's structured control flow. ``str(node)`` prints the text
form (see ``printer.py``).
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
#   intrinsic  attr = the intrinsic's name ('sreg.tid.x', 'math.sqrt', 'atomic.add', ...), as
#              declared in the registry (kir/intrinsics.py); param = its static parameter, of
#              the class the declaration names (``Intrinsic.param``: an int, a frozen
#              dataclass), printed after a colon ('tc.ldmatrix:4t'). Some names still carry
#              the parameter as text after a colon ('array.slice:i,s101'), which is not part
#              of the registered name
#   call       attr = the callee KFunction (a device function)
#   shared     attr = (shape, dtype, name): a static shared array (shape () = dynamic)
#   local      attr = (shape, dtype): a per-thread local array
#   constarray attr = (ndarray, name): a constant-memory array
#   globalarray attr = (pointer, shape, strides in bytes, array): a device array the function
#              reads from its globals or closure (numba's capture), its address and extents
#              compiled in; the array object is held so the memory outlives the code
#   reuse      args = (value,): one node used in two places, evaluated once (the middle operand
#              of a chained comparison that has side effects); its first use dominates the rest
EXPR_OPS = frozenset(
    "const var param binop unop not cmp and or select cast load shape tuple getitem intrinsic "
    "call shared local constarray globalarray reuse".split()
)


@dataclass(slots=True, eq=False)
class Expr:
    op: str
    type: Type
    args: tuple[Expr, ...] = ()
    attr: object = None
    loc: SourceLocation | None = None
    weak: bool = False  # a Python literal's type (NEP 50): yields to a typed operand
    param: object = None  # an intrinsic's static parameter (see above)

    def __str__(self) -> str:
        from .printer import expr_text

        return expr_text(self)


def intrinsic_key(name: str) -> str:
    """The registered name of an intrinsic node's ``attr`` (without its static parameter)."""
    return name.partition(":")[0]


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
    body: list[Stmt]
    orelse: list[Stmt]
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class While:
    cond: Expr
    body: list[Stmt]
    loc: SourceLocation | None = None


@dataclass(slots=True, eq=False)
class ForRange:
    """``for var in range(start, stop, step)``; ``step`` is never zero at run time (checked).
    ``unrolled``: the loop must be unrolled fully (a loop over a tuple's items, whose body
    picks the item by index: unrolled, each pick folds to a constant)."""

    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: list[Stmt]
    loc: SourceLocation | None = None
    unrolled: bool = False


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
    """One typed function: a kernel or a device function specialized to argument types.

    ``callees`` are the device functions it calls directly (each typed once per signature)."""

    name: str
    qualname: str
    params: tuple[tuple[str, Type], ...]
    return_type: Type
    locals: dict[str, Type]
    body: list[Stmt]
    is_kernel: bool
    loc: SourceLocation | None = None
    callees: list[KFunction] = field(default_factory=list)
    mangled: str = ""
    deps: dict | None = None  # what typing read (frontend/deps.py); None: not recordable
    inline: str = ""  # a device function's CompileOptions.inline: "", "always" or "never"

    @property
    def signature(self) -> Signature:
        return Signature(tuple(t for _, t in self.params), self.return_type)

    def __str__(self) -> str:
        from .printer import function_text

        return function_text(self)
