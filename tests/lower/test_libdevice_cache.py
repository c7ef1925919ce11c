"""libdevice subsets: a kernel links only the libdevice functions it calls, cut out once per
set of names and kept on disk; a damaged cached subset is rebuilt, never trusted."""

from __future__ import annotations

import math
import os

import pytest

import kaiojit as kj
from kaiojit.lower import ptx as ptx_stage

SIG = "void(float32[::1], float32[::1])"


def kernel_exp(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = math.exp(x[i]) + math.sin(x[i])


def subset_files(root):
    d = os.path.join(root, "libdevice")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_subset_is_cached_and_a_damaged_one_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ptx_stage, "_SUBSETS", {})
    first = kj.compile_ptx(kernel_exp, SIG)
    files = subset_files(tmp_path)
    assert len(files) == 1
    assert "__nv_expf" not in first  # linked and inlined, no call left
    # damage the cached subset: the next compile in a fresh process state rebuilds it
    path = os.path.join(tmp_path, "libdevice", files[0])
    with open(path, "wb") as f:
        f.write(b"not bitcode")
    monkeypatch.setattr(ptx_stage, "_SUBSETS", {})
    again = kj.compile_ptx(kj.jit(kernel_exp), SIG)
    assert again == first
    from kaiojit.cachefiles import load_entry

    rebuilt = load_entry(files[0].removesuffix(".bc"), ".bc", "libdevice")
    assert rebuilt[:4] == b"BC\xc0\xde"  # rewritten: a checked entry holding bitcode


def test_different_functions_get_different_subsets(tmp_path, monkeypatch):
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ptx_stage, "_SUBSETS", {})

    def kernel_log(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = math.log1p(x[i])

    kj.compile_ptx(kernel_exp, SIG)
    kj.compile_ptx(kernel_log, SIG)
    assert len(subset_files(tmp_path)) == 2


def test_missing_libdevice_names_the_extra(monkeypatch):
    import cuda.pathfinder

    def not_found(name):
        raise cuda.pathfinder.BitcodeLibNotFoundError(f"no {name} bitcode here")

    monkeypatch.setattr(cuda.pathfinder, "find_bitcode_lib", not_found)
    monkeypatch.setattr(ptx_stage, "_SUBSETS", {})
    ptx_stage._libdevice_bitcode.cache_clear()
    ptx_stage._libdevice_digest.cache_clear()
    try:
        with pytest.raises(kj.LibdeviceNotFound, match=r"pip install 'kaiojit\[cu13\]'"):
            kj.compile_ptx(kernel_exp, SIG)

        def plain(out, x):  # no math: no libdevice needed, so it still compiles
            i = kj.grid(1)
            if i < x.size:
                out[i] = x[i] * 2.0
        assert ".entry plain_" in kj.compile_ptx(plain, SIG)
    finally:
        ptx_stage._libdevice_bitcode.cache_clear()
        ptx_stage._libdevice_digest.cache_clear()
