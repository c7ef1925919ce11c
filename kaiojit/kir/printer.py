"""The text form of the kernel IR: ``str(expr)`` and ``str(kfunction)``.

It reads like the Python it came from, with types on constants, casts and declarations; it is
what ``inspect_kir()`` shows, what ``KAIOJIT_DUMP=kir`` writes and what tests compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the nodes call this module to print themselves: it names them only here
    from .nodes import Expr, KFunction, Stmt


def expr_text(e: Expr) -> str:
    """One expression, operands parenthesized as the source would need them."""
    op = e.op
    if op == "const":
        return repr(e.attr) if e.weak else f"{e.type}({e.attr!r})"
    if op in ("var", "param"):
        return str(e.attr)
    if op in ("binop", "cmp"):
        return f"({expr_text(e.args[0])} {e.attr} {expr_text(e.args[1])})"
    if op in ("and", "or"):
        return f"({expr_text(e.args[0])} {op} {expr_text(e.args[1])})"
    if op == "unop":
        return f"({e.attr}{expr_text(e.args[0])})"
    if op == "not":
        return f"(not {expr_text(e.args[0])})"
    if op == "select":
        c, a, b = e.args
        return f"({expr_text(a)} if {expr_text(c)} else {expr_text(b)})"
    if op == "cast":
        return f"{e.type}({expr_text(e.args[0])})"
    if op == "load":
        return f"{expr_text(e.args[0])}[{_joined(e.args[1:])}]"
    if op == "shape":
        return f"{expr_text(e.args[0])}.shape[{e.attr}]"
    if op == "tuple":
        return "(" + _joined(e.args) + ("," if len(e.args) == 1 else "") + ")"
    if op == "getitem":
        return f"{expr_text(e.args[0])}[{e.attr}]"
    if op == "intrinsic":
        param = "" if e.param is None else f":{e.param}"
        return f"{e.attr}{param}({_joined(e.args)})"
    if op == "call":
        return f"{e.attr.name}({_joined(e.args)})"
    if op == "shared":
        shape, dtype = e.attr[:2]
        align = f", alignment={e.attr[3]}" if len(e.attr) > 3 else ""
        return f"shared.array({shape}, {dtype}{align})"
    if op == "local":
        shape, dtype = e.attr
        return f"local.array({shape}, {dtype})"
    if op == "constarray":
        return f"const.array_like({e.attr[1]})"
    if op == "globalarray":
        return f"global_array(0x{e.attr[0]:x}, {e.attr[1]})"
    if op == "reuse":
        return expr_text(e.args[0])
    return f"<{op}>"


def _joined(args) -> str:
    return ", ".join(expr_text(a) for a in args)


def function_text(f: KFunction, alone: bool = False) -> str:
    """A function's header, its locals with their types, its body, then (unless ``alone``)
    the functions it calls."""
    kind = "kernel" if f.is_kernel else "device"
    params = ", ".join(f"{n}: {t}" for n, t in f.params)
    lines = [f"{kind} {f.qualname}({params}) -> {f.return_type}:"]
    for name, t in f.locals.items():
        lines.append(f"    local {name}: {t}")
    block_lines(f.body, 1, lines)
    text = "\n".join(lines)
    if not alone:  # then every function it calls, each once (a recursive one calls itself)
        for callee in _callees_once(f):
            text += "\n\n" + function_text(callee, alone=True)
    return text


def _callees_once(f: KFunction) -> list[KFunction]:
    """The functions ``f`` calls, directly or not, each once, depth first in call order."""
    seen, order, todo = {id(f)}, [], list(reversed(f.callees))
    while todo:
        g = todo.pop()
        if id(g) not in seen:
            seen.add(id(g))
            order.append(g)
            todo.extend(reversed(g.callees))
    return order


def block_lines(body: list[Stmt], depth: int, lines: list[str]) -> None:
    """Append the lines of a block of statements, indented ``depth`` levels."""
    pad = "    " * depth
    if not body:
        lines.append(pad + "pass")
    for s in body:
        kind = type(s).__name__
        if kind == "Assign":
            lines.append(f"{pad}{s.target} = {expr_text(s.value)}")
        elif kind == "Store":
            lines.append(f"{pad}{expr_text(s.array)}[{_joined(s.indices)}] = "
                         f"{expr_text(s.value)}")
        elif kind == "If":
            lines.append(f"{pad}if {expr_text(s.cond)}:")
            block_lines(s.body, depth + 1, lines)
            if s.orelse:
                lines.append(f"{pad}else:")
                block_lines(s.orelse, depth + 1, lines)
        elif kind == "While":
            lines.append(f"{pad}while {expr_text(s.cond)}:")
            block_lines(s.body, depth + 1, lines)
        elif kind == "ForRange":
            lines.append(f"{pad}for {s.var} in range({expr_text(s.start)}, "
                         f"{expr_text(s.stop)}, {expr_text(s.step)}):"
                         + ("  # unrolled" if s.unrolled else ""))
            block_lines(s.body, depth + 1, lines)
        elif kind == "Break":
            lines.append(f"{pad}break")
        elif kind == "Continue":
            lines.append(f"{pad}continue")
        elif kind == "Return":
            lines.append(f"{pad}return" + (f" {expr_text(s.value)}" if s.value is not None
                                           else ""))
        elif kind == "ExprStmt":
            lines.append(f"{pad}{expr_text(s.expr)}")
