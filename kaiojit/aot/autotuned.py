"""Autotuned kernels (``@kj.autotune``) through export and load.

An export cannot time anything on the machine that will run it, so it carries every config:
for each exported signature of the call (the kernel's arguments minus the constants the configs
set) one compile per config, the config's constants folded in (``kj.constexpr``) or passed as
arguments. The manifest records the configs (block, grid when it is fixed, dynamic shared
memory, constants) and every choice the tuner had made in the exporting process, by signature
and key; the loader launches the recorded choice for a call's key, and for a key never tuned
before the export, the signature's default (the choice of the last key tuned for it, else the
first config). A C program gets one launch function per config, ``..._config<i>``, whose
comment says which the tuner chose.

This module imports neither the tuner nor the compiler at import time: the export side is
handed the tuner; the load side imports :mod:`kaiojit.lib.autotuner` only for its key rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kaiojit import types as kt
from kaiojit.aot.arguments import argument_types
from kaiojit.aot.manifest import USER_ERRORS, Entry
from kaiojit.errors import user_facing
from kaiojit.overloads import accepts as _accepts

# --- export -------------------------------------------------------------------------------------


def is_autotuned(kernel: Any) -> bool:
    from kaiojit.lib.autotuner import Autotuner

    return isinstance(kernel, Autotuner)


def call_signature(tuner: Any, sig: Any) -> kt.Signature:
    """``sig`` (a string or a Signature) as the signature of a call of ``tuner``: one type per
    argument it is called with, the configs' constants left out."""
    parsed = kt.parse_signature(sig) if isinstance(sig, str) else sig
    if not isinstance(parsed, kt.Signature):
        raise TypeError(f"{tuner.__qualname__}: a signature is a string or a kaiojit "
                        f"Signature, got {sig!r}")
    if len(parsed.args) != len(tuner.call_params):
        raise TypeError(f"{tuner.__qualname__}() is called with {len(tuner.call_params)} "
                        f"arguments ({', '.join(tuner.call_params)}; the configs set "
                        f"{', '.join(tuner.configs[0].constants) or 'none'}), the signature "
                        f"gives {len(parsed.args)}")
    return parsed


def config_signature(tuner: Any, call: kt.Signature, config: Any) -> kt.Signature:
    """The kernel's full signature for ``call`` under ``config``: a constexpr constant as its
    value's type (folded in), any other constant as the type of its value."""
    from kaiojit.dispatcher import constexpr_type
    from kaiojit.runtime import typeof

    given = dict(zip(tuner.call_params, call.args))
    folded = getattr(tuner.kernel, "constexpr_params", ())
    for name, value in config.constants.items():
        given[name] = constexpr_type(value) if name in folded else typeof(value)
    return kt.Signature(tuple(given[p] for p in tuner.params), call.return_type)


def _json_value(value: Any, what: str) -> Any:
    if hasattr(value, "item") and not isinstance(value, (bool, int, float)):
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, kt.ScalarType):
        return {"dtype": value.name}
    raise TypeError(f"{what} is {value!r}: an export records bools, ints, floats and dtypes")


def _fixed(value: Any) -> Any:
    """A block or grid as the manifest holds it: an int or a list; None for a function."""
    if value is None or callable(value):
        return None
    return list(value) if isinstance(value, (tuple, list)) else int(value)


def tuning_record(tuner: Any, calls: list[kt.Signature]) -> dict:
    """The manifest's record of ``tuner``: its parameters, key, configs and the choices it had
    made for keys of the exported ``calls``."""
    configs = []
    for config in tuner.configs:
        grid = config.grid if config.grid is not None else tuner.grid
        configs.append({
            "text": config.describe(), "block": _fixed(config.block), "grid": _fixed(grid),
            "grid_function": getattr(grid, "__name__", "grid") if callable(grid) else "",
            "shared": int(config.shared),
            "constants": {n: _json_value(v, f"{config}: constant {n!r}")
                          for n, v in config.constants.items()}})
    choices = []
    for (key_values, arg_types), config in tuner.chosen.items():
        try:
            types = [kt.parse_type(t) for t in arg_types]
        except ValueError:  # a type no signature can spell: no exported call takes it
            continue
        for call in calls:
            if all(_accepts(p, t) for p, t in zip(call.args, types)):
                choices.append({"signature": str(call), "index": tuner.configs.index(config),
                                "key": _jsonable(key_values)})
                break
    return {"params": list(tuner.params), "call_params": list(tuner.call_params),
            "key": list(tuner.key), "configs": configs, "choices": choices}


def _jsonable(key_values: tuple) -> list:
    return json.loads(json.dumps(list(key_values)))


# --- load ---------------------------------------------------------------------------------------


