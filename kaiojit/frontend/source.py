"""The source of a decorated function, parsed, with positions mapped back to the user's file."""

from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import CompileError, SourceLocation
from ..execsource import exec_source


@dataclass(slots=True)
class FunctionSource:
    """A parsed function and the information needed to locate its nodes in the user's file."""

    node: ast.FunctionDef
    filename: str
    lines: list[str]  # the file's lines as linecache has them (1-based: lines[n - 1])
    indent: int  # columns removed by dedenting

    def loc(self, node: ast.AST) -> SourceLocation:
        line = getattr(node, "lineno", self.node.lineno)
        col = getattr(node, "col_offset", 0) + self.indent
        end_line = getattr(node, "end_lineno", line)
        end_col = getattr(node, "end_col_offset", None)
        if end_col is not None:
            end_col = end_col + self.indent if end_line == line else None
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return SourceLocation(self.filename, line, col, text, end_col)


_SOURCE_ATTR = "__kaiojit_source__"


def function_source(pyfunc) -> FunctionSource:
    """Parse ``pyfunc``'s source; works for modules and for notebook cells linecache knows.

    The parse is kept on the function itself, so it lives as long as the function: code
    objects compare equal across files (their filename is not compared), so a table keyed by
    them handed one function another's source and locations."""
    code = pyfunc.__code__
    cached = getattr(pyfunc, _SOURCE_ATTR, None)
    if cached is not None and cached[0] is code:
        return cached[1]
    filename = code.co_filename
    if pyfunc.__name__ == "<lambda>":
        result = _lambda_source(pyfunc)
        try:
            setattr(pyfunc, _SOURCE_ATTR, (code, result))
        except (AttributeError, TypeError):
            pass
        return result
    try:
        src_lines, first = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError):
        result = _exec_function_source(pyfunc)
        if result is not None:
            setattr(pyfunc, _SOURCE_ATTR, (code, result))
            return result
        raise CompileError(
            f"cannot compile {pyfunc.__qualname__!r}: its source code is not available "
            f"(defined in {filename!r}); kaiojit reads kernels from source files or notebook cells"
        ) from None
    source = "".join(src_lines)
    dedented = textwrap.dedent(source)
    first_src = src_lines[0]
    first_ded = dedented.splitlines(keepends=True)[0] if dedented else ""
    indent = len(first_src) - len(first_ded)
    tree = ast.parse(dedented)
    ast.increment_lineno(tree, first - 1)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise CompileError(f"{pyfunc.__qualname__!r} is not a plain function definition")
    all_lines = linecache.getlines(filename) or src_lines
    if not linecache.getlines(filename):
        all_lines = [""] * (first - 1) + src_lines
    result = FunctionSource(fdef, filename, all_lines, indent)
    try:
        setattr(pyfunc, _SOURCE_ATTR, (code, result))
    except (AttributeError, TypeError):
        pass
    return result


def _exec_function_source(pyfunc) -> FunctionSource | None:
    """The function's definition in the string ``exec()`` compiled it from (see
    ``execsource``): the ``def`` of its name on its first line, at any nesting."""
    code = pyfunc.__code__
    found = exec_source(code)
    if found is None:
        return None
    filename, text = found
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.FunctionDef) and node.name == code.co_name
                and _first_line(node) == code.co_firstlineno):
            return FunctionSource(node, filename, text.splitlines(keepends=True), 0)
    return None


def _first_line(fdef: ast.FunctionDef) -> int:
    """The line CPython gives a function's code object: its first decorator's, else its
    ``def``'s."""
    return fdef.decorator_list[0].lineno if fdef.decorator_list else fdef.lineno


def _lambda_source(pyfunc) -> FunctionSource:
    """A lambda's source, as the function ``def <lambda>(args): return body``: the lambda
    node of its file on its first line whose parameters and body position match its code's."""
    code = pyfunc.__code__
    lines = linecache.getlines(code.co_filename)
    if not lines and (exec_found := exec_source(code)) is not None:
        lines = exec_found[1].splitlines(keepends=True)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        tree = None
    if not lines or tree is None:
        raise CompileError(
            f"cannot compile a lambda defined in {code.co_filename!r}: its source code is not "
            "available; kaiojit reads kernels from source files or notebook cells")
    params = list(code.co_varnames[:code.co_argcount])
    body_at = next((p for p in code.co_positions() if p[0] is not None and p[2] is not None
                    and p[0] >= code.co_firstlineno), None)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
                and [a.arg for a in node.args.args] == params):
            found.append(node)
    if body_at is not None and len(found) > 1:
        found = [n for n in found if (n.body.lineno, n.body.col_offset) <= (body_at[0], body_at[2])
                 <= (n.body.end_lineno, n.body.end_col_offset)] or found
    if not found:
        raise CompileError(f"cannot find the source of the lambda on line {code.co_firstlineno} "
                           f"of {code.co_filename!r}")
    lam = found[0]
    ret = ast.copy_location(ast.Return(value=lam.body), lam.body)
    fdef = ast.FunctionDef(name="<lambda>", args=lam.args, body=[ret], decorator_list=[],
                           returns=None, type_params=[])
    ast.copy_location(fdef, lam)
    ast.fix_missing_locations(fdef)
    return FunctionSource(fdef, code.co_filename, lines, 0)


def generated_function(name: str, source: str, namespace: dict):
    """The function ``name`` that ``source`` (kaiojit's own generated Python) defines, with
    ``namespace`` as its globals; its text is registered with linecache under a name of its
    own, so the frontend reads it as it reads a file."""
    digest = hashlib.blake2s(source.encode(), digest_size=6).hexdigest()
    filename = f"<kaiojit generated {name} {digest}>"
    # an mtime of None keeps linecache.checkcache from dropping the entry (no file behind it)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    scope = dict(namespace)
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - kaiojit's generated source
    return scope[name]
