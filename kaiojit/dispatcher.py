"""``@kj.jit`` objects: one specialization per argument-type signature, compiled on demand
through the compiler's pipeline (or the disk cache), and inspection of every stage.

Launching lives in :mod:`kaiojit.launch.launcher`, SASS in :mod:`kaiojit.tools.sass`, notebook
display in :mod:`kaiojit.tools.display`.
"""

from __future__ import annotations

import hashlib
import inspect
import threading

from . import types as T
from .compiler import (
    CompiledKernel, CompileOptions, TargetSpec, compile_kernel, stage_names, type_kernel,
)
from .errors import (
    ArgumentError, CompileError, DeviceFunctionError, LaunchError, user_facing,
)
from .frontend.parameters import check_parameters
from .frontend.recursion import pending_shell, type_recursive
from .launch.launcher import (
    USER_ERRORS, ForallLauncher, Launcher, launch_key, outside_graphs, parse_launch_config,
    untraced,
)
from .overloads import accepts, best_signature
from .serialize import by_reference, function_reference, function_state, rebuild_function
from .tools.display import Shown
from .tools.resources import resource_summary, resources_header
from .tools.sass import sass_of

_DEFAULT_SPEC = TargetSpec("nvptx", "sm_90", 80)
# device functions are typed under one lock (their caches filled once, whichever kernels'
# compiles ask at once, with no lock order to get wrong between functions that call each
# other); what each thread is typing now is its own (frontend/recursion.py)
_DEVICE_TYPING = threading.RLock()


def _runtime():
    from . import runtime
    return runtime


