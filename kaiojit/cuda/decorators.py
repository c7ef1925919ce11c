"""numba.cuda's ``jit``, ``compile_ptx`` and ``compile`` over kaiojit's compiler.

The options numba takes are accepted with numba's meaning where kaiojit has one (``opt``,
``debug``, ``lineinfo``, ``fastmath``, ``max_registers``, ``cache``, ``link``,
``launch_bounds``, ``inline``, ``forceinline``) and accepted and recorded where it has none
yet (``lto``, ``cc``, ``abi``, ``shared_memory_carveout``): code written for numba compiles
unchanged
(docs/porting.md). Signatures may be strings, ``void(float32[:], int32)`` objects, tuples
of argument types, or lists of any of those.
"""

from __future__ import annotations

import types
from typing import Any

from .. import jit as _kj_jit
from .. import types as T
from ..dispatcher import Dispatcher
from ..errors import KaiojitError, TypingError
from ..target import TargetSpec, ptx_version_for
from .dispatcher import numba_dispatcher
from .linkable import link_paths

# numba options kaiojit accepts and records, with no effect on the code it makes yet
_RECORDED = ("lto", "cc", "abi", "shared_memory_carveout", "boundscheck", "nopython")


def _signature(sig: Any) -> str | T.Signature:
    if isinstance(sig, (str, T.Signature)):
        return sig
    if isinstance(sig, tuple) and all(isinstance(a, (T.Type, str)) for a in sig):
        return T.Signature(tuple(T.parse_type(a) if isinstance(a, str) else a for a in sig))
    raise TypeError(f"a signature is a string like 'void(float32[:], int32)', a signature "
                    f"object like void(float32[:], int32) or a tuple of argument types; got "
                    f"{sig!r}")


def signatures(func_or_sig: Any) -> tuple:
    """numba's signature forms as kaiojit's: a tuple of strings and Signatures."""
    if isinstance(func_or_sig, list):
        return tuple(_signature(s) for s in func_or_sig)
    return (_signature(func_or_sig),)


def _kj_options(debug, opt, lineinfo, cache, link, kws: dict) -> dict:
    options = {k: kws.pop(k) for k in ("fastmath", "max_registers", "launch_bounds", "inline")
               if k in kws}
    for k in _RECORDED:
        kws.pop(k, None)
    if kws:
        raise TypeError(f"cuda.jit() got unknown option(s): {', '.join(sorted(kws))}")
    if opt is None or opt is True:
        opt = 3
    elif opt is False:
        opt = 0
    options.update(debug=bool(debug), opt=int(opt), lineinfo=bool(lineinfo), cache=bool(cache),
                   link=link_paths(link) or None)
    if not opt and not options.get("fastmath"):
        options["contract"] = False  # numba's opt=False (NVVM's -opt=0) fuses no multiply-add
    return options


def inline_option(inline, forceinline: bool) -> str:
    """numba's ``inline=`` and ``forceinline=`` as kaiojit's ``inline``: ``forceinline`` and
    ``inline="always"`` (or True) always inline the device function; an explicit
    ``inline="never"`` (or False) never does; left out, or numba's cost-model function (which
    reads numba's IR), LLVM decides, as NVVM does for numba's default."""
    if forceinline or inline is True or inline == "always":
        return "always"
    if inline is False or inline == "never":
        return "never"
    if inline is None or callable(inline):
        return ""
    raise ValueError(f"inline is 'always', 'never', a bool or a cost-model function, got "
                     f"{inline!r}")


def jit(func_or_sig=None, device: bool = False, inline=None, forceinline: bool = False,
        link=(), debug=None, opt=None, lineinfo: bool = False, cache: bool = False,
        launch_bounds=None, lto=None, **kws):
    """numba's ``cuda.jit``: a kernel (or with ``device=True`` a device function), lazy or
    compiled eagerly for the signature(s) given."""
    if launch_bounds is not None:
        kws["launch_bounds"] = launch_bounds
    if inline is not None or forceinline:
        kws["inline"] = inline_option(inline, forceinline)
    _check_carveout(kws.get("shared_memory_carveout"))
    extensions = list(kws.pop("extensions", None) or ())
    options = _kj_options(debug, opt, lineinfo, cache, link, kws)
    if func_or_sig is None:
        return lambda fn: jit(fn, device=device, debug=debug, opt=opt, lineinfo=lineinfo,
                              cache=cache, link=link, extensions=extensions,
                              **options_back(options))

    def made(disp):
        disp = numba_dispatcher(disp)
        disp.extensions.extend(extensions)
        return disp
    if callable(func_or_sig) and not isinstance(func_or_sig, T.Type):
        return made(_kj_jit(device=device, **options)(func_or_sig))
    sigs = signatures(func_or_sig)
    decorate = _kj_jit(list(sigs), device=device, **options)
    return lambda fn: made(decorate(fn))


_CARVEOUTS = ("MaxL1", "MaxShared", "default")


def _check_carveout(carveout) -> None:
    """numba's check of ``shared_memory_carveout``: a percentage of the unified L1/shared
    memory (-1 for the default) or one of its names. kaiojit records it: the driver's
    preference is not set yet (docs/porting.md)."""
    if carveout is None:
        return
    if isinstance(carveout, str):
        if carveout not in _CARVEOUTS:
            raise ValueError(f"Invalid carveout value: {carveout!r} (an int from -1 to 100, "
                             f"or one of {', '.join(_CARVEOUTS)})")
        return
    if isinstance(carveout, bool) or not isinstance(carveout, int):
        raise TypeError(f"shared_memory_carveout is an int or a string, got {carveout!r}")
    if not -1 <= carveout <= 100:
        raise ValueError(f"shared_memory_carveout must be between -1 and 100, got {carveout}")


