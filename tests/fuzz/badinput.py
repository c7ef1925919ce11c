"""Programs that must be rejected: a valid random kernel with one wrong statement put in at a
random place (at the top level, in an if, in a loop, or in a device function it calls). Each
must give a kaiojit ``CompileError`` located at that statement's line, never an internal error,
a crash or a hang.

``KINDS`` maps each kind of mistake to its statement (``{dev}`` names a device function of one
parameter the program has); ``bad_program(seed)`` builds one program, ``check_bad(seed)``
compiles it and returns what is wrong with the answer (None when it is right).
"""

from __future__ import annotations

import linecache
import random
import signal
import threading

from tests.located import names_kaiojit_source

from .generator import generate
from .program import render

KINDS: dict[str, str] = {
    "undefined name": "v_bad = undefined_name + 1",
    "undefined function": "v_bad = nosuch_function(1)",
    "bitwise and of a float": "v_bad = s_float32 & 1",
    "shift of a float": "v_bad = s_float64 << 2",
    "invert of a float": "v_bad = ~s_float32",
    "bitwise of uint64 and int64": "v_bad = s_uint64 | s_int64",
    "device function arity": "v_bad = {dev}(1, 2, 3)",
    "math function arity": "v_bad = math.sqrt(1.0, 2.0)",
    "min of one value": "v_bad = min(s_int32)",
    "abs of nothing": "v_bad = abs()",
    "list": "v_bad = [1, 2]",
    "dict": "v_bad = {1: 2}",
    "set": "v_bad = {s_int32, 2}",
    "lambda": "v_bad = lambda q: q",
    "with": "with s_int32: pass",
    "import": "import os",
    "global": "global g_bad",
    "string arithmetic": 'v_bad = "abc" + 1',
    "del": "del s_int32",
    "too many indices": "v_bad = a_int32[1, 2]",
    "array stored in an element": "a_int32[0] = a_int32",
    "unknown attribute": "v_bad = s_int32.nosuch",
    "unknown kj function": "v_bad = kj.nosuch_intrinsic()",
    "math of a string": 'v_bad = math.sqrt("x")',
    "syncthreads arity": "kj.syncthreads(1)",
    "shuffle arity": "v_bad = kj.shfl_sync(0xFFFFFFFF, s_int32)",
    "atomic on a scalar": "kj.atomic.add(s_int32, 0, 1)",
    "atomic and of floats": "kj.atomic.and_(a_float32, 0, 1)",
    "atomic inc of int32": "kj.atomic.inc(a_int32, 0, 1)",
    "local array of run-time size": "v_bad = kj.local.array(s_int32, kj.float32)",
    "shared array of a bad dtype": 'v_bad = kj.shared.array(10, "float32x")',
    "kernel returns a value": "return 1",
    "keyword a function does not take": "v_bad = kj.shfl_sync(0xFFFFFFFF, 1, 0, width=8)",
    "shared array of run-time shape": "v_bad = kj.shared.array(s_int32, kj.int32)",
    "arithmetic on an array": "v_bad = a_int32 + 1",
    "truth of an array": "v_bad = 1 if a_int32 else 0",
    "tuple of mixed items at a run-time index": "v_bad = (1, a_int32)[s_int32]",
    "cast arity": "v_bad = kj.float32(1.0, 2.0)",
    "round of an integer with digits": "v_bad = round(s_int32, 2)",
    "matrix multiply": "v_bad = s_int32 @ s_int32",
    "float index": "v_bad = a_int32[0.5]",
    "grid of four dimensions": "v_bad = kj.grid(4)",
    "unknown thread index": "v_bad = kj.threadIdx.w",
    "atomic without a value": "kj.atomic.add(a_int32, 0)",
    "a type as a value": "v_bad = s_int32 + kj.int32",
    "string in a conditional": 'v_bad = 1 if s_int32 else "x"',
    "array and scalar in one variable": "s_int32 = a_int32",
    "attribute assignment": "a_int32.shape = 3",
    "starred assignment": "v_bad, *rest_bad = (1, 2, 3)",
    "comparison of an array": "v_bad = s_int32 < a_int32",
    "range with a zero step": "for i_zero in range(0, 4, 0): pass",
    "integer constant past 64 bits": "v_bad = s_int64 + 2 ** 100000",
    "integer literal past 64 bits": "v_bad = 36893488147419103232",
    "integer power taking hours": "v_bad = 3 ** 10 ** 10",
    "local array past 512 KB": "v_bad = kj.local.array(4000000, kj.float32)",
    # several lines: the mistake is the last one's (a read some path reaches unassigned)
    "variable assigned on one path": "if s_int32 > 0:\n    v_one = 1.0\nv_bad = v_one",
    "variable assigned in one branch": "if s_int32 > 0:\n    v_two = 1\nelse:\n"
                                       "    v_other = 2\nv_bad = v_two + 1",
}