class Dispatcher:
    """A kernel or device function written in Python, compiled on demand."""

    _kaiojit_dispatcher = True

    def __init__(self, pyfunc, options: CompileOptions, device: bool = False, signatures=(),
                 specialize=()):
        if isinstance(pyfunc, Dispatcher):
            pyfunc = pyfunc.py_func
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"@kj.jit decorates a Python function, got {type(pyfunc).__name__}")
        check_parameters(pyfunc)
        self.constexpr_params = constexpr_params(pyfunc, specialize, device)
        params = list(inspect.signature(pyfunc).parameters)
        self._constexpr_at = tuple(params.index(n) for n in self.constexpr_params)
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

    def __reduce__(self):
        """Pickled as numba pickles its dispatchers: by reference where its module's name
        holds it, else by value, its function rebuilt and compiled again where it is loaded
        (:mod:`kaiojit.serialize`)."""
        ref = function_reference(self.py_func, self)
        if ref is not None:
            return by_reference, ref
        return _rebuilt, (type(self), function_state(self.py_func), self.options, self.device,
                          tuple(self._eager), self.constexpr_params)

    # --- what launchers read (kaiojit/launch, the autotuner): no private attribute ---------

    @property
    def constexpr_positions(self) -> tuple[int, ...]:
        """The positions of the constexpr parameters (folded into the kernel, not passed)."""
        return self._constexpr_at

    @property
    def declared_signatures(self) -> tuple[T.Signature, ...]:
        """The signatures given to ``@kj.jit(...)``, in order; empty when compiled lazily."""
        return tuple(self._eager)

    def forall_block_size(self, loaded, shared_mem: int) -> int:
        """The block size ``.forall(n)`` launches ``loaded`` with: chosen by occupancy once
        per loaded kernel."""
        block = self._block_size_cache.get(loaded)
        if block is None:
            block = self._block_size_cache[loaded] = loaded.suggest_block_size(shared_mem)
        return block

    @staticmethod
    def constexpr_type(value) -> T.ConstexprType:
        """The type a constexpr parameter given ``value`` compiles with (the autotuner checks
        its configs' constants with it); TypeError for a value no kernel can fold in."""
        return constexpr_type(value)

    def cache_fast_launch(self, config, fast) -> None:
        """``kernel[config]`` returns ``fast`` (a launcher's fast form) from now on, if the
        launcher of ``config`` is still cached."""
        if self._launchers.get(config) is not None:
            self._launchers[config] = fast

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

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def compile(self, signature, target: TargetSpec | None = None) -> CompiledKernel:
        """Compile for a signature (a string, a Signature, or a tuple of argument types)."""
        if self.device:
            raise DeviceFunctionError(f"{self.__qualname__} is a device function: it is compiled "
                                      "into the kernels that call it; use .inspect_kir() or call "
                                      "it from a kernel")
        sig = _as_signature(signature, self.py_func)
        if self._constexpr_at:
            _check_constexpr_signature(self, sig)
        spec = target or _DEFAULT_SPEC
        key = (spec, sig)
        ck = self._compiled.get(key)
        if ck is None:
            with self._lock:
                ck = self._compiled.get(key)
                if ck is None:
                    if self.options.cache:
                        ck = _compile_cached(self, sig, spec)
                    else:
                        ck = _compile_user_facing(self, sig, spec)
                    self._compiled[key] = ck
        return ck

    @user_facing(errors=USER_ERRORS)  # a bad block or size, a CompileError
    def max_cooperative_grid_blocks(self, block, dynamic_shared: int = 0, signature=None) -> int:
        """The most blocks of ``block`` threads a launch of this kernel may have when it
        synchronizes its grid (``kj.cg.this_grid().sync()``): all must be resident at once.
        ``signature`` may be left out when one signature has been compiled."""
        from .runtime.launch import normalize_dim3

        block = normalize_dim3(block, "block", self.__qualname__)
        if isinstance(dynamic_shared, bool) or not hasattr(dynamic_shared, "__index__") or \
                dynamic_shared < 0:
            raise LaunchError(f"kernel {self.__qualname__!r}: dynamic_shared must be a number "
                              f"of bytes (an int >= 0), got {dynamic_shared!r}")
        if signature is None:
            sigs = self.signatures
            if len(sigs) != 1:
                raise TypeError(f"{self.__qualname__}.max_cooperative_grid_blocks(): give a "
                                f"signature (compiled so far: {len(sigs)})")
            signature = sigs[0]
        backend = _runtime().get_backend()
        loaded = backend.load_kernel(self.compile(signature, backend.target_spec()))
        return loaded.max_cooperative_grid_blocks(block, int(dynamic_shared))

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def compile_device(self, signature, target: TargetSpec | None = None) -> CompiledKernel:
        """This function compiled on its own as a device function, visible under its Python
        name (``.visible .func`` in PTX): what ``kj.compile_ptx(..., device=True)`` returns.
        A return type in the signature must be the one the function returns."""
        sig = _as_signature(signature, self.py_func)
        return _compile_user_facing(self, sig, target or _DEFAULT_SPEC, device=True)

    def _device_kir(self, arg_types: tuple, loc=None):
        """This function, typed as a device function for ``arg_types`` (cached)."""
        kf = self._device_cache.get(arg_types)
        if kf is not None:
            return kf
        with _DEVICE_TYPING:
            kf = self._device_cache.get(arg_types) or pending_shell(self, arg_types)
            if kf is not None:  # typed, or being typed: a call of itself (frontend/recursion.py)
                return kf
            names = self.py_func.__code__.co_varnames[:self.py_func.__code__.co_argcount]
            params = tuple((n, t) for n, t in zip(names, arg_types)
                           if not isinstance(t, T.ConstexprType))
            declared = next((s.return_type for s in self._eager if s.args == arg_types), None)
            kf = type_recursive(self, arg_types, params, declared, lambda: type_kernel(
                self.py_func, arg_types, _specialize_device, False, self.options))
            kf.mangled = f"{_mangle_device(self.py_func, arg_types)}"
            kf.inline = self.options.inline
            self._device_cache[arg_types] = kf
        return kf

    # --- inspection -----------------------------------------------------------------------------

    def _inspect(self, stage: str, signature, comment: str = "", language: str = "text"):
        """Stage ``stage``'s text for a signature, or {signature: text} for every compiled one
        whose pipeline has that stage, as :class:`~kaiojit.tools.display.Shown` text of
        ``language`` (a notebook shows it highlighted under the kernel's resources); with a
        ``comment`` leader, the text is headed by the kernel's resource line."""
        def shown(ck):
            text = sass_of(ck) if stage == "sass" else ck.stage(stage)
            return resources_header(ck, comment) + text if comment else text

        if signature is not None:
            ck = self.compile(signature)
            return Shown.wrap(shown(ck), language, lambda _: resource_summary(ck))
        compiled = {sig: ck for (spec, sig), ck in self._compiled.items()
                    if (spec.kind == "nvptx" if stage == "sass" else
                        stage in stage_names(spec.kind))}
        return Shown.wrap({sig: shown(ck) for sig, ck in compiled.items()}, language,
                          lambda sig: resource_summary(compiled[sig]))

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def inspect_kir(self, signature=None):
        """The typed kernel IR (a device function's too)."""
        if self.device:
            if signature is not None:
                return Shown.wrap(str(self._device_kir(
                    _as_signature(signature, self.py_func).args)), "kir")
            return Shown.wrap({T.Signature(a, k.return_type): str(k)
                               for a, k in self._device_cache.items()}, "kir")
        return self._inspect("kir", signature, language="kir")

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def inspect_llvm(self, signature=None):
        """Optimized LLVM IR: a str for one signature, {signature: str} for all compiled ones."""
        return self._inspect("llvm", signature, ";", "llvm")

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def inspect_ptx(self, signature=None):
        """PTX: a str for one signature, {signature: str} for all compiled for a GPU."""
        return self._inspect("ptx", signature, "//", "ptx")

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def inspect_sass(self, signature=None):
        """SASS through ptxas and nvdisasm or cuobjdump (see :mod:`kaiojit.tools.sass`)."""
        if self.device:
            raise DeviceFunctionError(f"Cannot inspect SASS of a device function: "
                                      f"{self.__qualname__} is compiled into the kernels that "
                                      "call it (inspect theirs)")
        return self._inspect("sass", signature, "//", "sass")

    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def resources(self, signature):
        """Registers per thread, static shared, local (spill) and constant bytes, and the
        largest block (:class:`kaiojit.tools.resources.Resources`): from the driver on a GPU, from
        ptxas's report of the sm_90 PTX without one."""
        from .launch.occupancy_api import kernel_resources

        return kernel_resources(self, signature)

    def occupancy(self, signature, block, shared: int = 0):
        """``kj.occupancy(self, signature, block, shared)``: blocks an SM holds at this block
        size, the occupancy fraction, what limits it, and a suggested block size."""
        from .launch.occupancy_api import occupancy

        return occupancy(self, signature, block, shared)

    # --- launching ------------------------------------------------------------------------------

    @outside_graphs
    def __getitem__(self, config):
        """The launcher of ``kernel[grid, block(, stream(, shared(, cluster)))]``: a
        :class:`Launcher`, or, once a launch of this configuration has a fast form, that plain
        function."""
        try:
            launcher = self._launchers.get(config)
        except TypeError:  # an unhashable configuration (lists): a launcher of its own
            launcher, cached = None, False
        else:
            cached = len(self._launchers) < 64
        if launcher is None:
            try:
                self._check_config(config)
                parsed = parse_launch_config(config)
            except (TypeError, ValueError) as e:  # shown at the user's kernel[...]; not
                # @user_facing, which would add a call to every launch
                __tracebackhide__ = True  # noqa: F841
                raise e.with_traceback(None) from None
            launcher = Launcher(self, *parsed, config if cached else None)
            if cached:
                self._launchers[config] = launcher
        return launcher

    def _check_config(self, config) -> None:
        """Checks of a new launch configuration beyond kaiojit's own (numba's dispatcher in
        ``kaiojit/cuda`` checks the dimensions as numba does); a TypeError or ValueError."""

    @outside_graphs
    @user_facing(errors=USER_ERRORS)  # a CompileError, a bad signature's TypeError
    def launch(self, *args, grid, block, shared_mem=0, stream=None, cluster=None):
        self._launch(grid, block, stream, shared_mem, args, cluster)

    @outside_graphs
    @user_facing(errors=USER_ERRORS)  # a bad thread count
    def forall(self, n: int, stream=None, shared_mem=0) -> ForallLauncher:
        """A 1-D launch covering ``n`` threads, block size chosen by occupancy."""
        if isinstance(n, bool) or not hasattr(n, "__index__"):
            raise LaunchError(f"kernel {self.__qualname__!r}: forall(n): n is the number of "
                              f"threads, an int; got {type(n).__name__} {n!r}")
        if n <= 0:
            raise LaunchError(f"forall({n}): the thread count must be positive")
        return ForallLauncher(self, n, stream, shared_mem)

    def __call__(self, *args, **kwargs):
        if self.device:
            raise TypeError(f"device function {self.__qualname__} can only be called from a kernel")
        raise TypeError(f"launch kernel {self.__qualname__} with a configuration: "
                        f"{self.__name__}[grid, block](...)")

    def _launch(self, grid, block, stream, shared_mem, args, cluster=None):
        loaded = self.loaded_kernel(args)
        loaded.launch(grid, block, stream, shared_mem, self.passed_args(args), cluster)

    def loaded_kernel(self, args):
        """The kernel loaded on the current backend for a launch with ``args``: typed,
        compiled and loaded at the first launch with their types, from the launch cache after."""
        try:
            loaded = self._launch_cache.get(self._launch_key(args))
        except TypeError:  # an argument kaiojit cannot type: _prepare names it
            loaded = None
        return loaded if loaded is not None else untraced(self._prepare, args)

    def _launch_key(self, args) -> tuple:
        """launch_key of the arguments the kernel is passed, plus the constexpr values."""
        if not self._constexpr_at:
            return launch_key(args)
        values = tuple((type(args[i]), repr(args[i])) for i in self._constexpr_at
                       if i < len(args))
        return (*launch_key(self.passed_args(args)), values)

    def passed_args(self, args):
        """What a launch passes the kernel: ``args`` without the constexpr ones (folded into
        the kernel, not passed)."""
        if not self._constexpr_at:
            return args
        return tuple(a for i, a in enumerate(args) if i not in self._constexpr_at)

    def _prepare(self, args):
        """First launch with these argument types: type, compile, load (then cached)."""
        rt = _runtime()
        if self.device:
            raise DeviceFunctionError(f"Cannot compile a device function as a kernel: "
                                      f"{self.__qualname__} is a device function (device=True); "
                                      "call it from a kernel")
        params = list(inspect.signature(self.py_func).parameters)
        if len(args) != len(params):
            raise ArgumentError(f"{self.__qualname__}() takes {len(params)} arguments "
                                f"({', '.join(params)}), got {len(args)}")
        arg_types = []
        for a, name in zip(args, params):
            try:
                arg_types.append(constexpr_type(a) if name in self.constexpr_params
                                 else rt.typeof(a))
            except TypeError as e:
                if not (self._eager and isinstance(a, int)):
                    raise ArgumentError(f"{self.__qualname__}(): parameter {name!r}: {e}"
                                        ) from None
                arg_types.append(T.int64)  # past int64: the declared width wraps it, as C does
        arg_types = tuple(arg_types)
        sig = self._match_eager(arg_types) if self._eager else T.Signature(arg_types)
        backend = rt.get_backend()
        rt.graph.forbid_in_capture(f"kernel {self.__qualname__!r}: its first launch with "
                                   f"argument types ({', '.join(map(str, sig.args))}) compiles "
                                   "and loads it")
        loaded = backend.load_kernel(self.compile(sig, backend.target_spec()))
        try:
            key = self._launch_key(args)
        except TypeError:
            return loaded
        with self._lock:
            self._launch_cache[key] = loaded
        return loaded

    def _match_eager(self, arg_types):
        sig = best_signature(self._eager, arg_types)
        if sig is not None:
            return sig
        sigs = ", ".join(str(s) for s in self._eager)
        got = ", ".join(str(a) for a in arg_types)
        which = ""
        if len(self._eager) == 1:  # one signature: name the parameter that does not fit
            params = list(inspect.signature(self.py_func).parameters)
            misfits = (f": parameter {name!r} is {p}, got {a}" for name, p, a
                       in zip(params, self._eager[0].args, arg_types) if not accepts(p, a))
            which = next(misfits, "")
        raise ArgumentError(f"No matching definition for argument type(s) ({got}): "
                            f"{self.__qualname__} was compiled for {sigs}; no signature "
                            f"accepts them{which}")


