"""Launches with one mistake each, beside the program generator: wrong argument kinds, dtypes,
shapes and counts, wrong launch configurations, streams and shared memory sizes, wrong
compile options and signatures. Each must either run (kaiojit specializes on what it is
given: another dtype is another kernel) or raise a clear error: a kaiojit error or Python's
TypeError, ValueError or OverflowError, with a message that is no internal error, with no
exception chained in front of it, showing at most the one kaiojit frame that re-raised it; and
never crash or hang the process.

``check_launch(seed)`` makes and tries one such launch and returns what is wrong with the
answer (None when it is right); ``python -m tests.fuzz --bad-launches --n N`` runs N of them.
"""

from __future__ import annotations

import os
import random
import traceback
import warnings

import numpy as np

import kaiojit as kj

KAIOJIT_DIR = os.path.dirname(os.path.abspath(kj.__file__))
CLEAR = (kj.errors.KaiojitError, TypeError, ValueError, OverflowError)


@kj.jit
def axpy(out, x, y, a):
    i = kj.grid(1)
    if i < out.size and i < x.size and i < y.size:  # any sizes it is given stay in bounds
        out[i] = a * x[i] + y[i]


@kj.jit
def rows(out, m, n):
    i = kj.grid(1)
    if i < m.shape[0] and i < out.size:
        acc = 0.0
        for j in range(m.shape[1]):
            acc += m[i, j]
        out[i] = acc + n


KERNELS = {"axpy": (axpy, ("array", "array", "array", "float")),
           "rows": (rows, ("array", "array2", "int"))}

WRONG_VALUES = ("x", None, [1, 2], {"a": 1}, object(), 1 + 2j, (1, 2), b"x", np.float32,
                print, np.array("text"), np.float64(2.5), True, 2.5, -7)
WRONG_DTYPES = ("int8", "uint16", "bool", "complex64", "U3", "object", "datetime64[s]",
                "float16", "int64", "V8", [("f", "f4"), ("g", "i4")])
WRONG_DIMS = (0, 1, 2, 3, 1000, -1, 2**31, 2**40, 1.5, "4", None, (1, 2, 3, 4), (0, 1), [2],
              (2, 2, 2), (32, 32, 2), (1025,), np.int32(4), True, (), object())
WRONG_SHARED = (-1, 2**40, 1.5, "x", None, 10**6)
WRONG_STREAMS = ("x", 1.5, object(), [0], b"0", True, {})
OPTIONS = {"opt": (-1, 7, "3", None, 2.5), "fastmath": ("yes", 2, None),
           "debug": ("no", 3, []), "lineinfo": ("x", 2), "cache": ("yes", 5),
           "contract": ("no", 3), "max_registers": (-1, "x", 10**9, 2.5),
           "nosuch_option": (1,), "device": ("x",), "inline": (1,)}
BAD_SIGNATURES = ("void(float32)", "void(float64[::1], float64[::1], float64[::1], nosuch)",
                  "float32(", "", "void(float64[:, :, :], float64[::1], float64[::1], float64)",
                  "void(float64[::1] float64[::1])", "int32(float64[::1], float64[::1], "
                  "float64[::1], float64)")
KINDS = ("count", "kind", "dtype", "shape", "grid", "block", "shared", "stream", "option",
         "signature", "forall")


def _good_args(kernel: str, rng: np.random.Generator) -> list:
    n = 64
    if kernel == "axpy":
        return [np.full(n, np.nan), rng.random(n), rng.random(n), 1.5]
    return [np.full(n, np.nan), rng.random((n, 3)), 2]