WRAPPERS = ("top", "if", "for", "device")


def bad_program(seed: int, kind: str | None = None) -> tuple[str, int, str, str]:
    """(source, the wrong statement's line, kind, where) for ``seed``."""
    r = random.Random(seed)
    kind = kind or r.choice(sorted(KINDS))
    p = generate(seed, "small")
    p.inputs = tuple(sorted(set(p.inputs) | {"int32", "int64", "uint64", "float32", "float64"}))
    lines = render(p).splitlines()
    helper = ["@kj.jit(device=True)", "def dev_bad(q):", "    return q + 1", "", ""]
    statement = KINDS[kind].replace("{dev}", "dev_bad")
    extra = statement.count("\n")  # the mistake is on the statement's last line
    where = r.choice(WRAPPERS) if kind not in ("kernel returns a value",) else "top"
    if where == "device" and any(n in statement for n in ("a_", "s_", "dev_bad", "return")):
        where = "if"
    kernel_at = next(i for i, t in enumerate(lines) if t.startswith("@kj.jit(contract"))
    body_from = next(i for i, t in enumerate(lines) if t.startswith("    lane = kj.laneid")) + 1
    starts = [i for i in range(body_from, len(lines) + 1)
              if i == len(lines) or (lines[i].startswith("    ") and lines[i][4] != " "
                                     and not lines[i].startswith(("    else", "    elif")))]
    at = r.choice(starts)
    def indented(pad: str) -> list[str]:
        return [pad + line for line in statement.split("\n")]

    if where == "device":
        helper = ["@kj.jit(device=True)", "def dev_bad(q):", *indented("    "), "    return q",
                  "", ""]
        bad_line = kernel_at + 3  # 1-based: the helper's statement, after the helper goes in
        lines[at:at] = ["    v_dev_bad = dev_bad(s_int32)"]
    elif where == "if":
        lines[at:at] = ["    if tid >= 0:", *indented("        ")]
        bad_line = at + 2 + len(helper)
    elif where == "for":
        lines[at:at] = ["    for i_bad in range(2):", *indented("        ")]
        bad_line = at + 2 + len(helper)
    else:
        lines[at:at] = indented("    ")
        bad_line = at + 1 + len(helper)
    bad_line += extra
    lines[kernel_at:kernel_at] = helper
    return "\n".join(lines) + "\n", bad_line, kind, where


class _Timeout(Exception):
    pass


def check_bad(seed: int, kind: str | None = None, seconds: float = 60.0) -> str | None:
    """None when the program's error is a located kaiojit error at its wrong statement; else
    what is wrong (with the source)."""
    import kaiojit as kj

    source, line, kind, where = bad_program(seed, kind)
    filename = f"<bad-{seed}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": f"bad_{seed}"}
    try:
        exec(compile(source, filename, "exec"), namespace)
    except SyntaxError as e:
        return f"{kind} ({where}): Python rejects the test itself: {e}"
    kernel = namespace["kern"]
    sig = "void(" + ", ".join(_param_type(n) for n in kernel.py_func.__code__.co_varnames[
        :kernel.py_func.__code__.co_argcount]) + ")"
    alarm = threading.current_thread() is threading.main_thread()
    if alarm:
        signal.signal(signal.SIGALRM, _raise_timeout)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        kj.compile_ptx(kernel, sig)
    except kj.CompileError as e:
        text = str(e)
        head = text.split("\n")[0]
        if "internal error" in text or names_kaiojit_source(text):
            return f"{kind} ({where}): an internal error: {text}\n{source}"
        if not head.startswith(f"{filename}:{line}:"):
            return f"{kind} ({where}): located at {head.split(' ')[0]}, not line {line}: " \
                   f"{text}\n{source}"
        return None
    except _Timeout:
        return f"{kind} ({where}): compiling took over {seconds} s\n{source}"
    except Exception as e:  # noqa: BLE001  (anything else is kaiojit's bug)
        return f"{kind} ({where}): {type(e).__name__}: {e}\n{source}"
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
        linecache.cache.pop(filename, None)
    return f"{kind} ({where}): compiled without an error\n{source}"


def _raise_timeout(signum, frame):
    raise _Timeout


def _param_type(name: str) -> str:
    kind, t = name.split("_", 1)
    if kind == "o":
        return f"{t}[:, ::1]"
    if kind in ("a", "c", "z"):
        return f"{t}[::1]"
    return t
