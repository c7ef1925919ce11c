"""The disk cache (cache=True): a hit gives the same kernel without compiling, and anything the
compile depended on (constants, device functions, options, signature) changes the key (the
dependency record's edits: tests/test_diskcache_stale.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import kaiojit as kj
from kaiojit import cache, diskcache

SIG = "void(float32[::1], float32[::1], int32)"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    return tmp_path


def run_script(source: str, cache: str, extra_env=None) -> dict:
    env = dict(os.environ, KAIOJIT_CACHE_DIR=cache, PYTHONPATH=os.getcwd())
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


KERNEL_MODULE = """
import json, sys
sys.path.insert(0, {dir!r})
import kmod
ck = kmod.scale.compile({sig!r})
print(json.dumps({{"cached": bool(ck.timings.get("cache")), "ptx": ck.ptx}}))
"""


def write_module(tmp_path, factor) -> str:
    d = tmp_path / "src"
    d.mkdir(exist_ok=True)
    (d / "kmod.py").write_text(textwrap.dedent(f"""
        import kaiojit as kj
        FACTOR = {factor!r}

        @kj.jit(device=True)
        def twice(v):
            return v * 2

        @kj.jit(cache=True)
        def scale(out, x, n):
            i = kj.grid(1)
            if i < n:
                out[i] = twice(x[i]) * FACTOR
    """))
    return str(d)


def test_second_process_hits_and_gets_the_same_ptx(tmp_path):
    cache = str(tmp_path / "cache")
    src = write_module(tmp_path, 3.5)
    script = KERNEL_MODULE.format(dir=src, sig=SIG)
    first = run_script(script, cache)
    second = run_script(script, cache)
    assert first["cached"] is False and second["cached"] is True
    assert first["ptx"] == second["ptx"]


def test_changed_constant_misses(tmp_path):
    cache = str(tmp_path / "cache")
    script = KERNEL_MODULE.format(dir=write_module(tmp_path, 3.5), sig=SIG)
    first = run_script(script, cache)
    script = KERNEL_MODULE.format(dir=write_module(tmp_path, 4.25), sig=SIG)
    changed = run_script(script, cache)
    assert changed["cached"] is False
    assert changed["ptx"] != first["ptx"]


def test_device_function_change_changes_fingerprint():
    def make(body):
        ns = {"kj": kj}
        exec(compile(textwrap.dedent(body), "<kdev>", "exec"), ns)
        return ns["k"].py_func

    base = """
        @kj.jit(device=True)
        def helper(v):
            return v {op} 1

        @kj.jit
        def k(out, x):
            out[0] = helper(x[0])
    """
    a = cache.function_fingerprint(make(base.format(op="+")))
    b = cache.function_fingerprint(make(base.format(op="-")))
    assert a != b


def test_options_and_signature_are_in_the_key(cache_dir):
    def k(out, x, n):
        i = kj.grid(1)
        if i < n:
            out[i] = x[i]
    from kaiojit.compiler import CompileOptions, TargetSpec
    spec = TargetSpec("nvptx", "sm_90", 80)
    keys = {
        diskcache.lookup_key(k, SIG, CompileOptions(), spec, kj.__version__),
        diskcache.lookup_key(k, SIG, CompileOptions(fastmath=True), spec, kj.__version__),
        diskcache.lookup_key(k, "void(float64[::1], float64[::1], int32)", CompileOptions(),
                             spec, kj.__version__),
        diskcache.lookup_key(k, SIG, CompileOptions(), TargetSpec("nvptx", "sm_80", 80),
                             kj.__version__),
    }
    assert len(keys) == 4 and None not in keys


def test_corrupt_entry_is_a_miss(cache_dir):
    @kj.jit(cache=True)
    def k(out, x, n):
        i = kj.grid(1)
        if i < n:
            out[i] = x[i] + 1
    ck = k.compile(SIG)
    assert not ck.timings.get("cache")
    for root, _, files in os.walk(cache_dir):
        for f in files:
            with open(os.path.join(root, f), "w") as fh:
                fh.write("{not json")

    @kj.jit(cache=True)
    def k(out, x, n):  # noqa: F811 - the same kernel again, in a fresh dispatcher
        i = kj.grid(1)
        if i < n:
            out[i] = x[i] + 1
    again = k.compile(SIG)
    assert not again.timings.get("cache")
    assert again.ptx == ck.ptx


# --- both targets: the last stage's output and the metadata ---------------------------------------

HOST_MODULE = """
import json, sys
import numpy as np
sys.path.insert(0, {dir!r})
import kaiojit as kj
kj.set_backend("cpu")
import kmod
rng = np.random.default_rng()
n = int(rng.integers(100, 300))
x = rng.standard_normal(n).astype(np.float32)
out = kj.to_device(np.full(n, np.nan, np.float32))
kmod.scale[(n + 63) // 64, 64](out, kj.to_device(x), np.int32(n))
(ck,) = kmod.scale._compiled.values()
print(json.dumps({{"cached": bool(ck.timings.get("cache")), "kind": ck.target.kind,
                  "stages_run": ck.kfunc is not None,
                  "ok": bool(np.array_equal(out.copy_to_host(), x * 2 * np.float32(kmod.FACTOR)))}}))
"""


def test_host_entry_hits_and_launches_in_a_fresh_process(tmp_path):
    cache = str(tmp_path / "cache")
    script = HOST_MODULE.format(dir=write_module(tmp_path, 1.5))
    first = run_script(script, cache)
    second = run_script(script, cache)
    assert first == {"cached": False, "kind": "host", "stages_run": True, "ok": True}
    assert second == {"cached": True, "kind": "host", "stages_run": False, "ok": True}


def test_nvptx_hit_does_not_load_llvm(tmp_path):
    cache = str(tmp_path / "cache")
    src = write_module(tmp_path, 2.0)
    script = KERNEL_MODULE.format(dir=src, sig=SIG).replace(
        '"ptx": ck.ptx}', '"ptx": ck.ptx, "llvm": "llvmlite" in sys.modules}')
    first = run_script(script, cache)
    second = run_script(script, cache)
    assert first["llvm"] is True and first["cached"] is False
    assert second["llvm"] is False and second["cached"] is True
    assert second["ptx"] == first["ptx"]


def test_damaged_host_entry_is_recompiled_and_rewritten(cache_dir):
    from kaiojit.target import TargetSpec

    def make():
        @kj.jit(cache=True)
        def k(out, x, n):
            i = kj.grid(1)
            if i < n:
                out[i] = x[i] * 3
        return k

    host = TargetSpec("host")
    first = make().compile(SIG, host)
    (path,) = [os.path.join(r, f) for r, _, fs in os.walk(cache_dir) for f in fs
               if f.endswith(".kjc")]
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x20  # one flipped bit in the payload: still readable JSON text
    with open(path, "wb") as f:
        f.write(data)
    again = make().compile(SIG, host)
    assert not again.timings.get("cache") and again.kfunc is not None
    assert again.image.object_code == first.image.object_code
    third = make().compile(SIG, host)
    assert third.timings.get("cache") and third.image == first.image


def test_host_and_nvptx_entries_have_their_own_keys():
    from kaiojit.compiler import CompileOptions, TargetSpec

    def k(out, x, n):
        out[0] = x[0]
    keys = {diskcache.lookup_key(k, SIG, CompileOptions(), spec, kj.__version__)
            for spec in (TargetSpec("host"), TargetSpec("nvptx", "sm_90", 80))}
    assert len(keys) == 2 and None not in keys
