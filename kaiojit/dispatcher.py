"""``@kj.jit`` objects: one specialization per argument-type signature, launch configuration,
inspection of every stage."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import subprocess
import tempfile
import threading

from . import types as T
from .compiler import CompiledKernel, CompileOptions, TargetSpec, compile_kernel, type_kernel
from .errors import CompileError, KaiojitError, TypingError

_DEFAULT_SPEC = TargetSpec("nvptx", "sm_90", 80)


def _runtime():
    from . import runtime
    return runtime


def _user_facing(method):
    """A public entry point: a CompileError leaves it with no frames of kaiojit's code below."""

    @functools.wraps(method)
    def entry_point(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except CompileError as e:
            raise e.with_traceback(None) from None
    return entry_point


class Dispatcher:
    """A kernel or device function written in Python, compiled on demand."""

    _kaiojit_dispatcher = True

    def __init__(self, pyfunc, options: CompileOptions, device: bool = False, signatures=()):
        if isinstance(pyfunc, Dispatcher):
            pyfunc = pyfunc.py_func
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"@kj.jit decorates a Python function, got {type(pyfunc).__name__}")
        self.py_func = pyfunc
        self.__name__ = pyfunc.__name__
        self.__qualname__ = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self.options = options
        self.device = device
        self._lock = threading.RLock()
        self._compiled: dict[tuple[TargetSpec, T.Signature], CompiledKernel] = {}
        self._launch_cache: dict = {}
        self._device_cache: dict = {}
        self._typing_now: set = set()
        self._launchers: dict = {}
        self._eager: list[T.Signature] = []
        self._block_size_cache: dict = {}
        for sig in signatures:
            sig = _as_signature(sig, pyfunc)
            self._eager.append(sig)
            if device:
                self._device_kir(sig.args)
            else:
                self.compile(sig)

    def __repr__(self) -> str:
        kind = "device function" if self.device else "kernel"
        return f"<kaiojit {kind} {self.__qualname__}>"

    # --- compiling ----------------------------------------------------------------------------------

    @property
    def signatures(self) -> list[T.Signature]:
        """The argument-type signatures compiled so far."""
        seen = []
        for _, sig in self._compiled:
            if sig not in seen:
                seen.append(sig)
        if self.device:
            for args in self._device_cache:
                sig = T.Signature(args, self._device_cache[args].return_type)
                if sig not in seen:
                    seen.append(sig)
        return seen

    @_user_facing
    def compile(self, signature, target: TargetSpec | None = None) -> CompiledKernel:
        """Compile for a signature (a string, a Signature, or a tuple of argument types)."""
        if self.device:
            raise TypeError(f"{self.__qualname__} is a device function: it is compiled into the "
                            "kernels that call it; use .inspect_kir() or call it from a kernel")
        sig = _as_signature(signature, self.py_func)
        spec = target or self._default_spec()
        key = (spec, sig)
        ck = self._compiled.get(key)
        if ck is None:
            with self._lock:
                ck = self._compiled.get(key)
                if ck is None:
                    if self.options.cache and spec.kind == "nvptx":
                        ck = _compile_cached(self, sig, spec)
                    else:
                        ck = _compile_user_facing(self, sig, spec)
                    self._compiled[key] = ck
        return ck

    def _default_spec(self) -> TargetSpec:
        return _DEFAULT_SPEC

    def _device_kir(self, arg_types: tuple, loc=None):
        """This function, typed as a device function for ``arg_types`` (cached)."""
        kf = self._device_cache.get(arg_types)
        if kf is not None:
            return kf
        if arg_types in self._typing_now:
            raise TypingError(f"{self.__qualname__} calls itself: recursion is not supported in "
                              "kernels", loc)
        self._typing_now.add(arg_types)
        try:
            kf = type_kernel(self.py_func, arg_types, _specialize_device, False, self.options)
        finally:
            self._typing_now.discard(arg_types)
        kf.mangled = f"{_mangle_device(self.py_func, arg_types)}"
        self._device_cache[arg_types] = kf
        return kf

    # --- inspection -----------------------------------------------------------------------------

    def _inspect(self, attr: str, signature):
        if signature is not None:
            return getattr(self.compile(signature), attr)
        return {sig: getattr(ck, attr) for (_, sig), ck in self._compiled.items()}

    @_user_facing
    def inspect_kir(self, signature=None):
        if self.device:
            if signature is not None:
                return str(self._device_kir(_as_signature(signature, self.py_func).args))
            return {T.Signature(a, k.return_type): str(k) for a, k in self._device_cache.items()}
        return _Shown.wrap(self._inspect("kir", signature), "python")

    @_user_facing
    def inspect_llvm(self, signature=None):
        """Optimized LLVM IR: a str for one signature, {signature: str} for all compiled ones."""
        return _Shown.wrap(self._inspect("llvm", signature), "llvm")

    @_user_facing
    def inspect_ptx(self, signature=None):
        return _Shown.wrap(self._inspect("ptx", signature), "nasm")

    @_user_facing
    def inspect_sass(self, signature=None):
        if signature is None:
            return {sig: sass_of(ck) for (_, sig), ck in self._compiled.items()}
        return sass_of(self.compile(signature))

    # --- launching ------------------------------------------------------------------------------

    def __getitem__(self, config) -> _Launcher:
        launcher = self._launchers.get(config)
        if launcher is None:
            launcher = _Launcher(self, *_parse_config(config))
            if len(self._launchers) < 64:
                self._launchers[config] = launcher
        return launcher

    @_user_facing
    def launch(self, *args, grid, block, shared_mem=0, stream=None, cluster=None):
        self._launch(grid, block, stream, shared_mem, args, cluster)

    def forall(self, n: int, stream=None, shared_mem=0) -> _Launcher:
        """A 1-D launch covering ``n`` threads, block size chosen by occupancy."""
        if n <= 0:
            from .errors import LaunchError
            raise LaunchError(f"forall({n}): the thread count must be positive")
        return _ForallLauncher(self, n, stream, shared_mem)

    def __call__(self, *args, **kwargs):
        if self.device:
            raise TypeError(f"device function {self.__qualname__} can only be called from a kernel")
        raise TypeError(f"launch kernel {self.__qualname__} with a configuration: "
                        f"{self.__name__}[grid, block](...)")

    def _launch(self, grid, block, stream, shared_mem, args, cluster=None):
        try:
            loaded = self._loaded_for(args)
        except CompileError as e:
            raise e.with_traceback(None) from None
        loaded.launch(grid, block, stream, shared_mem, args, cluster)

    def _loaded_for(self, args):
        try:
            loaded = self._launch_cache.get(_launch_key(args))
        except TypeError:  # an argument kaiojit cannot type: _prepare names it
            loaded = None
        return loaded if loaded is not None else self._prepare(args)

    def _prepare(self, args):
        """First launch with these argument types: type, compile, load (then cached)."""
        rt = _runtime()
        if self.device:
            raise TypeError(f"device function {self.__qualname__} cannot be launched")
        params = list(inspect.signature(self.py_func).parameters)
        if len(args) != len(params):
            raise TypeError(f"{self.__qualname__}() takes {len(params)} arguments "
                            f"({', '.join(params)}), got {len(args)}")
        arg_types = []
        for a, name in zip(args, params):
            try:
                arg_types.append(rt.typeof(a))
            except TypeError as e:
                raise TypeError(f"{self.__qualname__}(): parameter {name!r}: {e}") from None
        arg_types = tuple(arg_types)
        sig = self._match_eager(arg_types) if self._eager else T.Signature(arg_types)
        backend = rt.get_backend()
        ck = self.compile(sig, target_spec_of(backend))
        loader = getattr(backend, "load_kernel", None)
        loaded = loader(ck) if loader is not None else rt.load_kernel(backend, ck)
        try:
            key = _launch_key(args)
        except TypeError:
            return loaded
        with self._lock:
            self._launch_cache[key] = loaded
        return loaded

    def _match_eager(self, arg_types):
        for sig in self._eager:
            if all(_accepts(p, a) for p, a in zip(sig.args, arg_types)):
                return sig
        sigs = ", ".join(str(s) for s in self._eager)
        got = ", ".join(str(a) for a in arg_types)
        which = ""
        if len(self._eager) == 1:  # one signature: name the parameter that does not fit
            params = list(inspect.signature(self.py_func).parameters)
            misfits = (f": parameter {name!r} is {p}, got {a}" for name, p, a
                       in zip(params, self._eager[0].args, arg_types) if not _accepts(p, a))
            which = next(misfits, "")
        raise TypeError(f"{self.__qualname__} was compiled for {sigs}; no signature accepts "
                        f"({got}){which}")


