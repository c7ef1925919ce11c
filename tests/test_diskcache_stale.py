"""The disk cache never hands out a stale kernel: whatever typing read (a device function in
another module, a module or class attribute, an IntEnum member, a NumPy type, a foreign
declaration, the kernel's place in its file under debug) is edited between two fresh
processes, and the second returns the new result; unedited, it hits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from kaiojit.frontend.deps import fingerprint, source_digest

PROJECT = {
    "helpers.py": """
        import kaiojit as kj

        @kj.jit(device=True)
        def bump(v):
            return v + {bump}
    """,
    "cfg.py": """
        SCALE = {scale}

        class P:
            SCALE = {p_scale}
    """,
    "colors.py": """
        import enum

        class Color(enum.IntEnum):
            RED = {red}
            BLUE = 9
    """,
    "kinds.py": """
        import numpy as np
        DT = np.{dt}
    """,
    "foreign.py": """
        import kaiojit as kj

        def half(a):
            return a * 0.5

        half_of = kj.declare_device("half_of", "{sig}", py_impl=half)
    """,
    "kernels.py": """
        import kaiojit as kj
        import cfg
        import helpers
        from cfg import P
        from colors import Color
        from foreign import half_of
        from kinds import DT
        {padding}

        @kj.jit(cache=True)
        def uses_device_function(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = helpers.bump(x[i])

        @kj.jit(cache=True)
        def uses_module_attribute(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = x[i] * cfg.SCALE

        @kj.jit(cache=True)
        def uses_class_attribute(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = x[i] * P.SCALE

        @kj.jit(cache=True)
        def uses_enum_member(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = x[i] + Color.RED

        @kj.jit(cache=True)
        def uses_numpy_type(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = DT(x[i]) / 3

        @kj.jit(cache=True)
        def uses_declaration(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = half_of(x[i])

        @kj.jit(cache=True, debug=True)
        def faults(out, x):
            i = kj.grid(1)
            out[i + 100] = x[i]
    """,
}

RUN = """
import json, sys
import numpy as np
import kaiojit as kj
kj.set_backend("cpu")
sys.path.insert(0, {dir!r})
import kernels
x = np.random.default_rng().uniform(1, 2, 64)
results = {{}}
for name in ("uses_device_function", "uses_module_attribute", "uses_class_attribute",
             "uses_enum_member", "uses_numpy_type", "uses_declaration"):
    kernel = getattr(kernels, name)
    out = kj.to_device(np.full(64, np.nan))
    kernel[1, 64](out, kj.to_device(x))
    (ck,) = kernel._compiled.values()
    results[name] = {{"hit": bool(ck.timings.get("cache")), "x": x.tolist(),
                      "out": out.copy_to_host().tolist()}}
try:
    kernels.faults[1, 4](kj.to_device(np.zeros(4)), kj.to_device(np.ones(4)))
except kj.KernelError as e:
    (ck,) = kernels.faults._compiled.values()
    results["faults"] = {{"hit": bool(ck.timings.get("cache")), "message": str(e)}}
print(json.dumps(results))
"""

BEFORE = {"bump": "1.0", "scale": "2.0", "p_scale": "3.0", "red": "1", "dt": "float64",
          "sig": "float64(float64)", "padding": ""}
AFTER = {"bump": "5.0", "scale": "7.0", "p_scale": "11.0", "red": "4", "dt": "float32",
         "sig": "float32(float32)", "padding": "\n\n\n"}


def expected(name: str, x: np.ndarray, values: dict) -> np.ndarray:
    f32 = values["dt"] == "float32"
    return {
        "uses_device_function": x + float(values["bump"]),
        "uses_module_attribute": x * float(values["scale"]),
        "uses_class_attribute": x * float(values["p_scale"]),
        "uses_enum_member": x + int(values["red"]),
        "uses_numpy_type": (x.astype(np.float32) / np.float32(3)).astype(np.float64) if f32
        else x / 3,
        "uses_declaration": (x.astype(np.float32) * np.float32(0.5)).astype(np.float64)
        if "float32" in values["sig"] else x * 0.5,
    }[name]


def write_project(directory, values: dict) -> None:
    for name, text in PROJECT.items():
        (directory / name).write_text(textwrap.dedent(text.format(**values)))


def run(directory, cache) -> dict:
    env = dict(os.environ, KAIOJIT_CACHE_DIR=str(cache), PYTHONPATH=os.getcwd())
    r = subprocess.run([sys.executable, "-c", RUN.format(dir=str(directory))], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def check(results: dict, values: dict, hit: bool, fault_line: int) -> None:
    for name, got in results.items():
        assert got["hit"] is hit, (name, got["hit"])
        if name == "faults":
            assert f"kernels.py:{fault_line}," in got["message"], got["message"]
            continue
        x = np.array(got["x"])
        np.testing.assert_array_equal(np.array(got["out"]), expected(name, x, values),
                                      err_msg=name)


def fault_line(directory) -> int:
    lines = (directory / "kernels.py").read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if "out[i + 100]" in text)


def test_every_edit_typing_read_is_a_miss_with_the_new_result(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    write_project(src, BEFORE)
    line_before = fault_line(src)
    check(run(src, cache), BEFORE, hit=False, fault_line=line_before)
    check(run(src, cache), BEFORE, hit=True, fault_line=line_before)  # unedited: hits
    write_project(src, AFTER)
    line_after = fault_line(src)
    assert line_after == line_before + 3
    check(run(src, cache), AFTER, hit=False, fault_line=line_after)
    check(run(src, cache), AFTER, hit=True, fault_line=line_after)
    write_project(src, BEFORE)  # back to the first version: its entries are still there
    check(run(src, cache), BEFORE, hit=True, fault_line=line_before)


def test_fingerprints_tell_the_edited_values_apart():
    import enum

    class A(enum.IntEnum):
        RED = 1

    class B(enum.IntEnum):
        RED = 4

    assert fingerprint(A.RED) != fingerprint(B.RED)
    assert fingerprint(np.float64) != fingerprint(np.float32)
    assert fingerprint(2.0) != fingerprint(2) != fingerprint(True)
    assert fingerprint(np.float32(1.5)) != fingerprint(np.float64(1.5))
    assert fingerprint((1, 2.0)) != fingerprint((1, 2.5))
    assert fingerprint(object()) == fingerprint(object())  # identity only: attributes are paths


def test_source_digest_covers_a_trailing_annotation(tmp_path):
    """A bare annotation has no code: the digest reaches the lines past the function's last
    code, indented under its ``def``."""
    path = tmp_path / "annotated.py"
    digests = []
    for t in ("float32", "float64"):
        path.write_text(textwrap.dedent(f"""
            def f(out, x):
                out[0] = x[0]
                y: {t}
        """))
        import linecache
        linecache.checkcache(str(path))
        namespace: dict = {}
        exec(compile(path.read_text(), str(path), "exec"), namespace)
        digests.append(source_digest(namespace["f"]))
    assert None not in digests and digests[0] != digests[1]


def test_a_closure_variable_is_a_read(tmp_path, monkeypatch):
    import kaiojit as kj
    from kaiojit.frontend.deps import still_holds

    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    factor = 3.0

    def kernel(out, x):
        out[0] = x[0] * factor

    ck = kj.jit(kernel).compile("void(float64[::1], float64[::1])")
    record = ck.kfunc.deps
    assert [["factor"], "builtins.float:3.0", {}] in record["reads"]
    assert still_holds(kernel, record, lines=False)
    factor = 4.0  # the closure's cell now holds another value
    assert not still_holds(kernel, record, lines=False)


EDITED_IN_PLACE = """
import json, sys
import numpy as np
import kaiojit as kj
kj.set_backend("cpu")
sys.path.insert(0, {dir!r})
import inplace
x = np.random.default_rng().uniform(1, 2, 16)
out = kj.to_device(np.full(16, np.nan))
inplace.k[1, 16](out, kj.to_device(x))
first = out.copy_to_host().tolist()
if {edit}:  # the file changes under the running process, which compiles another signature
    text = open(inplace.__file__).read()
    with open(inplace.__file__, "w") as f:
        f.write(text.replace("* 2.0", "* 5.0"))
    inplace.k[1, 16](kj.to_device(np.zeros(16, np.float32)), kj.to_device(x.astype(np.float32)))
(ck,) = [c for c in inplace.k._compiled.values() if "float64" in str(c.signature)]
print(json.dumps({{"x": x.tolist(), "out": first, "hit": bool(ck.timings.get("cache"))}}))
"""


def test_a_file_edited_under_a_running_process_never_gives_a_stale_entry(tmp_path):
    """The running process compiles from the text it parsed first; its entries are recorded
    with that text, so a later process with the edited file does not take them."""
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "inplace.py").write_text(textwrap.dedent("""
        import kaiojit as kj

        @kj.jit(cache=True)
        def k(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = x[i] * 2.0
    """))

    def run_edit(edit: bool) -> dict:
        env = dict(os.environ, KAIOJIT_CACHE_DIR=str(cache), PYTHONPATH=os.getcwd())
        r = subprocess.run([sys.executable, "-c", EDITED_IN_PLACE.format(dir=str(src),
                                                                          edit=edit)],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    before = run_edit(True)  # compiles float64 (x * 2), edits, compiles float32 (still x * 2)
    np.testing.assert_array_equal(before["out"], np.array(before["x"]) * 2.0)
    after = run_edit(False)  # the file now says x * 5: nothing compiled from x * 2 is taken
    assert after["hit"] is False
    np.testing.assert_array_equal(after["out"], np.array(after["x"]) * 5.0)
