"""The source of a decorated function, parsed, with positions mapped back to the user's file."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import CompileError, SourceLocation


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
    try:
        src_lines, first = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError):
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