def _accepts(param: T.Type, arg: T.Type) -> bool:
    if param == arg:
        return True
    if isinstance(param, T.TensorMapType):
        return param.accepts(arg)
    if isinstance(param, T.ArrayType) and isinstance(arg, T.ArrayType):
        return (param.dtype == arg.dtype and param.ndim == arg.ndim
                and param.layout in ("A", arg.layout))
    return isinstance(param, T.ScalarType) and isinstance(arg, T.ScalarType)


class _Launcher:
    """``kernel[grid, block, stream, shared]``: bound to a configuration, called with arguments.

    After a launch through the general path, the launcher takes the runtime's fast form of
    that launch (arguments of the same kinds, same device and thread) as its own ``__call__``,
    in a class of its own; the fast form hands anything else back to :meth:`general`.
    """

    __slots__ = ("dispatcher", "grid", "block", "stream", "shared_mem", "rebuilds")

    def __init__(self, dispatcher, grid, block, stream=None, shared_mem=0):
        self.dispatcher = dispatcher
        self.grid = grid
        self.block = block
        self.stream = stream
        self.shared_mem = shared_mem
        self.rebuilds = 0

    def general(self, args):
        """The general path (what a fast form hands back to)."""
        return _Launcher.__call__(self, *args)

    def __call__(self, *args):
        # the general path: one key of the backend and the argument types, one dict lookup
        try:
            loaded = self.dispatcher._launch_cache.get((_get_backend(), *map(_typeof, args)))
        except TypeError:  # first launch (runtime not bound yet) or an argument kaiojit can't type
            loaded = None
        if loaded is None:
            try:
                loaded = self.dispatcher._prepare(args)
            except CompileError as e:  # the user's line, not kaiojit's frames
                raise e.with_traceback(None) from None
        loaded.launch(self.grid, self.block, self.stream, self.shared_mem, args, None)
        if self.rebuilds < _MAX_FAST_REBUILDS:
            self.rebuilds += 1
            fast_path = getattr(loaded, "fast_path", None)  # backends without one: None
            fast = fast_path and fast_path(self.grid, self.block, self.stream, self.shared_mem,
                                           args)
            if fast:
                self.__class__ = type("_FastLauncher", (_Launcher,),
                                      {"__slots__": (), "__call__": fast})
            else:
                self.__class__ = _Launcher

    @property
    def fast(self):
        """The generated fast form this launcher uses, if any (for tests and inspection)."""
        call = type(self).__call__
        return None if call is _Launcher.__call__ else call


