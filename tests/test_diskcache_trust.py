"""What the disk cache trusts (docs/cache.md): directories and files the user owns that no one
else can write. Each attack on a cache directory fails safely: the entry is refused, the kernel
compiled again (and the entry written over), and no foreign code runs."""

from __future__ import annotations

import binascii
import hashlib
import json
import math
import os
import stat
import warnings

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cachefiles, hostsyms
from kaiojit.target import TargetSpec

SIG = "void(float64[::1], float64[::1])"
HOST = TargetSpec("host")
rng = np.random.default_rng()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(root))
    return root


def triple(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = x[i] * 3.0


def compile_host():
    """A fresh dispatcher's compile (what a new process does)."""
    return kj.jit(triple, cache=True).compile(SIG, HOST)


def run(ck) -> None:
    """Launch the compiled kernel on the cpu backend and check it triples its input."""
    previous = kj.set_backend("cpu")
    try:
        x = rng.standard_normal(int(rng.integers(10, 200)))
        out = kj.to_device(np.full(x.size, np.nan))
        loaded = kj.runtime.get_backend().load_kernel(ck)
        loaded.launch((x.size + 63) // 64, 64, None, 0, (out, kj.to_device(x)))
        np.testing.assert_array_equal(out.copy_to_host(), x * 3.0)
    finally:
        kj.set_backend(previous)


def entry_file(cache) -> str:
    (path,) = [str(p) for p in cache.rglob("*.kjc")]
    return path


def rewrite_entry(path: str, change) -> None:
    """What an attacker able to write the file would do: change the kernel, recompute the
    header's digest and size (anyone can), keep the file the user's."""
    with open(path, "rb") as f:
        header, _, body = f.read().partition(b"\n")
    meta = json.loads(header)
    (kernel,) = meta["kernels"]
    entry = json.loads(body[kernel["at"]:kernel["at"] + kernel["size"]])
    change(entry)
    body = json.dumps(entry).encode()
    kernel.update(sha256=hashlib.sha256(body).hexdigest(), at=0, size=len(body))
    with open(path, "wb") as f:
        f.write(json.dumps(meta).encode() + b"\n" + body)


def test_directories_are_created_0700_and_files_0600(cache):
    first = compile_host()
    assert not first.timings.get("cache")
    dirs = [cache, *(p for p in cache.rglob("*") if p.is_dir())]
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(dirs) >= 2 and len(files) == 1  # the kernel's file
    assert all(stat.S_IMODE(d.stat().st_mode) == 0o700 for d in dirs)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert compile_host().timings.get("cache")  # and they are read back


def test_an_entry_writable_by_others_is_refused_and_written_over(cache):
    first = compile_host()
    path = entry_file(cache)
    os.chmod(path, 0o666)
    again = compile_host()
    assert not again.timings.get("cache") and again.kfunc is not None
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # the compile wrote it over
    assert again.image.object_code == first.image.object_code
    assert compile_host().timings.get("cache")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a file to another user needs root")
def test_an_entry_owned_by_another_user_is_refused_and_written_over(cache):
    compile_host()
    path = entry_file(cache)
    os.chown(path, 65534, 65534)
    again = compile_host()
    assert not again.timings.get("cache")
    assert os.stat(path).st_uid == os.geteuid()
    run(again)


def test_a_linked_entry_is_refused(cache, tmp_path):
    compile_host()
    path = entry_file(cache)
    elsewhere = tmp_path / "elsewhere.kjc"
    os.replace(path, elsewhere)
    os.symlink(elsewhere, path)
    assert not compile_host().timings.get("cache")


def test_a_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(shared))
    with pytest.warns(cachefiles.CacheTrustWarning, match="can be written by other users"):
        first = compile_host()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per directory
        second = compile_host()
    assert not first.timings.get("cache") and not second.timings.get("cache")
    assert list(shared.iterdir()) == []  # nothing read, nothing written
    run(second)


def test_an_entry_naming_system_is_refused(cache):
    compile_host()
    path = entry_file(cache)
    rewrite_entry(path, lambda e: e.update(symbols=[*e["symbols"], "system"]))
    again = compile_host()
    assert not again.timings.get("cache")
    assert "system" not in again.image.symbols
    run(again)
    with pytest.raises(RuntimeError, match="system, which kaiojit's code never calls"):
        from kaiojit.target import link_c_functions
        link_c_functions(("sqrt", "system"))


def _object_calling(name: str) -> bytes:
    from llvmlite import binding as llvm

    from kaiojit.target import host_target_machine

    module = llvm.parse_assembly(f"""
        declare i32 @{name}(ptr)
        define i32 @f(ptr %p) {{
            %r = call i32 @{name}(ptr %p)
            ret i32 %r
        }}""")
    module.triple = llvm.get_process_triple()
    return host_target_machine().emit_object(module)


def test_object_code_calling_system_is_refused(cache):
    """MCJIT would resolve ``system`` from the process whatever the entry's list says: the
    object's own undefined symbols are checked."""
    compile_host()
    path = entry_file(cache)
    planted = _object_calling("system")
    assert "system" in hostsyms.undefined_symbols(planted)
    rewrite_entry(path, lambda e: e.update(
        image=binascii.b2a_base64(planted, newline=False).decode()))
    again = compile_host()
    assert not again.timings.get("cache")
    run(again)


def test_the_allow_list_holds_what_kaiojit_emits():
    from kaiojit.kir.intrinsics import all_intrinsics

    for decl in all_intrinsics():
        assert all(hostsyms.host_symbol_allowed(n) for n in decl.host_symbols), decl.name
    assert {"sqrt", "sinf", "memcpy", "memset", "snprintf"} <= hostsyms.HOST_C_FUNCTIONS
    assert not {"system", "execve", "dlopen", "mprotect"} & hostsyms.HOST_C_FUNCTIONS
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        hostsyms.undefined_symbols(b"#!/bin/sh\nrm -rf ~\n")


def test_a_planted_libdevice_subset_is_rebuilt(cache):
    """The libdevice subset is an entry like any other: keyed, digest-checked, trusted only
    if the user's own."""
    from kaiojit.lower import ptx as ptx_stage

    ptx_stage._SUBSETS.clear()
    first = kj.jit(_sine_kernel).compile(SIG)
    (subset,) = cache.rglob("libdevice/*.bc")
    data = bytearray(subset.read_bytes())
    data[-10] ^= 0xFF  # damaged (or planted) bitcode: the digest no longer matches
    subset.write_bytes(bytes(data))
    assert cachefiles.load_entry(subset.stem, ".bc", "libdevice") is None
    ptx_stage._SUBSETS.clear()
    again = kj.jit(_sine_kernel).compile(SIG)
    assert "sin" in first.ptx and again.ptx.count("\n") == first.ptx.count("\n")
    rebuilt = cachefiles.load_entry(subset.stem, ".bc", "libdevice")  # written over
    assert rebuilt is not None and subset.read_bytes() != bytes(data)


def _sine_kernel(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = math.sin(x[i])
