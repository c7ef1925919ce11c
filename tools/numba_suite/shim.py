"""The name mapping that lets numba-cuda's test files import kaiojit in numba's place.

``install(target)`` puts a small ``numba`` package in ``sys.modules``: ``numba.cuda`` is the
target module (``kaiojit.cuda``, or ``kaiojit`` itself for the one-for-one baseline), and
``numba.cuda.X`` is ``<target>.X`` where the target has that submodule. The test helpers
(``numba.cuda.testing``, ``numba.cuda.tests.support``, ``config``) come from ``support.py``
beside this file, the test files from the directory given. Nothing else is mapped: an
import of numba's compiler internals fails, and so does the test file that makes it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType, SimpleNamespace

import numpy as np
import support


def _module(name: str, attrs: dict, package_path: list[str] | None = None) -> ModuleType:
    """A module with a spec, as an imported one has (``importlib.util.find_spec(name)`` of a
    module in ``sys.modules`` without one raises)."""
    mod = ModuleType(name)
    mod.__dict__.update(attrs)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, _Prebuilt(mod),
                                                  is_package=package_path is not None)
    if package_path is not None:
        mod.__path__ = package_path
        mod.__spec__.submodule_search_locations = package_path
    return mod


class _Prebuilt(importlib.abc.Loader):
    def __init__(self, module: ModuleType):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """``numba.cuda.X`` -> ``<target>.X``; the prebuilt shims by name; the test files from the
    tests' directory; nothing else of numba. It answers every ``numba`` name itself, so no
    other finder sees one: numba-cuda's wheel installs (``_numba_cuda_redirector.pth``) a
    finder that redirects ``numba.cuda`` names to the installed numba-cuda."""

    def __init__(self, target_name: str, prebuilt: dict[str, ModuleType]):
        self.target_name = target_name
        self.prebuilt = prebuilt

    def find_spec(self, name, path=None, target=None):
        if name in self.prebuilt:
            mod = self.prebuilt[name]
            return importlib.util.spec_from_loader(
                name, _Prebuilt(mod), is_package=hasattr(mod, "__path__"))
        if name.startswith("numba.cuda.tests."):  # the test files, on the package's path
            return importlib.machinery.PathFinder.find_spec(name, path, target)
        if name.startswith("numba.cuda."):
            real = self.target_name + name[len("numba.cuda"):]
            try:
                mod = importlib.import_module(real)
            except ImportError:
                mod = None
            if mod is None:
                raise ModuleNotFoundError(f"kaiojit has no {real} (for {name})", name=name)
            return importlib.util.spec_from_loader(
                name, _Prebuilt(mod), is_package=hasattr(mod, "__path__"))
        if name == "numba" or name.startswith("numba."):
            raise ModuleNotFoundError(f"numba's {name} is not mapped onto kaiojit", name=name)
        return None


def _missing(name: str):
    """A stand-in for a numba function kaiojit lacks: a test that calls it fails by name."""
    def missing(*args, **kwargs):
        raise NotImplementedError(f"kaiojit has no {name}")
    missing.__name__ = name
    return missing


def _internals(name: str) -> ModuleType:
    """A stand-in for a module of numba's compiler internals (its IR, bytecode analysis,
    calling convention, extension API) that a test file imports at its top: every name in it
    is a ``_missing`` stand-in, so the file's kernel tests run and those that use the
    internals fail by name."""
    mod = ModuleType(name)

    def missing_name(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _missing(f"{name}.{attr}")
    mod.__getattr__ = missing_name
    return mod


def _accepting(*args, **kwargs):
    """A registration of numba's extension API (``register_model(T)``, ``lower(f, ...)``):
    accepted, as a decorator that returns what it decorates, with no effect."""
    return lambda obj: obj


class _StructModel:
    def __init__(self, dmm, fe_type, members):
        self.members = members


def _extension_api() -> dict[str, ModuleType]:
    """numba's extension API as far as a test file registers an extension at import
    (``extensions_usecases.py``): the registrations are accepted and have no effect, so the
    file's other tests run; the tests that use the extension fail (kaiojit has no numba
    extension API: docs/porting.md)."""
    extending = _internals("numba.cuda.extending")
    extending.__dict__.update(
        typeof_impl=SimpleNamespace(register=_accepting), register_model=_accepting,
        type_callable=_accepting, make_attribute_wrapper=_accepting,
        core_models=SimpleNamespace(StructModel=_StructModel))
    cudaimpl = _internals("numba.cuda.cudaimpl")
    cudaimpl.lower = _accepting
    return {"numba.cuda.extending": extending, "numba.cuda.cudaimpl": cudaimpl,
            "numba.cuda.cgutils": _internals("numba.cuda.cgutils")}


# numba's internal modules that test files of the kernel language import at their top
INTERNAL_MODULES = ("numba.cuda.core.controlflow", "numba.cuda.core.bytecode",
                    "numba.cuda.core.callconv", "numba.cuda.core.rewrites",
                    "numba.core.extending", "numba.cuda.cudadrv.nvrtc")


def _njit(*args, **kwargs):
    """numba's CPU ``njit``: the Python function itself (a reference implementation)."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def _cpu_vectorize(target):
    """numba's own ``vectorize``: ``target="cuda"`` is kaiojit's; numba's CPU ufunc (the
    tests' reference implementation) is NumPy's ``np.vectorize`` of the Python function."""
    def vectorize(*args, **kwargs):
        if kwargs.get("target") == "cuda":
            return target.vectorize(*args, **kwargs)
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return np.vectorize(args[0])
        return lambda fn: np.vectorize(fn)
    return vectorize