def constexpr_params(pyfunc, specialize, device: bool) -> tuple[str, ...]:
    """The parameters folded into the kernel: annotated ``kj.constexpr``, or named by
    ``@kj.jit(specialize=...)``."""
    if isinstance(specialize, str):
        specialize = (specialize,)
    params = inspect.signature(pyfunc).parameters
    where = f"{pyfunc.__code__.co_filename}:{pyfunc.__code__.co_firstlineno}"
    names = [n for n, p in params.items() if _is_constexpr_annotation(p.annotation)]
    for name in specialize:
        if name not in params:
            raise TypeError(f"{where}: @kj.jit(specialize=...) names {name!r}, which is not a "
                            f"parameter of {pyfunc.__qualname__}({', '.join(params)})")
        if name not in names:
            names.append(name)
    if names and device:
        raise TypeError(f"{where}: device function {pyfunc.__qualname__} has constexpr "
                        f"parameter(s) {', '.join(names)}: only kernels take them (a device "
                        "function is inlined, and its constant arguments folded)")
    return tuple(n for n in params if n in names)


def _is_constexpr_annotation(a) -> bool:
    if isinstance(a, str):
        return a.strip() in ("constexpr", "kj.constexpr", "kaiojit.constexpr")
    return a is T.ConstexprType