def options_back(options: dict) -> dict:
    """The options of :func:`_kj_options` that :func:`jit` takes through ``**kws``."""
    back = {k: options[k] for k in ("fastmath", "max_registers", "launch_bounds")
            if k in options and options[k] != ()}
    if options.get("inline"):
        back["inline"] = options["inline"]
    return back


def _target(cc) -> TargetSpec:
    # numba's cc: (major, minor) or (major, minor, "a") for the arch-specific features
    arch = "sm_90" if cc is None else f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"
    return TargetSpec("nvptx", arch, ptx_version_for(arch))


def compile(pyfunc, sig, debug=None, lineinfo: bool = False, device: bool = True,
            fastmath: bool = False, cc=None, opt=None, abi: str = "c", abi_info=None,
            output: str = "ptx", forceinline: bool = False, launch_bounds=None):
    """numba's ``cuda.compile``: ``(code, return type)`` for ``pyfunc`` and ``sig``;
    ``output`` is ``"ptx"`` or ``"ltoir"`` (kaiojit gives LLVM IR text for the latter)."""
    if output not in ("ptx", "ltoir"):
        raise NotImplementedError(f"Unsupported output type: {output}")
    if abi not in ("c", "numba"):
        raise NotImplementedError(f"Unsupported ABI: {abi}")
    if abi == "c" and not device:
        raise NotImplementedError("The C ABI is not supported for kernels")
    if forceinline and output != "ltoir":
        raise ValueError("Can only designate forced inlining in LTO-IR (output='ltoir'): "
                         "PTX is not inlined into its callers")
    options = _kj_options(debug, opt, lineinfo, False, (), {
        "fastmath": fastmath, "launch_bounds": launch_bounds,
        "inline": "always" if forceinline else ""})
    abi_name = (abi_info or {}).get("abi_name") if device and abi == "c" else None
    if abi_name is not None:  # the C function's name: the function renamed, as numba names it
        pyfunc = _renamed(pyfunc.py_func if isinstance(pyfunc, Dispatcher) else pyfunc,
                          abi_name)
    disp = pyfunc if isinstance(pyfunc, Dispatcher) else _kj_jit(**options)(pyfunc)
    spec = _target(cc)
    sig = _signature(sig)
    if device:
        ck = disp.compile_device(sig, spec)
    else:
        try:
            ck = disp.compile(sig, spec)
        except TypingError:
            _check_void_return(disp, sig, spec)
            raise
    code = ck.ptx if output == "ptx" else ck.llvm
    return code, ck.signature.return_type


def _renamed(fn, name: str):
    """``fn`` under another name (the same code, globals and closure): compiled on its own as
    a device function, its PTX function is named ``name``."""
    if not name.isidentifier():
        raise ValueError(f"abi_name must be a C identifier, got {name!r}")
    out = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__,
                             fn.__closure__)
    out.__kwdefaults__, out.__qualname__ = fn.__kwdefaults__, name
    return out


def _check_void_return(disp, sig, spec) -> None:
    """numba's TypeError for a kernel that returns a value (found when the kernel failed to
    type: typed as a device function, it returns something)."""
    try:
        returned = disp.compile_device(sig, spec).signature.return_type
    except KaiojitError:
        return
    if returned != T.void:
        raise TypeError(f"Kernel function {disp.__name__} must have void return type but got "
                        f"{returned}") from None


def compile_ptx(pyfunc, sig, debug=None, lineinfo: bool = False, device: bool = False,
                fastmath: bool = False, cc=None, opt=None, abi: str = "numba", abi_info=None,
                forceinline: bool = False, launch_bounds=None):
    """numba's ``cuda.compile_ptx``: ``(ptx, return type)``; a kernel unless ``device``."""
    return compile(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                   fastmath=fastmath, cc=cc, opt=opt, abi=abi, abi_info=abi_info, output="ptx",
                   launch_bounds=launch_bounds)


def compile_for_current_device(pyfunc, sig, **kws):
    return compile(pyfunc, sig, cc=_current_cc(), **kws)


def compile_ptx_for_current_device(pyfunc, sig, **kws):
    return compile_ptx(pyfunc, sig, cc=_current_cc(), **kws)


def compile_all(pyfunc, sig, **kws):
    code, restype = compile(pyfunc, sig, **kws)
    return [code], restype


def _current_cc():
    from .host import get_current_device
    return get_current_device().compute_capability


_VECTORIZE_OPTIONS = frozenset({"fastmath", "opt", "debug", "lineinfo", "max_registers",
                                "cache"})


def vectorize(signatures=None, target: str = "cuda", **options):
    """numba's ``vectorize`` for the CUDA target: kaiojit's ``kj.vectorize``, with numba's
    handling of its options (``nopython`` is redundant: a RuntimeWarning; an option it does
    not know is a KeyError)."""
    import warnings

    from ..lib.ufunc import vectorize as kj_vectorize
    from .ufuncs import numba_ufunc

    if "nopython" in options:
        options.pop("nopython")
        warnings.warn("nopython kwarg for cuda target is redundant", RuntimeWarning,
                      stacklevel=2)
    unknown = sorted(set(options) - _VECTORIZE_OPTIONS)
    if unknown:
        raise KeyError(f"Unrecognized options: {', '.join(unknown)}")
    if signatures is not None and callable(signatures) and not isinstance(
            signatures, (str, T.Signature)):
        return numba_ufunc(kj_vectorize(target=target, **options)(signatures))
    return numba_ufunc(kj_vectorize(signatures, target=target, **options))
