"""The fast launch of ``kj.autotune``'s chosen configurations.

A call of an autotuned kernel binds its arguments by name, computes its key (the key
parameters' values and every argument's type), looks up the chosen config, merges the config's
constants and launches: several microseconds. Once a positional call has launched that way,
its launch is specialized like ``kernel[grid, block](...)``'s
(:mod:`kaiojit.runtime.native.fastlaunch`),
with the config's constants written as constants and its constexpr values compiled in, and
kept under a *fast key*: the stream, the number of arguments and the key parameters' values
(an array's shape, a scalar's value). A later call with that fast key is one dict lookup and
the fast form, which tests everything else the choice depends on (the arguments' kinds); when
the config's grid is a function, it is called per launch and the fast form kept per grid.
Anything the fast form does not match goes through the autotuner's general path, which
chooses (tuning if the key is new) and launches as before.

What ``FastCalls`` reads of its tuner (:class:`kaiojit.lib.autotuner.Autotuner`): ``kernel``
(the ``@kj.jit`` object, through the Dispatcher's public interface for launchers), ``params``,
``call_params``, ``key`` and ``grid``; ``_args_for(config, values)`` (the kernel's arguments and
grid under a config) and ``_call(args, stream, kwargs)`` (the general path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_FAST_KEYS = 64  # fast keys kept per autotuned kernel (distinct sizes, streams)
MAX_REBUILDS_PER_KEY = 8  # a fast key fed ever-changing argument kinds stops specializing


class FastCalls:
    """The fast forms of one autotuned kernel, by fast key. ``find(args, stream)`` is a
    generated function: the fast form for this call, or None (IndexError or TypeError for
    calls it does not cover: too few arguments, unhashable values)."""

    __slots__ = ("builds", "entries", "fast_key", "find", "tuner")

    def __init__(self, tuner: Any):
        self.tuner = tuner
        # fast key -> (grid function or None, the fast form or {grid: fast form})
        self.entries: dict[tuple, tuple[Callable | None, Any]] = {}
        self.builds: dict[tuple, int] = {}
        key_at = [tuner.call_params.index(name) for name in tuner.key]
        parts = ["stream", "len(args)"]
        lines = ["def fast_key(args, stream):"]
        for i in key_at:
            lines += [f"    k{i} = args[{i}]", f"    c{i} = k{i}.__class__"]
            parts.append(f"(k{i} if c{i} is int or c{i} is float or c{i} is bool "
                         f"else (k{i}.shape if getattr(k{i}, 'ndim', 0) else k{i}))")
        lines.append(f"    return ({', '.join(parts)},)")
        lines += [
            "def find(args, stream):",
            *lines[1:-1],
            f"    entry = ENTRIES.get(({', '.join(parts)},))",
            "    if entry is None:",
            "        return None",
            "    grid_of, fast = entry",
            "    if grid_of is None:",
            "        return fast",
            "    return fast.get(grid_of(args))",
        ]
        env: dict[str, Any] = {"ENTRIES": self.entries}
        exec(compile("\n".join(lines), f"<kaiojit autotune fast key of {tuner.kernel.__qualname__}>",
                     "exec"), env)
        self.find = env["find"]
        self.fast_key = env["fast_key"]

    def learn(self, args: tuple, stream: Any, config: Any) -> None:
        """After a general launch of ``args`` (positional) with ``config``: build and keep
        its fast form."""
        tuner = self.tuner
        try:
            fkey = self.fast_key(args, stream)
            hash(fkey)
        except (IndexError, TypeError):
            return
        builds = self.builds.get(fkey, 0)
        if builds >= MAX_REBUILDS_PER_KEY or (
                fkey not in self.entries and len(self.entries) >= MAX_FAST_KEYS):
            return
        self.builds[fkey] = builds + 1
        values = dict(zip(tuner.call_params, args))
        full, grid = tuner._args_for(config, values)
        grid_of = None
        grid_spec = config.grid if config.grid is not None else tuner.grid
        if callable(grid_spec):
            grid_of = _grid_function(grid_spec, tuner.call_params, config.constants)
        entry = self.entries.get(fkey)
        forms = entry[1] if entry is not None and entry[0] is not None else {}
        if grid_of is None:
            previous = entry[1] if entry is not None and entry[0] is None else None
        else:
            try:
                previous = forms.get(grid)
            except TypeError:  # an unhashable grid (a list): no fast form
                return
        # a call the new form does not match tries the form it replaces (arguments of other
        # kinds under the same fast key), and the oldest one the general path
        fallback = self._fallback(stream) if previous is None else _handing_to(previous)
        fast = _build(tuner, full, grid, config, stream, fallback)
        if fast is None:
            return
        if grid_of is None:
            self.entries[fkey] = (None, fast)
            return
        if len(forms) >= MAX_FAST_KEYS:
            forms.clear()
        forms[grid] = fast
        self.entries[fkey] = (grid_of, forms)

    def _fallback(self, stream: Any) -> Callable[[tuple, Any], None]:
        tuner = self.tuner

        def fallback(args: tuple, fast: Any) -> None:
            return tuner._call(args, stream, {})
        return fallback


def _handing_to(previous: Callable[..., None]) -> Callable[[tuple, Any], None]:
    def fallback(args: tuple, fast: Any) -> None:
        return previous(*args)
    return fallback


def _grid_function(grid: Callable, names: tuple[str, ...], constants: dict
                   ) -> Callable[[tuple], Any]:
    """The grid of a call from its positional arguments (the config's constants included),
    as a generated function building the named dict in one expression."""
    env: dict[str, Any] = {"GRID": grid, "CONSTANTS": constants}
    items = [f"{name!r}: args[{i}]" for i, name in enumerate(names)]
    items += [f"{name!r}: CONSTANTS[{name!r}]" for name in constants]
    text = f"def grid_of(args):\n    return GRID({{{', '.join(items)}}})"
    exec(compile(text, "<kaiojit autotune grid>", "exec"), env)
    return env["grid_of"]


def _build(tuner: Any, full: list, grid: Any, config: Any, stream: Any,
           fallback: Callable[[tuple, Any], None]) -> Any:
    """The kernel's fast form for a call of the autotuner's parameters, the config's
    constants fixed."""
    from ..runtime.native.fastlaunch import FastPlan

    kernel = tuner.kernel
    loaded = kernel.loaded_kernel(tuple(full))
    bind = tuple(tuner.call_params.index(p) if p in tuner.call_params else None
                 for p in tuner.params)
    plan = FastPlan(tuple(full), bind, frozenset(kernel.constexpr_positions),
                    len(tuner.call_params), fallback)
    return loaded.fast_path(grid, config.block, stream, config.shared, plan)
