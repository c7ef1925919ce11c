"""The KAIOJIT_* environment knobs (kaiojit/env.py): each validated at its first use, with one
line naming the variable, the value and the values it takes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def knobs(monkeypatch):
    """Set knobs in this process; each is read again at its next use, and after the test."""
    def set_knob(name: str, value: str) -> None:
        monkeypatch.setenv(name, value)
        env.forget(name)
    yield set_knob
    env.forget()


@pytest.mark.parametrize("name, value, takes", [
    ("KAIOJIT_COARSE_MIN_THREADS", "4M", "a whole number of threads, 0 or more"),
    ("KAIOJIT_COARSE_MIN_THREADS", "-1", "a whole number of threads, 0 or more"),
    ("KAIOJIT_DEBUG_SYNC", "sometimes", "1 (synchronize after every launch) or 0"),
    ("KAIOJIT_LAUNCH", "fastest", "native, ex, ctypes or bindings"),
    ("KAIOJIT_AUTOTUNE_LOG", "loud", "1 (print what the autotuner tries) or 0"),
    ("KAIOJIT_MOCK_BACKEND", "2", "1 (let KAIOJIT_BACKEND=mock choose the mock backend"),
    ("KAIOJIT_BACKEND", "c p u", "cuda or cpu"),
])
def test_a_value_the_knob_does_not_take_is_one_line_naming_it(knobs, name, value, takes):
    knobs(name, value)
    with pytest.raises(ValueError) as info:
        env.get(name)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{name}={value!r}: takes {takes}"), text


def test_values_the_knobs_take(knobs):
    n = int(np.random.default_rng().integers(0, 1 << 30))
    knobs("KAIOJIT_COARSE_MIN_THREADS", f" {n} ")
    assert env.get("KAIOJIT_COARSE_MIN_THREADS") == n
    for text, value in (("1", True), ("ON", True), ("0", False), ("no", False), ("", False)):
        knobs("KAIOJIT_DEBUG_SYNC", text)
        assert env.get("KAIOJIT_DEBUG_SYNC") is value, text


def test_a_knob_is_read_once(knobs):
    knobs("KAIOJIT_COARSE_MIN_THREADS", "123")
    assert env.get("KAIOJIT_COARSE_MIN_THREADS") == 123
    os.environ["KAIOJIT_COARSE_MIN_THREADS"] = "oops"  # monkeypatch restores it
    assert env.get("KAIOJIT_COARSE_MIN_THREADS") == 123


def test_dump_takes_all_and_refuses_unknown_stages(knobs):
    from kaiojit.compiler import PIPELINES

    stages = env.dump_stages()
    assert set(stages) == {s.name for pipeline in PIPELINES.values() for s in pipeline}
    knobs("KAIOJIT_DUMP", "all")
    assert env.get("KAIOJIT_DUMP") == frozenset(stages)
    knobs("KAIOJIT_DUMP", "kir, ptx")
    assert env.get("KAIOJIT_DUMP") == {"kir", "ptx"}
    knobs("KAIOJIT_DUMP", "kir,ptxx")
    with pytest.raises(ValueError) as info:
        env.get("KAIOJIT_DUMP")
    assert str(info.value) == ("KAIOJIT_DUMP='kir,ptxx': takes 'all' or stage names separated "
                               "by commas, among: kir, llvm_unoptimized, llvm, ptx, object")


def test_every_knob_kaiojit_reads_is_declared():
    """No KAIOJIT_* variable is read outside kaiojit/env.py, every knob read through it is
    declared there, and every declared knob is read somewhere."""
    import re

    package = os.path.dirname(kj.__file__)
    read = set()
    for folder, _, files in os.walk(package):
        for f in files:
            if not f.endswith(".py"):
                continue
            text = open(os.path.join(folder, f), encoding="utf-8").read()
            if f != "env.py" or folder != package:
                assert not re.search(r"(environ(\.get)?[\[(]|getenv\()\s*['\"]KAIOJIT_", text), f
            read.update(re.findall(r"\benv\.(?:get|raw|invalid)\(\s*['\"](KAIOJIT_[A-Z_]+)", text))
    assert read <= set(env.KNOBS), read - set(env.KNOBS)
    assert set(env.KNOBS) <= read, set(env.KNOBS) - read


def _run(folder, code: str, **knobs: str) -> subprocess.CompletedProcess:
    """``code`` run from a file (kaiojit reads kernels from their source) in ``folder``."""
    script = folder / "launch_twice.py"
    script.write_text(code)
    full = {**os.environ, "PYTHONPATH": ROOT, "KAIOJIT_BACKEND": "cpu", **knobs}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=full, timeout=120)


LAUNCH = """
import numpy as np
import kaiojit as kj

@kj.jit
def twice(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = 2 * x[i]

x = kj.to_device(np.arange(8.0))
out = kj.to_device(np.full(8, np.nan))
twice[1, 8](out, x)
print(out.copy_to_host().tolist())
"""


def test_a_bad_knob_fails_its_first_use_with_one_line(tmp_path):
    r = _run(tmp_path, LAUNCH, KAIOJIT_COARSE_MIN_THREADS="4M")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "ValueError: KAIOJIT_COARSE_MIN_THREADS='4M': takes a whole number of threads, 0 or "
        "more (the smallest launch that takes a kernel's coarse entry; default 4194304)")


def test_dump_dir_naming_a_file_is_one_line(tmp_path):
    afile = tmp_path / "not_a_dir"
    afile.write_text("x")
    r = _run(tmp_path, LAUNCH, KAIOJIT_DUMP="kir", KAIOJIT_DUMP_DIR=str(afile))
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"ValueError: KAIOJIT_DUMP_DIR={str(afile)!r}: names a file, not a directory; takes a "
        "directory (created if missing; default: the current one)")


def test_dump_never_writes_through_a_planted_link(tmp_path):
    """A link under a dump file's predictable name is replaced, not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    dump = tmp_path / "dump"
    dump.mkdir()
    r0 = _run(tmp_path, LAUNCH, KAIOJIT_DUMP="kir", KAIOJIT_DUMP_DIR=str(dump))
    assert r0.returncode == 0, r0.stderr
    (name,) = [p.name for p in dump.iterdir()]
    (dump / name).unlink()
    (dump / name).symlink_to(victim)
    r = _run(tmp_path, LAUNCH, KAIOJIT_DUMP="kir", KAIOJIT_DUMP_DIR=str(dump))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str([2.0 * i for i in range(8)])
    assert victim.read_text() == "precious"
    assert not (dump / name).is_symlink()
    assert (dump / name).read_text().startswith("kernel twice(")
    assert [p.name for p in dump.iterdir()] == [name]  # no temporary file left behind
