"""Foreign device code: ``kj.declare_device`` and ``@kj.jit(link=[...])``, numba's way.

    mul = kj.declare_device("mul_f32", "float32(float32, float32)", link=["mul.cu"])

    @kj.jit(link=["more.ptx"])
    def k(out, x):
        out[0] = mul(x[0], 2.0)

A declaration is callable in kernels. Its calling convention (``abi``) is numba's by default:
``extern "C" __device__ int name(T *result, args...)`` (the int a status, ignored), so .cu
files written for numba link unchanged; ``abi="c"`` calls ``T name(args...)``.

The declarations live here (below every stage); linking is the runtime's
(``kaiojit/runtime/linker.py``). On the GPU a kernel whose PTX calls a declared function, or that names files in ``link=``,
is linked with nvJitLink (``cuda.bindings.nvjitlink``: the wheel ``nvidia-nvjitlink``, or a
CUDA toolkit) from its PTX and the files: ``.ptx``, ``.cubin``, ``.fatbin``, ``.ltoir`` (then
linked with ``-lto``), and ``.cu``, compiled first with NVRTC (``nvidia-cuda-nvrtc``) to PTX.
Without nvJitLink, PTX and cubins still link through the driver's own linker.

On the cpu backend foreign GPU code cannot run: a declaration made with ``py_impl=`` (a Python
function of the same signature) runs that function instead (called from the native code,
holding the GIL, so slowly: for tests), and any other is a located error naming the call.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import types as T

_DECLARED: dict[str, DeviceDeclaration] = {}
# every callback whose address went to MCJIT's symbol table: code linked against it may run
# as long as the process does, so it is never freed (a redeclared name binds a new one; code
# compiled before keeps calling the one it was linked with)
_BOUND_CALLBACKS: list = []
_LOCK = threading.Lock()
_EXTERN_RE = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?(\w+)", re.MULTILINE)
_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
           "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
           "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
           "float32": ctypes.c_float, "float64": ctypes.c_double}
LINKABLE = (".ptx", ".cu", ".ltoir", ".cubin", ".fatbin")


@dataclass(eq=False)
class DeviceDeclaration:
    """A foreign device function kernels may call (``kj.declare_device``)."""

    name: str
    signature: T.Signature
    link: tuple[str, ...] = ()
    abi: str = "numba"
    py_impl: Callable | None = None
    _callback: Any = field(default=None, repr=False)

    def __call__(self, *args):
        if self.py_impl is not None:
            return self.py_impl(*args)
        raise RuntimeError(f"{self.name}() is a declared device function: call it inside a "
                           "kernel (or declare it with py_impl=... to call it from Python)")

    @property
    def sig(self) -> T.Signature:
        """numba's name for :attr:`signature`."""
        return self.signature

    def kaiojit_fingerprint(self) -> str:
        """What of the declaration compiled code depends on (the disk cache's records)."""
        return (f"{self.name}:{self.signature}:{self.abi}:{','.join(self.link)}:"
                f"{'py_impl' if self.py_impl is not None else ''}")

    @property
    def host_symbol(self) -> str:
        return f"kaiojit_py_{self.name}"

    def kaiojit_method(self, typer, node):
        """How a call inside a kernel is typed (the frontend's hook for callable objects)."""
        n_args = len(self.signature.args)
        if node.keywords or len(node.args) != n_args:
            typer.error(f"{self.name}() takes {n_args} positional arguments ({self.signature})",
                        node)
        args = [typer.expr(a) for a in node.args]
        for a, t, n in zip(args, self.signature.args, node.args):
            if isinstance(t, T.ArrayType):
                typer.error(f"{self.name}() is declared with an array parameter ({t}), which "
                            "kaiojit cannot pass to foreign code: declare a pointer "
                            f"(types.CPointer({t.dtype})) and pass ffi.from_buffer(array)", n)
            if isinstance(t, T.CPointer):
                if a.type != t:
                    typer.error(f"{self.name}() takes a {t} here, got {a.type}", n)
            elif not isinstance(a.type, T.ScalarType):
                typer.error(f"{self.name}() takes numbers, got {a.type}", n)
        args = [typer.coerce(a, t, node) for a, t in zip(args, self.signature.args)]
        return typer.intrinsic("foreign.call", self.signature.return_type, args, node,
                               param=self.name)

    def bind_host(self) -> None:
        """Make ``py_impl`` callable from host code under :attr:`host_symbol` (once)."""
        if self._callback is not None or self.py_impl is None:
            return
        from llvmlite import binding as llvm

        sig = self.signature
        def ctype(t):
            return ctypes.c_void_p if isinstance(t, T.CPointer) else _CTYPES.get(str(t))

        proto = ctypes.CFUNCTYPE(ctype(sig.return_type), *map(ctype, sig.args))
        self._callback = proto(self.py_impl)
        with _LOCK:
            _BOUND_CALLBACKS.append(self._callback)
        llvm.add_symbol(self.host_symbol, ctypes.cast(self._callback, ctypes.c_void_p).value)


