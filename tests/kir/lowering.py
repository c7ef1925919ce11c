"""Helpers of the IR tests: type a kernel with the frontend alone (device functions typed on
demand, once per signature) and lower it for a target, without the compiler or a runtime."""

from __future__ import annotations

from kaiojit import types as T
from kaiojit.frontend.source import function_source
from kaiojit.frontend.typer import type_function
from kaiojit.kir import KFunction
from kaiojit.lower.codegen import ModuleLowering
from kaiojit.options import CompileOptions
from tests.located import position_of


def typed(pyfunc, sig: str) -> KFunction:
    """The typed (and verified) IR of a kernel for a signature string."""
    specialized: dict = {}

    def specialize(dispatcher, arg_types, loc):
        key = (dispatcher.py_func, arg_types)
        if key not in specialized:
            fn = dispatcher.py_func
            specialized[key] = type_function(fn, function_source(fn), arg_types, False,
                                             specialize)
        return specialized[key]

    return type_function(pyfunc, function_source(pyfunc), T.parse_signature(sig).args, True,
                         specialize)


def llvm_ir(pyfunc, sig: str, target, **options) -> str:
    """The unoptimized LLVM IR of a kernel lowered for ``target``."""
    kfunc = typed(pyfunc, sig)
    opts = CompileOptions(**options)
    if target.name == "host":
        from kaiojit.lower.host_module import HostModule
        mod = HostModule(target, opts, "k", kfunc)
    else:
        mod = ModuleLowering(target, opts, "k")
    mod.lower_kernel(kfunc, "k")
    return str(mod.module)


def assert_at(err: BaseException, pyfunc, snippet: str) -> None:
    """``err`` starts with file:line:col of ``snippet`` in ``pyfunc``'s source."""
    filename, line, col = position_of(pyfunc, snippet)
    assert str(err).startswith(f"{filename}:{line}:{col}: "), str(err)