def install(target_name: str, cudapy_dir: str) -> None:
    target = importlib.import_module(target_name)
    kj = importlib.import_module("kaiojit")
    errors = _module("numba.core.errors", {
        "TypingError": kj.TypingError,
        "NumbaPerformanceWarning": kj.PerformanceWarning,
        "NumbaWarning": Warning,
        "NumbaDeprecationWarning": DeprecationWarning,
        # numba's warning of a config it ignores (debug with opt): kaiojit warns no such thing
        "NumbaInvalidConfigWarning": type("NumbaInvalidConfigWarning", (UserWarning,), {}),
        "UnsupportedError": kj.UnsupportedError,
        "CompileError": kj.CompileError,
    })
    testing = _module("numba.cuda.testing", dict(vars(support)))
    testing.unittest = __import__("unittest")
    config = support.config
    prebuilt = {
        "numba": _module("numba", {"cuda": target, "njit": _njit, "jit": _njit,
                                   "vectorize": _cpu_vectorize(target),
                                   "types": getattr(target, "types", None),
                                   "guvectorize": getattr(target, "guvectorize", None)}, []),
        "numba.core": _module("numba.core", {"errors": errors, "config": config}, []),
        "numba.core.errors": errors,
        "numba.cuda.testing": testing,
        "numba.cuda.tests": _module("numba.cuda.tests", {
            "load_testsuite": support.load_testsuite, "support": support}, []),
        "numba.cuda.tests.support": support,
        "numba.cuda.tests.cudapy": _module("numba.cuda.tests.cudapy", {}, [cudapy_dir]),
        "numba.cuda.core": _module("numba.cuda.core", {"errors": errors, "config": config}, []),
        "numba.cuda.core.errors": errors,
        "numba.cuda.core.config": config,
        "numba.cuda.config": config,
        "numba.cuda.np": _module("numba.cuda.np", {}, []),
        "numba.cuda.utils": _module("numba.cuda.utils", {"PYVERSION": sys.version_info[:2]}),
        "numba.cuda.misc": _module("numba.cuda.misc", {}, []),
        "numba.cuda.misc.special": _module("numba.cuda.misc.special", {
            "literal_unroll": kj.literal_unroll}),
        "numba.cuda.typing": _module("numba.cuda.typing", {
            "signature": lambda ret, *args: kj.types.signature_of(ret, args)}, []),
        "numba.cuda.typing.typeof": _module("numba.cuda.typing.typeof", {
            "typeof": lambda value, purpose=None: kj.runtime.typeof(value)}),
        "numba.cuda.cudadrv": _module("numba.cuda.cudadrv", {}, []),
        "numba.cuda.cudadrv.driver": _module("numba.cuda.cudadrv.driver", {
            "driver": _missing("numba.cuda.cudadrv.driver.driver"),
            "CudaAPIError": kj.CudaError, "Stream": kj.runtime.Stream, "_have_nvjitlink": lambda: False}),
        "numba.cuda.launchconfig": _module("numba.cuda.launchconfig", {
            name: _missing(name) for name in ("current_launch_config", "capture_compile_config",
                                              "ensure_current_launch_config")}),
        "numba.cuda.np.numpy_support": _module("numba.cuda.np.numpy_support", {
            "from_dtype": kj.types.from_dtype,
            "as_dtype": lambda t: t.np_dtype, "carray": _missing("carray"),
            "farray": _missing("farray"),
            "numpy_version": tuple(int(v) for v in np.__version__.split(".")[:2])}),
    }
    prebuilt.update({name: _internals(name) for name in INTERNAL_MODULES})
    prebuilt.update(_extension_api())
    prebuilt["numba.cuda.cudadrv"].nvrtc = prebuilt["numba.cuda.cudadrv.nvrtc"]
    prebuilt["numba.core.config"] = config
    prebuilt["numba"].errors = errors
    prebuilt["numba"].typeof = prebuilt["numba.cuda.typing.typeof"].typeof
    prebuilt["numba.cuda.cudadrv"].driver = prebuilt["numba.cuda.cudadrv.driver"]
    devicearray = getattr(target, "devicearray", None)  # numba's cudadrv.devicearray
    if devicearray is not None:
        prebuilt["numba.cuda.cudadrv.devicearray"] = devicearray
        prebuilt["numba.cuda.cudadrv"].devicearray = devicearray
    sys.modules["numba.cuda"] = target
    for child in ("config", "testing", "tests", "core", "np", "utils", "misc", "typing",
                  "cudadrv", "launchconfig", "extending", "cudaimpl", "cgutils"):  # `from numba.cuda import config`
        if not hasattr(target, child):
            setattr(target, child, prebuilt[f"numba.cuda.{child}"])
    sys.meta_path.insert(0, _Finder(target_name, prebuilt))
    for name in ("numba", "numba.core", "numba.cuda.tests", "numba.cuda.tests.cudapy",
                 "numba.cuda.core"):
        sys.modules[name] = prebuilt[name]