def constexpr_type(value) -> T.ConstexprType:
    """The type of a value given for a constexpr parameter (TypeError naming what it got)."""
    if isinstance(value, T.ConstexprType):
        return value
    try:
        return T.ConstexprType(value)
    except TypeError:
        raise TypeError("it is a kj.constexpr (a constant folded into the kernel) and takes a "
                        "Python bool, int or float, or a kaiojit scalar type; got "
                        f"{type(value).__name__}") from None


def _check_constexpr_signature(d: Dispatcher, sig: T.Signature) -> None:
    params = list(inspect.signature(d.py_func).parameters)
    for i in d._constexpr_at:
        if i < len(sig.args) and not isinstance(sig.args[i], T.ConstexprType):
            raise TypeError(f"{d.__qualname__}: parameter {params[i]!r} is a kj.constexpr; the "
                            f"signature must give its value, e.g. constexpr(32), not "
                            f"{sig.args[i]}")




def _specialize_device(dispatcher, arg_types, loc=None):
    return dispatcher._device_kir(arg_types, loc)


def _mangle_device(pyfunc, arg_types) -> str:
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


@user_facing
def _compile_user_facing(dispatcher: Dispatcher, sig: T.Signature, spec: TargetSpec,
                         device: bool = False) -> CompiledKernel:
    return compile_kernel(dispatcher.py_func, sig, dispatcher.options, spec,
                          _specialize_device, device=device)