def declare_device(name: str, sig, link=None, *, abi: str = "numba",
                   py_impl: Callable | None = None) -> DeviceDeclaration:
    """Declare a device function defined outside kaiojit (numba's ``cuda.declare_device``).

    ``sig`` is a signature of scalars with a return type (``"float32(float32, int32)"``);
    ``link`` files that define it (added to every kernel that calls it); ``abi`` is
    ``"numba"`` (``int name(T *ret, args...)``) or ``"c"`` (``T name(args...)``); ``py_impl``
    a Python function the cpu backend calls instead."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"declare_device: {name!r} is not a C identifier")
    if isinstance(sig, str) and sig.strip().startswith("(") or isinstance(sig, (tuple, list)):
        raise TypeError(f"declare_device {name!r}: Return type missing from the signature "
                        f"{sig!r}: give one, as in 'int32(float32)' or 'void(int32)'")
    signature = T.parse_signature(sig) if isinstance(sig, str) else sig
    if not isinstance(signature, T.Signature):
        raise TypeError(f"declare_device: the signature must be a string such as "
                        f"'float32(float32)', got {sig!r}")
    bad = [str(t) for t in signature.args if not _declarable(t)]
    if not (_declarable(signature.return_type) or signature.return_type == T.void) or isinstance(
            signature.return_type, (T.ArrayType, T.CPointer)):
        bad.append(str(signature.return_type))
    if bad:
        raise TypeError(f"declare_device {name!r}: arguments are real scalars, pointers "
                        f"(types.CPointer) or arrays, and the result a real scalar or void; "
                        f"got {', '.join(bad)}")
    if abi not in ("numba", "c"):
        raise ValueError(f"declare_device {name!r}: abi is 'numba' or 'c', got {abi!r}")
    files = check_link_files(link, f"declare_device {name!r}")
    decl = DeviceDeclaration(name, signature, files, abi, py_impl)
    with _LOCK:
        _DECLARED[name] = decl
    if py_impl is not None:
        decl.bind_host()
    return decl


def _declarable(t: T.Type) -> bool:
    """A type a foreign function's parameter may have."""
    return (isinstance(t, T.ScalarType) and str(t) in _CTYPES) or isinstance(
        t, (T.CPointer, T.ArrayType))


def declaration(name: str) -> DeviceDeclaration:
    return _DECLARED[name]


def check_link_files(link, what: str) -> tuple[str, ...]:
    """``link=`` as a tuple of absolute paths of existing files of a linkable kind."""
    if link is None:
        return ()
    if isinstance(link, (str, os.PathLike)):
        link = [link]
    out = []
    for f in link:
        path = os.path.abspath(os.fspath(f))
        ext = os.path.splitext(path)[1]
        if ext not in LINKABLE:
            raise ValueError(f"{what}: cannot link {f!r}: give {', '.join(LINKABLE)} files")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what}: no file {f!r} to link")
        out.append(path)
    return tuple(out)


# --- linking on the GPU ---------------------------------------------------------------------------

def link_files(ptx: str, options_link: tuple[str, ...]) -> tuple[str, ...]:
    """Every file a kernel links: its ``link=`` files and those of the declarations its PTX
    calls, each once, in order."""
    files = list(options_link)
    for name in _EXTERN_RE.findall(ptx):
        decl = _DECLARED.get(name)
        if decl is not None:
            files += [f for f in decl.link if f not in files]
    return tuple(dict.fromkeys(files))


def undefined_declarations(ptx: str, files: tuple[str, ...]) -> list[str]:
    """Declared functions the PTX calls with no file to link at all."""
    return [n for n in _EXTERN_RE.findall(ptx) if n in _DECLARED and not files]


__all__ = ["DeviceDeclaration", "check_link_files", "declaration", "declare_device",
           "link_files", "undefined_declarations"]
