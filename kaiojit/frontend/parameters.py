"""What a kernel's ``def`` may declare: plain positional parameters, each annotated (if at all)
with a kaiojit type (``kj.float32``, ``"float32[::1]"``), ``kj.constexpr`` or a Python type
(``int``; such an annotation is documentation). Checked when ``@kj.jit`` decorates the function,
so a mistake names the user's ``def`` or annotation rather than a frame of a later launch."""

from __future__ import annotations

import ast
import inspect

from .. import types as T
from ..errors import TypingError, UnsupportedError

_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def signature_problem(fdef: ast.FunctionDef) -> tuple[str, ast.AST] | None:
    """The first parameter kernels cannot take (``*args``, ``**kwargs``, keyword-only or
    positional-only), as (message, node), else None."""
    a = fdef.args
    for what, node in (("*args", a.vararg), ("**kwargs", a.kwarg)):
        if node is not None:
            return f"kernels cannot take {what}", node
    if a.kwonlyargs or a.posonlyargs:
        return "kernels take plain positional parameters only", fdef
    return None


def check_parameters(pyfunc) -> None:
    """Raise, located in the user's source, for a parameter list kernels cannot take or an
    annotation that is no type. Cheap when all is well (the code object's counts, and the
    annotations only where there are some)."""
    code = pyfunc.__code__
    odd = code.co_kwonlyargcount or code.co_posonlyargcount or \
        code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS)
    annotations = getattr(pyfunc, "__annotations__", None)
    bad = [n for n, a in (annotations or {}).items() if n != "return" and not _is_type(a, pyfunc)]
    if not odd and not bad:
        return
    from .source import function_source

    src = function_source(pyfunc)
    problem = signature_problem(src.node)
    if problem is not None:
        raise UnsupportedError(problem[0], src.loc(problem[1]))
    for arg in src.node.args.args:
        if arg.arg in bad:
            raise TypingError(
                f"parameter {arg.arg!r} is annotated with {ast.unparse(arg.annotation)}, "
                "which is not a type: "
                "annotate a kernel parameter with a kaiojit type (kj.float32, "
                "\"float32[::1]\"), kj.constexpr or a Python type, or not at all",
                src.loc(arg.annotation))


def _is_type(a, pyfunc) -> bool:
    """A kaiojit type, the constexpr marker, a Python class or generic (``npt.NDArray[...]``),
    or a string naming one of those (as ``from __future__ import annotations`` leaves every
    annotation)."""
    if isinstance(a, (T.Type, type)) or a is T.ConstexprType or hasattr(a, "__origin__"):
        return True
    if not isinstance(a, str):
        return False
    text = a.strip()
    if text in ("constexpr", "kj.constexpr", "kaiojit.constexpr"):
        return True
    try:
        T.parse_type(text.removeprefix("kj.").removeprefix("kaiojit."))
        return True
    except (ValueError, KeyError, TypeError):
        pass
    try:  # the annotation's expression, as typing.get_type_hints evaluates it
        value = eval(text, pyfunc.__globals__, {})  # the user's own annotation expression
    except Exception:  # noqa: BLE001  (any failure: not a type)
        return False
    if isinstance(value, str):  # "'float32[:]'" (a quoted annotation, made a string again)
        return value != a and _is_type(value, pyfunc)
    return isinstance(value, (T.Type, type)) or value is T.ConstexprType or \
        inspect.isclass(value) or hasattr(value, "__origin__")  # typing's generics