def _wrong_array(r: random.Random, like: np.ndarray):
    # (a 0-d array is the trust issue's: its arguments are checked there)
    what = r.choice(["dtype", "dims", "strided", "empty", "fortran", "readonly", "scalar"])
    if what == "dtype":
        try:
            return np.zeros(like.shape, dtype=np.dtype(r.choice(WRONG_DTYPES)))
        except TypeError:
            return np.zeros(like.shape, dtype="int8")
    if what == "dims":
        return np.zeros(like.shape + (2,)) if like.ndim < 3 else np.zeros(4)
    if what == "strided":
        return np.zeros(like.size * 2).reshape(-1, *like.shape[1:])[::2] if like.ndim == 1 \
            else np.zeros((like.shape[0], like.shape[1] * 2))[:, ::2]
    if what == "empty":
        return np.zeros((0,) + like.shape[1:])
    if what == "fortran":
        return np.asfortranarray(np.zeros(like.shape + (1,) * (2 - like.ndim)))
    if what == "readonly":
        a = np.zeros(like.shape)
        a.flags.writeable = False
        return a
    return np.float64(1.0)


def bad_launch(seed: int, kind: str | None = None):
    """(description, a function that makes the launch) for ``seed``."""
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    kind = kind or r.choice(KINDS)
    name = r.choice(sorted(KERNELS))
    kernel, params = KERNELS[name]
    args = _good_args(name, rng)
    grid, block, extra = 1, 64, ()
    where = r.randrange(len(args))
    if kind == "count":
        args = args[:r.randrange(len(args))] if r.random() < 0.5 else args + [1] * r.randint(1, 3)
    elif kind == "kind":
        args[where] = r.choice(WRONG_VALUES)
    elif kind in ("dtype", "shape"):
        arrays = [k for k, p in enumerate(params) if p.startswith("array")]
        where = r.choice(arrays)
        args[where] = _wrong_array(r, args[where])
    elif kind == "grid":
        grid = r.choice(WRONG_DIMS)
    elif kind == "block":
        block = r.choice(WRONG_DIMS)
    elif kind == "shared":
        extra = (0, r.choice(WRONG_SHARED))
    elif kind == "stream":
        extra = (r.choice(WRONG_STREAMS),)
    elif kind == "option":
        option = r.choice(sorted(OPTIONS))
        value = r.choice(OPTIONS[option])
        return f"{name}: kj.jit({option}={value!r})", lambda: kj.jit(**{option: value})(
            kernel.py_func)[1, 64](*args)
    elif kind == "signature":
        sig = r.choice(BAD_SIGNATURES)
        return f"{name}: compile({sig!r})", lambda: kernel.compile(sig)
    elif kind == "forall":
        n = r.choice((0, -1, 1.5, "64", None, 2**63))
        return f"{name}: forall({n!r})", lambda: kernel.forall(n)(*args)
    shown = ", ".join(_short(a) for a in args)
    description = f"{name}[{grid!r}, {block!r}{''.join(', ' + repr(e) for e in extra)}]({shown})"
    return description, lambda: kernel[(grid, block) + extra](*args)


def _short(a) -> str:
    if isinstance(a, np.ndarray):
        return f"ndarray({a.dtype}, {a.shape}, {'C' if a.flags.c_contiguous else 'A'})"
    text = repr(a)
    return text if len(text) < 30 else text[:27] + "..."


def check_launch(seed: int, kind: str | None = None) -> str | None:
    """None when the launch of ``seed`` runs or is refused clearly; else what is wrong."""
    from kaiojit.runtime import set_backend

    description, launch = bad_launch(seed, kind)
    previous = set_backend("cpu")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            launch()
    except CLEAR as e:
        text = str(e)
        frames = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(
            e.__traceback__) if os.path.abspath(f.filename).startswith(KAIOJIT_DIR)]
        if "internal error" in text or not text.strip():
            return f"{description}: {type(e).__name__} {text!r}"
        if e.__cause__ is not None or (e.__context__ is not None and not e.__suppress_context__):
            chained = e.__cause__ or e.__context__
            return f"{description}: {type(e).__name__} with {type(chained).__name__} chained"
        if len(frames) > 1:
            return f"{description}: {type(e).__name__} shows kaiojit's frames {frames}"
        return None
    except Exception as e:  # noqa: BLE001  (any other class is no clear error)
        return f"{description}: {type(e).__name__}: {e}"
    finally:
        set_backend(previous)
    return None