class ExportedAutotuned:
    """An exported autotuned kernel: called as the tuner is, ``kernel(*args, stream=...)``,
    it launches the config the tuner chose for the call's key (or the signature's default)."""

    def __init__(self, name: str, entries: list[Entry], record: dict,
                 kernel_of: Callable[[list[Entry]], Any]):
        """``kernel_of(entries)``: the loader's kernel launching those entries (one config's
        signatures)."""
        self.__name__ = name
        self.record = record
        self.configs: list[dict] = record["configs"]
        self.call_params: tuple[str, ...] = tuple(record["call_params"])
        self.key: tuple[str, ...] = tuple(record["key"])
        self.signatures = sorted({e.autotune["call_signature"] for e in entries},
                                 key=[e.autotune["call_signature"] for e in entries].index)
        self._calls = [kt.parse_signature(s) for s in self.signatures]
        self._per_config = [kernel_of([e for e in entries if e.autotune["index"] == i])
                            for i in range(len(self.configs))]
        self._arg_names = {i: k.entries[0].arg_names for i, k in enumerate(self._per_config)}
        self._chosen: dict[tuple[str, str], int] = {}
        self._key_at = [self.call_params.index(k) for k in self.key]
        self._fast: dict[tuple, Any] = {}  # _fast_key -> the fast form of its launch
        self._default: dict[str, int] = {}
        for choice in record["choices"]:
            self._chosen[(choice["signature"], json.dumps(choice["key"]))] = choice["index"]
            self._default[choice["signature"]] = choice["index"]

    def __repr__(self) -> str:
        return (f"<exported autotuned kernel {self.__name__} ({len(self.configs)} configs): "
                f"{'; '.join(self.signatures)}>")

    @user_facing(errors=USER_ERRORS)
    def __getitem__(self, config: Any) -> Any:
        raise TypeError(f"{self.__name__} is autotuned: it launches the config its tuner chose; "
                        f"call it as {self.__name__}(...)")

    @user_facing(errors=USER_ERRORS)
    def best_config(self, *args: Any) -> dict:
        """The config (as the manifest records it) a call with ``args`` launches."""
        return self.configs[self._index_for(args)]

    @user_facing(errors=USER_ERRORS)
    def __call__(self, *args: Any, stream: Any = None, grid: Any = None) -> None:
        try:
            fast = self._fast.get(self._fast_key(args, stream, grid))
        except (IndexError, TypeError):  # too few arguments, an unhashable value: general
            fast = None
        if fast is not None:
            return fast(*args)
        return self._general(args, stream, grid)

    def _fast_key(self, args: tuple, stream: Any, grid: Any) -> tuple:
        """What the choice of config depends on beyond the arguments' kinds (which the fast
        form tests): the stream, the grid, the argument count and the key parameters' values
        (an array's shape, a scalar's value), as the JIT's autotuner keys its fast forms."""
        parts = [stream, grid, len(args)]
        for i in self._key_at:
            a = args[i]
            parts.append(a if a.__class__ in (int, float, bool) else
                         (a.shape if getattr(a, "ndim", 0) else a))
        key = tuple(parts)
        hash(key)
        return key

    def _general(self, args: tuple, stream: Any, grid: Any) -> None:
        """Choose the config, launch it, and keep the launch's fast form (the kernel's, for
        calls mapped to its parameters with the config's constants fixed)."""
        from kaiojit.runtime.native.fastlaunch import FastPlan

        index = self._index_for(args)
        config = self.configs[index]
        named = dict(zip(self.call_params, args))
        for name, value in config["constants"].items():
            named[name] = value
        launch_grid = grid if grid is not None else config["grid"]
        if launch_grid is None:
            raise TypeError(f"{self.__name__}(): its grid was a function "
                            f"({config['grid_function']}) when it was exported, which an export "
                            "cannot carry: pass grid=(...) to the call")
        names = self._arg_names[index]
        full = tuple(named[n] for n in names)
        launch_grid, block = _tuple(launch_grid), _tuple(config["block"])
        loaded = self._per_config[index].loaded_kernel(full)
        loaded.launch(launch_grid, block, stream, config["shared"], full, None)
        try:
            key = self._fast_key(args, stream, grid)
        except (IndexError, TypeError):
            return
        if key in self._fast or len(self._fast) >= 64:
            return
        bind = tuple(self.call_params.index(n) if n in self.call_params else None
                     for n in names)

        def fallback(call_args: tuple, fast: Any) -> None:
            return self._general(call_args, stream, grid)
        plan = FastPlan(full, bind, frozenset(), len(self.call_params), fallback)
        fast = loaded.fast_path(launch_grid, block, stream, config["shared"], plan)
        if fast is not None:
            self._fast[key] = fast

    def _index_for(self, args: tuple) -> int:
        from kaiojit.lib.autotuner import _key_value

        types = argument_types(self.__name__, self.call_params, args)
        for sig, call in zip(self.signatures, self._calls):
            if all(_accepts(p, t) for p, t in zip(call.args, types)):
                named = dict(zip(self.call_params, args))
                key = json.dumps(_jsonable(tuple(_key_value(named[k]) for k in self.key)))
                chosen = self._chosen.get((sig, key))
                return chosen if chosen is not None else self._default.get(sig, 0)
        raise TypeError(f"{self.__name__} was exported for {'; '.join(self.signatures)}; none "
                        f"accepts ({', '.join(map(str, types))}): export that signature too")


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


__all__ = ["ExportedAutotuned", "call_signature", "config_signature", "is_autotuned",
           "tuning_record"]