_MAX_FAST_REBUILDS = 8  # a launcher fed ever-changing argument kinds stops specializing


class _ForallLauncher:
    def __init__(self, dispatcher, n, stream, shared_mem):
        self.dispatcher, self.n, self.stream, self.shared_mem = dispatcher, n, stream, shared_mem

    def __call__(self, *args):
        d = self.dispatcher
        rt = _runtime()
        try:
            loaded = d._loaded_for(args)
        except CompileError as e:  # the user's error, without kaiojit's frames
            raise e.with_traceback(None) from None
        block = d._block_size_cache.get(loaded)
        if block is None:
            block = d._block_size_cache[loaded] = rt.suggest_block_size(loaded, self.shared_mem)
        block = min(block, self.n)
        grid = (self.n + block - 1) // block
        loaded.launch(grid, block, self.stream, self.shared_mem, args, None)


_get_backend = None  # kaiojit.runtime's get_backend and typeof, bound at the first launch
_typeof = None


def _launch_key(args):
    """What a launch's specialization depends on: the backend and every argument's type."""
    if _get_backend is None:
        _bind_runtime()
    return (_get_backend(), *map(_typeof, args))


def _bind_runtime():
    global _get_backend, _typeof
    from .runtime import get_backend, typeof

    _typeof = typeof
    _get_backend = get_backend


def target_spec_of(backend) -> TargetSpec:
    """What to compile for on ``backend``: the host, or the current device's arch and PTX."""
    spec = getattr(backend, "target_spec", None)
    if spec is not None:
        return spec()
    from .lower.ptx import ptx_version_for

    major, minor = backend.compute_capability(backend.current_device())
    arch = f"sm_{major}{minor}"
    driver_max = None
    if backend.name == "cuda":
        from .runtime.cuda import max_ptx_version
        hi, lo = max_ptx_version()
        driver_max = hi * 10 + lo
    return TargetSpec("nvptx", arch, ptx_version_for(arch, driver_max))


def _parse_config(config):
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise TypeError("launch configuration is kernel[grid, block], kernel[grid, block, stream] "
                        "or kernel[grid, block, stream, dynamic_shared_bytes]")
    grid, block = config[0], config[1]
    stream = config[2] if len(config) > 2 else None
    shared = config[3] if len(config) > 3 else 0
    return grid, block, stream, shared


def _specialize_device(dispatcher, arg_types, loc=None):
    return dispatcher._device_kir(arg_types, loc)


def _mangle_device(pyfunc, arg_types) -> str:
    import hashlib
    digest = hashlib.blake2s(f"{pyfunc.__module__}.{pyfunc.__qualname__}{arg_types}".encode(),
                             digest_size=5).hexdigest()
    return f"{pyfunc.__name__}_dev_{digest}"


