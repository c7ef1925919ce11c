"""``kj.autotune``: try launch configurations on the first call per key, keep the fastest.

    @kj.autotune(configs=[kj.Config(block=(32, 8), constants={"ROWS": 8}),
                          kj.Config(block=(32, 4), constants={"ROWS": 4})],
                 key=["n"], grid=lambda args: (args["n"] // 32, args["n"] // 32))
    @kj.jit
    def transpose(out, a, n, ROWS): ...

    transpose(out, a, n)          # ROWS, grid and block come from the chosen config

On the first call with a new key (the values of the ``key`` parameters: a scalar's value, an
array's shape, plus the types of every argument) each config is launched on copies of the
arrays the kernel may write, the results are checked to be identical across configs, and the
configs are timed (CUDA events; any backend's events, or an injected ``timer``). The fastest
is kept in memory and in a small JSON file under kaiojit's cache directory, so a later
process reads its choice instead of tuning again. ``KAIOJIT_AUTOTUNE_LOG=1`` (read when the
decorator runs) prints what was tried.

Which arrays a trial may write: ``outputs=("out",)`` names them; without it every array
argument is copied for each trial and compared after it (arrays the kernel does not write
compare equal, so the check is the same, at the cost of copying the inputs too).

Constants name parameters of the kernel. A parameter declared ``kj.constexpr`` (or named by
``@kj.jit(specialize=...)``) is folded into the code, one compile per value, so a config can
choose a tile size that sizes shared arrays and unrolls loops; any other parameter is passed as
an ordinary argument.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import linecache
import logging
import statistics
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import env
from .. import types as kt
from ..errors import (
    CompileError,
    CudaError,
    KaiojitError,
    KernelError,
    LaunchError,
    SourceLocation,
    user_facing,
)
from ..launch import FastCalls, outside_graphs
from ..logs import log as logger

# driver errors a launch (or loading a config's specialization) returns at once for a
# configuration the kernel cannot run with: too many resources, or PTX the JIT refuses (too
# much static shared memory for a constexpr tile)
_LAUNCH_FAILURES = frozenset({"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_VALUE",
                              "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
                              "CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_INVALID_IMAGE"})

Timer = Callable[[Callable[[], None], "Config", Any], float]


class ConfigError(KaiojitError, ValueError):
    """A bad ``kj.autotune`` or ``kj.Config`` argument, located at the line that wrote it."""

    def __init__(self, message: str, loc: SourceLocation | None):
        self.message = message
        self.loc = loc
        text = message if loc is None else f"{loc}: {message}"
        excerpt = loc.excerpt() if loc is not None else ""
        super().__init__(f"{text}\n{excerpt}" if excerpt else text)


def _call_site(depth: int) -> SourceLocation | None:
    """Where the caller ``depth`` frames up is calling from: the call expression's start,
    widened over a dotted prefix (``kj.Config(`` rather than ``Config(``)."""
    frame = sys._getframe(depth + 1)
    code, lasti = frame.f_code, frame.f_lasti
    line, col, end_line, end_col = frame.f_lineno, 0, None, None
    positions = getattr(code, "co_positions", None)
    if positions is not None:
        pos = list(positions())[lasti // 2]
        if pos[0] is not None and pos[2] is not None:
            line, end_line, col, end_col = pos
    text = linecache.getline(code.co_filename, line)
    while col > 0 and (text[col - 1].isidentifier() or text[col - 1].isdigit()
                       or text[col - 1] == "."):
        col -= 1
    if end_line != line or end_col is None:
        end_col = len(text.rstrip())
    return SourceLocation(code.co_filename, line, col, text, end_col)


@dataclass(frozen=True, eq=False, repr=False)
class Config:
    """One launch configuration to try: ``block``, ``grid`` (a tuple, or a function of the
    call's arguments by name, constants included), ``constants`` (values of kernel parameters
    the config fixes) and dynamic ``shared`` memory bytes."""

    block: Any
    grid: Any = None
    constants: Mapping[str, Any] = field(default_factory=dict)
    shared: int = 0
    where: SourceLocation | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "constants", dict(self.constants))
        if self.where is None:  # __post_init__ <- __init__ <- the user's kj.Config(...)
            object.__setattr__(self, "where", _call_site(2))

    def describe(self) -> str:
        parts = [f"block={self.block!r}"]
        if self.grid is not None:
            # a callable by its name alone: its qualname differs across Python versions
            # (3.12 inlines comprehensions), and the disk cache stores this text
            grid = self.grid if not callable(self.grid) else getattr(
                self.grid, "__name__", repr(self.grid))
            parts.append(f"grid={grid}")
        parts += [f"{k}={v!r}" for k, v in self.constants.items()]
        if self.shared:
            parts.append(f"shared={self.shared}")
        return "Config(" + ", ".join(parts) + ")"

    __str__ = __repr__ = describe


def autotune(configs: Sequence[Config], key: Sequence[str] = (), *, grid: Any = None,
             outputs: Sequence[str] | None = None, warmup: float = 25.0, rep: float = 100.0,
             timer: Timer | None = None, check: bool = True, cache: bool = True
             ) -> Callable[[Any], Autotuner]:
    """Decorate a ``@kj.jit`` kernel to choose among ``configs`` on the first call per key.

    ``grid``: the grid of configs that give none. ``warmup`` and ``rep``: milliseconds of
    launches before and while timing each config. ``timer(run, config, stream)`` replaces
    the CUDA-event timer (returns milliseconds). ``check=False`` skips comparing results.
    ``cache=False`` keeps choices in memory only.
    """
    where = _call_site(1)
    if isinstance(key, str):
        key = (key,)
    log = _log_from_env()

    @user_facing(errors=(ConfigError,))
    def decorate(kernel: Any) -> Autotuner:
        return Autotuner(kernel, list(configs), tuple(key), grid, outputs, warmup, rep,
                         timer, check, cache, log, where)
    return decorate


class Autotuner:
    """A kernel launched with the fastest of its configs for each key; call it with the
    kernel's arguments minus the constants the configs fix (``stream=`` by keyword)."""

    def __init__(self, kernel: Any, configs: list[Config], key: tuple[str, ...], grid: Any,
                 outputs: Sequence[str] | None, warmup: float, rep: float,
                 timer: Timer | None, check: bool, cache: bool, log: bool,
                 where: SourceLocation | None):
        if not getattr(kernel, "_kaiojit_dispatcher", False) or kernel.device:
            raise ConfigError("kj.autotune decorates a @kj.jit kernel: put @kj.autotune(...) "
                              "above @kj.jit", where)
        self.kernel = kernel
        self.params = tuple(inspect.signature(kernel.py_func).parameters)
        _check_configs(configs, self.params, grid, where, kernel)
        for what, names in (("key", key), ("outputs", outputs or ())):
            for name in names:
                if name not in self.params:
                    raise ConfigError(f"{what} names {name!r}, which is not a parameter of "
                                      f"{kernel.__qualname__}({', '.join(self.params)})", where)
        constants = set(configs[0].constants)
        for name in key:
            if name in constants:
                raise ConfigError(f"key names {name!r}, which the configs set: a key is an "
                                  "argument of the call", where)
        self.configs = configs
        self.key = key
        self.grid = grid
        self.outputs = None if outputs is None else tuple(outputs)
        self.check, self.cache, self.log = check, cache, log
        self.timer = timer or functools.partial(event_timer, warmup=warmup, rep=rep)
        self.call_params = tuple(p for p in self.params if p not in constants)
        self.chosen: dict[Any, Config] = {}
        self.history: dict[Any, list[tuple[Config, float | None, str]]] = {}
        self._lock = threading.Lock()
        self._fast = FastCalls(self)
        self._find = self._fast.find
        self._disk_base = _disk_base(kernel, configs, key, grid) if cache else ""
        self.__name__ = kernel.__name__
        self.__qualname__ = kernel.__qualname__
        self.__doc__ = kernel.__doc__

    def __repr__(self) -> str:
        return f"<kaiojit autotuned kernel {self.__qualname__} ({len(self.configs)} configs)>"

    def __getitem__(self, config: Any) -> Any:
        raise TypeError(f"{self.__qualname__} is autotuned: it chooses its own launch "
                        f"configuration; call it as {self.__name__}(...)")

    def __getattr__(self, name: str) -> Any:  # inspect_ptx, signatures, ...: the kernel's
        kernel = self.__dict__.get("kernel")
        if kernel is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(kernel, name)

    # --- calling ---------------------------------------------------------------------------

    @outside_graphs
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Launch with the config chosen for these arguments (``stream=`` by keyword)."""
        stream = kwargs.pop("stream", None) if kwargs else None
        if not kwargs:
            try:
                fast = self._find(args, stream)
            except (IndexError, TypeError):  # too few arguments, unhashable values
                fast = None
            if fast is not None:
                return fast(*args)
        return self._call(args, stream, kwargs)

    def _call(self, args: tuple, stream: Any, kwargs: dict) -> None:
        """The general path: bind, key, choose (tuning a new key), launch; then keep the
        launch's fast form (:mod:`kaiojit.launch.autotune_launch`)."""
        values = self._bind(args, kwargs)
        key = self._key_of(values)
        config = self.chosen.get(key) or self._choose(key, values, stream)
        self._launch(config, values, stream)
        if not kwargs:
            self._fast.learn(args, stream, config)

    def best_config(self, *args: Any, stream: Any = None, **kwargs: Any) -> Config:
        """The config chosen for these arguments (tuning first if their key is new)."""
        values = self._bind(args, kwargs)
        key = self._key_of(values)
        return self.chosen.get(key) or self._choose(key, values, stream)

    def _bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        names = self.call_params
        if len(args) > len(names):
            raise TypeError(f"{self.__qualname__}() takes {len(names)} arguments "
                            f"({', '.join(names)}), got {len(args)}")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names or name in values:
                why = "set by the autotune configs" if name in self.params else (
                    "given twice" if name in values else "not a parameter")
                raise TypeError(f"{self.__qualname__}(): argument {name!r} is {why}")
            values[name] = value
        if len(values) != len(names):
            missing = ", ".join(n for n in names if n not in values)
            raise TypeError(f"{self.__qualname__}() is missing argument(s): {missing}")
        return values

    def _key_of(self, values: dict[str, Any]) -> tuple:
        from ..runtime import typeof

        folded = getattr(self.kernel, "constexpr_params", ())
        return (tuple(_key_value(values[name]) for name in self.key),
                tuple(f"constexpr({values[name]!r})" if name in folded
                      else str(_unaligned(typeof(values[name]))) for name in self.call_params))

    def _args_for(self, config: Config, values: dict[str, Any]) -> tuple[list, Any]:
        named = dict(values, **config.constants)
        grid = config.grid if config.grid is not None else self.grid
        if callable(grid):
            grid = grid(named)
        return [named[p] for p in self.params], grid

    def _launch(self, config: Config, values: dict[str, Any], stream: Any) -> None:
        args, grid = self._args_for(config, values)
        self.kernel[grid, config.block, stream, config.shared](*args)

    # --- choosing --------------------------------------------------------------------------

    def _choose(self, key: tuple, values: dict[str, Any], stream: Any) -> Config:
        with self._lock:
            config = self.chosen.get(key)
            if config is None:
                config = self._from_disk(key)
            if config is None:
                config = self._tune(key, values, stream)
                self._to_disk(key, config)
            self.chosen[key] = config
        return config

    @user_facing(errors=(CompileError,))
    def _tune(self, key: tuple, values: dict[str, Any], stream: Any) -> Config:
        from ..runtime import CudaGraph, synchronize

        CudaGraph.forbid_in_capture(f"kernel {self.__qualname__!r}: autotuning it for a new key times "
                          "its configurations")
        trial = _TrialArrays(values, self.outputs, self.__qualname__)
        tried: list[tuple[Config, float | None, str]] = []
        reference: tuple[Config, dict] | None = None
        for config in self.configs:
            trial.restore()
            args, grid = self._args_for(config, trial.values)
            launcher = self.kernel[grid, config.block, stream, config.shared]
            try:
                launcher(*args)
                synchronize()
            except LaunchError as e:
                tried.append((config, None, f"LaunchError: {e}"))
                self._progress(key, tried)
                continue
            except CudaError as e:
                if e.name not in _LAUNCH_FAILURES and "too much shared data" not in str(e):
                    raise
                tried.append((config, None, f"CudaError: {e}"))
                self._progress(key, tried)
                continue
            if self.check:
                results = trial.results()
                if reference is None:
                    reference = (config, results)
                else:
                    _compare(self.__qualname__, reference, config, results)
            ms = float(self.timer(lambda: launcher(*args), config, stream))
            tried.append((config, ms, ""))
            self._progress(key, tried)
        self.history[key] = tried
        timed = [(ms, i) for i, (_, ms, _) in enumerate(tried) if ms is not None]
        if self.log or _log_from_env():
            self._report(key, tried)
        if not timed:
            why = "\n".join(f"  {c}: {note}" for c, _, note in tried)
            raise LaunchError(f"kj.autotune: no config of {self.__qualname__} could be "
                              f"launched:\n{why}")
        return tried[min(timed)[1]][0]

    def _progress(self, key: tuple, tried: list[tuple[Config, float | None, str]]) -> None:
        """The ``kaiojit`` logger's line for the config just tried: its time and the best so
        far (``kj.set_log_level("INFO")`` shows them, in a terminal or under a notebook cell)."""
        if not logger.isEnabledFor(logging.INFO):
            return
        config, ms, note = tried[-1]
        timed = [t for t in tried if t[1] is not None]
        best = min(timed, key=lambda t: t[1]) if timed else None
        result = f"{ms:.4f} ms" if ms is not None else f"skipped ({note.splitlines()[0]})"
        so_far = f"; best so far {best[1]:.4f} ms: {best[0]}" if best is not None else ""
        logger.info("autotune %s: config %d/%d %s: %s%s", self._describe_key(key), len(tried),
                 len(self.configs), config, result, so_far)

    def _report(self, key: tuple, tried: list[tuple[Config, float | None, str]]) -> None:
        lines = [f"kaiojit autotune: {self._describe_key(key)}"]
        for config, ms, note in tried:
            lines.append(f"  {config}: " + (f"{ms:.4f} ms" if ms is not None
                                            else f"skipped ({note})"))
        timed = [t for t in tried if t[1] is not None]
        if timed:
            best = min(timed, key=lambda t: t[1])
            lines.append(f"  chose {best[0]}")
        print("\n".join(lines), file=sys.stderr)

    def _describe_key(self, key: tuple) -> str:
        names = ", ".join(f"{n}={v!r}" for n, v in zip(self.key, key[0]))
        return f"{self.__qualname__}[{names}]({', '.join(key[1])})"

    # --- the disk cache --------------------------------------------------------------------

    def _disk_key(self, key: tuple) -> str:
        from ..runtime import get_backend

        backend = get_backend()
        cc = backend.compute_capability(backend.current_device())
        return hashlib.sha256(
            f"{self._disk_base}\0{backend.name}\0{cc}\0{key!r}".encode()).hexdigest()[:40]

    def _from_disk(self, key: tuple) -> Config | None:
        if not self.cache:
            return None
        from ..cache import load_json

        try:
            entry = load_json(self._disk_key(key), "autotune")
            config = self.configs[entry["index"]]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        if entry.get("config") != config.describe():
            return None
        if self.log or _log_from_env():
            print(f"kaiojit autotune: {self._describe_key(key)}: {config} (from the disk "
                  "cache)", file=sys.stderr)
        return config

    def _to_disk(self, key: tuple, config: Config) -> None:
        if not self.cache:
            return
        from ..cache import store_json

        entry = {"index": self.configs.index(config), "config": config.describe(),
                 "key": repr(key),
                 "tried": [(c.describe(), ms, note) for c, ms, note in self.history[key]]}
        store_json(self._disk_key(key), entry, "autotune", what="autotuned choice",
                   name=self.__qualname__)


def _log_from_env() -> bool:
    """``KAIOJIT_AUTOTUNE_LOG=1``: print each tuning's table to stderr (read at every tuning,
    so it may be set after the decorator ran; ``kj.set_log_level("INFO")`` shows progress)."""
    return bool(env.get("KAIOJIT_AUTOTUNE_LOG"))


def _check_configs(configs: list[Config], params: tuple[str, ...], grid: Any,
                   where: SourceLocation | None, kernel: Any = None) -> None:
    folded = getattr(kernel, "constexpr_params", ())
    if not configs:
        raise ConfigError("kj.autotune needs at least one kj.Config", where)
    for config in configs:
        if not isinstance(config, Config):
            raise ConfigError(f"configs must be kj.Config objects, got {config!r}", where)
    first = set(configs[0].constants)
    for config in configs:
        for name in config.constants:
            if name not in params:
                raise ConfigError(f"{config} sets {name!r}, which is not a parameter of the "
                                  f"kernel ({', '.join(params)})", config.where)
            if name in folded:
                try:
                    kernel.constexpr_type(config.constants[name])
                except TypeError as e:
                    raise ConfigError(f"{config} sets {name!r}: {e}", config.where) from None
        if set(config.constants) != first:
            raise ConfigError(f"{config} sets {sorted(config.constants)} but "
                              f"{configs[0]} sets {sorted(first)}: every config must set the "
                              "same constants", config.where)
        if config.grid is None and grid is None:
            raise ConfigError(f"{config} has no grid, and kj.autotune has no grid= for it",
                              config.where)


def _unaligned(t: Any) -> Any:
    """An argument's type without its alignment: a NumPy array and its (aligned) device copy
    share one choice."""
    return t.with_align(0) if isinstance(t, kt.ArrayType) else t


def _key_value(value: Any) -> Any:
    """What a key parameter's value contributes: an array's shape, a scalar's value."""
    shape = getattr(value, "shape", None)
    if shape is not None and getattr(value, "ndim", 0):
        return tuple(int(n) for n in shape)
    if hasattr(value, "item"):
        return value.item()
    return value


def _disk_base(kernel: Any, configs: list[Config], key: tuple, grid: Any) -> str:
    """What a stored choice depends on besides the key: the kernel, its options, the configs."""
    from .. import __version__
    from ..cache import function_fingerprint

    parts = [__version__, function_fingerprint(kernel.py_func), repr(kernel.options), repr(key)]
    for g in [grid] + [c.grid for c in configs]:
        parts.append(function_fingerprint(g) if inspect.isfunction(g) else repr(g))
    parts += [c.describe() for c in configs]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# --- trial arrays -------------------------------------------------------------------------------


class _TrialArrays:
    """The arguments of the trial launches: copies of the arrays a trial may write, restored
    from the originals before each config; NumPy arrays go to the device once."""

    def __init__(self, values: dict[str, Any], outputs: tuple[str, ...] | None, kernel: str):
        import numpy as np

        from ..runtime import as_device_array, device_array_like, to_device

        self.values = dict(values)
        self.copies: list[tuple[str, Any, Any]] = []  # (name, trial array, source)
        for name, value in values.items():
            is_numpy = isinstance(value, np.ndarray)
            is_device = not is_numpy and (hasattr(value, "__cuda_array_interface__")
                                          or hasattr(value, "__dlpack__"))
            if not (is_numpy or is_device):
                continue
            written = outputs is None or name in outputs
            if is_numpy:
                self.values[name] = to_device(value)
                if written:
                    self.copies.append((name, self.values[name], value))
                continue
            if not written:
                continue
            source = as_device_array(value)
            if not (source.is_c_contiguous or source.is_f_contiguous):
                raise TypeError(f"kj.autotune: {kernel}(): parameter {name!r} is a strided "
                                "view; the trials copy the arrays a kernel may write and need "
                                "them contiguous (or leave it out of outputs= if the kernel "
                                "only reads it)")
            self.values[name] = device_array_like(source)
            self.copies.append((name, self.values[name], source))

    def restore(self) -> None:
        for _, trial, source in self.copies:
            trial.copy_to_device(source)

    def results(self) -> dict[str, Any]:
        return {name: trial.copy_to_host() for name, trial, _ in self.copies}


def _compare(kernel: str, reference: tuple[Config, dict], config: Config,
             results: dict[str, Any]) -> None:
    import numpy as np

    ref_config, ref = reference
    for name, got in results.items():
        want = ref[name]
        bits = np.dtype(f"u{want.dtype.itemsize}")
        differ = want.view(bits) != got.view(bits)
        if differ.any():
            at = np.unravel_index(int(np.argmax(differ)), differ.shape)
            index = at[0] if len(at) == 1 else tuple(int(i) for i in at)
            raise KernelError(
                f"kj.autotune: {kernel} wrote different results to {name!r} with {ref_config} "
                f"and with {config}: {int(differ.sum())} of {differ.size} elements differ, "
                f"the first at [{index}] ({want[at]!r} and {got[at]!r}); a kernel whose "
                "result depends on its configuration cannot be tuned safely (check=False "
                "skips this check)")


# --- timing -------------------------------------------------------------------------------------


def event_timer(run: Callable[[], None], config: Config, stream: Any,
                warmup: float = 25.0, rep: float = 100.0) -> float:
    """Median milliseconds of ``run()`` by events on ``stream``: ``warmup`` ms of launches,
    then about ``rep`` ms of timed launches (between 5 and 200)."""
    from ..bench import bench_times

    return statistics.median(bench_times(run, warmup, rep, flush_l2=False, stream=stream,
                                         max_calls=200))