def _compile_cached(dispatcher: Dispatcher, sig: T.Signature, spec: TargetSpec) -> CompiledKernel:
    """A compile through the disk cache (``cache=True``): a hit runs no stage."""
    from . import diskcache
    from .options import VERSION

    lookup = diskcache.lookup_key(dispatcher.py_func, sig, dispatcher.options, spec, VERSION)
    found = None if lookup is None else diskcache.load_kernel(
        lookup, dispatcher.py_func, sig, dispatcher.options, spec)
    if found is not None:
        ck, coarse_key = found
    else:
        ck = _compile_user_facing(dispatcher, sig, spec)
        coarse_key = None if lookup is None else diskcache.store_kernel(lookup, ck)
    if coarse_key is not None:  # compiled (and kept) when a launch first takes it
        diskcache.keep_coarse_entry(coarse_key, ck)
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


__all__ = ["Dispatcher", "annotations_signature", "CompileError"]


def _rebuilt(cls: type, state: tuple, options: CompileOptions, device: bool, signatures: tuple,
             specialize: tuple) -> Dispatcher:
    """A pickled dispatcher, of its class (numba's ``CUDADispatcher`` stays one)."""
    dispatcher = Dispatcher(rebuild_function(state), options, device=device,
                            signatures=signatures, specialize=specialize)
    dispatcher.__class__ = cls
    return dispatcher