def _as_signature(sig, pyfunc) -> T.Signature:
    if isinstance(sig, T.Signature):
        return sig
    if isinstance(sig, str):
        try:
            return T.parse_signature(sig if "(" in sig else f"({sig})")
        except ValueError as e:
            raise TypeError(f"bad signature for {pyfunc.__qualname__}: {e}") from None
    if isinstance(sig, (tuple, list)):
        return T.Signature(tuple(T.parse_type(a) if isinstance(a, str) else a for a in sig))
    raise TypeError(f"a signature is a string like 'void(float32[:], int32)', got {sig!r}")


def _compile_user_facing(dispatcher, sig, spec) -> CompiledKernel:
    try:
        return compile_kernel(dispatcher.py_func, sig, dispatcher.options, spec, _specialize_device)
    except KaiojitError as e:
        raise e.with_traceback(None) from None


def _compile_cached(dispatcher, sig, spec) -> CompiledKernel:
    """A compile through the disk cache (``cache=True``): a hit skips every stage."""
    from . import __version__
    from . import diskcache

    key = diskcache.entry_key(dispatcher.py_func, sig, dispatcher.options, spec, __version__)
    entry = diskcache.load(key)
    if entry is not None:
        return CompiledKernel(
            name=entry["name"], py_name=dispatcher.py_func.__name__, signature=sig,
            arg_names=tuple(entry["arg_names"]), kir=entry["kir"], llvm=entry["llvm"],
            llvm_unoptimized="", ptx=entry["ptx"],
            static_shared_bytes=entry["static_shared_bytes"], uses_sync=entry["uses_sync"],
            options=dispatcher.options, target=spec, timings={"cache": True},
        )
    ck = _compile_user_facing(dispatcher, sig, spec)
    diskcache.store(key, {
        "name": ck.name, "arg_names": list(ck.arg_names), "kir": ck.kir, "llvm": ck.llvm,
        "ptx": ck.ptx, "static_shared_bytes": ck.static_shared_bytes, "uses_sync": ck.uses_sync,
    })
    return ck


def annotations_signature(pyfunc) -> T.Signature | None:
    """The signature given by annotations, when every parameter has a kaiojit type."""
    params = list(inspect.signature(pyfunc).parameters.values())
    if not params:
        return None
    anns = []
    for p in params:
        a = p.annotation
        if isinstance(a, str):
            try:
                a = T.parse_type(a.removeprefix("kj.").removeprefix("kaiojit."))
            except ValueError:
                return None
        if not isinstance(a, T.Type):
            return None
        anns.append(a)
    return T.Signature(tuple(anns))


# --- SASS -----------------------------------------------------------------------------------------


def _tool(name: str) -> str | None:
    path = shutil.which(name)
    if path:
        return path
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        return find_nvidia_binary_utility(name)
    except Exception:  # noqa: BLE001 - not found
        return None


def sass_of(ck: CompiledKernel) -> str:
    """SASS of a compiled kernel: ptxas to a cubin, then nvdisasm or cuobjdump."""
    ptxas = _tool("ptxas")
    disasm = _tool("nvdisasm") or _tool("cuobjdump")
    if ptxas is None or disasm is None:
        missing = "ptxas" if ptxas is None else "nvdisasm or cuobjdump"
        raise RuntimeError(f"inspect_sass needs {missing}: install a CUDA toolkit (or the "
                           "nvidia-cuda-nvcc and nvidia-cuda-nvdisasm packages: pip install 'kaiojit[test]')")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        cubin = os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ck.ptx)
        subprocess.run([ptxas, f"-arch={ck.target.arch}", src, "-o", cubin], check=True,
                       capture_output=True)
        if os.path.basename(disasm).startswith("nvdisasm"):
            cmd = [disasm, "-c", cubin]
        else:
            cmd = [disasm, "-sass", cubin]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


class _Shown(str):
    """Inspection text that a notebook shows highlighted."""

    language = "text"

    @classmethod
    def wrap(cls, value, language: str):
        if isinstance(value, dict):
            return {k: cls.wrap(v, language) for k, v in value.items()}
        s = cls(value)
        s.language = language
        return s

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import get_lexer_by_name
            return highlight(str(self), get_lexer_by_name(self.language),
                             HtmlFormatter(noclasses=True))
        except Exception:  # noqa: BLE001 - no pygments: plain text
            import html
            return f"<pre>{html.escape(str(self))}</pre>"


__all__ = ["Dispatcher", "annotations_signature", "CompileError"]
