"""The disk cache's files: a failed write leaves nothing behind, the size limit
(``KAIOJIT_CACHE_SIZE``) evicts the least recently used entries, and ``python -m kaiojit
cache list|size|clear``."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from kaiojit import cachefiles
from kaiojit.cache import load_json, store_json

rng = np.random.default_rng()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(root))
    monkeypatch.delenv(cachefiles.SIZE_ENV, raising=False)
    return root


def payload(nbytes: int) -> bytes:
    return rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()


def key(n: int) -> str:
    return f"{n:040x}"


@pytest.mark.parametrize("fails", ["write", "rename"])
def test_a_failed_write_leaves_no_temporary_file(cache, monkeypatch, fails):
    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    cachefiles.store_entry(key(1), ".kjc", payload(100))  # the directories exist
    class FullDisk:  # the file os.fdopen gives, on a full disk
        def __init__(self, fd, mode):
            self.fd = fd

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            os.close(self.fd)

        write = staticmethod(disk_full)

    monkeypatch.setattr(os, "replace" if fails == "rename" else "fdopen",
                        disk_full if fails == "rename" else FullDisk)
    cachefiles.store_entry(key(2), ".kjc", payload(100))
    monkeypatch.undo()
    left = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert left == [key(1) + ".kjc"]
    assert cachefiles.load_entry(key(2), ".kjc") is None


@pytest.mark.parametrize("text, size", [("1048576", 1 << 20), ("500M", 500 << 20),
                                        ("2g", 2 << 30), ("64KiB", 64 << 10), (" 3 T", None)])
def test_size_limit_values(text, size):
    if size is None:
        with pytest.raises(ValueError, match="KAIOJIT_CACHE_SIZE=' 3 T'"):
            cachefiles.parse_size(text)
    else:
        assert cachefiles.parse_size(text) == size


@pytest.mark.parametrize("text", ["4X", "-1", "0", "1.5G", "lots", "G"])
def test_a_bad_size_limit_names_the_variable_and_the_values_it_takes(cache, monkeypatch, text):
    monkeypatch.setenv(cachefiles.SIZE_ENV, text)
    with pytest.raises(ValueError, match=r"KAIOJIT_CACHE_SIZE=.*: give the disk cache's size "
                                         r"limit as a positive whole number of bytes with an "
                                         r"optional K, M, G or T suffix"):
        cachefiles.store_entry(key(1), ".kjc", payload(10))


def test_the_size_limit_evicts_the_least_recently_used(cache, monkeypatch):
    monkeypatch.setenv(cachefiles.SIZE_ENV, "40K")
    now = time.time()
    for n in range(8):  # 8 entries of ~4 KiB, each used a minute after the last
        cachefiles.store_entry(key(n), ".kjc", payload(4000))
        path = cachefiles.entry_path(key(n), ".kjc")
        os.utime(path, (now - 600 + 60 * n, now - 600 + 60 * n))
    assert cachefiles.load_entry(key(0), ".kjc") is not None  # the oldest, used again now
    for n in range(8, 12):  # past the limit: the least recently used go
        cachefiles.store_entry(key(n), ".kjc", payload(4000))
    kept = {int(p.stem, 16) for p in cache.rglob("*.kjc")}
    assert cachefiles.total_size() <= 40 << 10
    assert {0, 8, 9, 10, 11} <= kept  # used again, and the newest
    assert 1 not in kept and 2 not in kept  # the least recently used


def cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kaiojit", "cache", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_cache_command_lists_sizes_and_clears(cache):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    sizes = [int(rng.integers(1000, 3000)) for _ in range(3)]
    for n, size in enumerate(sizes):
        cachefiles.store_entry(key(n), ".kjc", payload(size), what="kernel", kind="host",
                               name=f"kernel_{n}")
    listed = cli("list", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert len(lines) == 4 and all(f"kernel host kernel_{n}" in listed.stdout for n in range(3))
    assert f"{cache}: 3 files" in lines[-1]
    size = cli("size", env=env)
    total = sum(os.path.getsize(p) for p in cache.rglob("*.kjc"))
    assert size.returncode == 0 and f"3 files, {total / 1024:.1f} KiB" in size.stdout
    bad = cli("size", env=dict(env, KAIOJIT_CACHE_SIZE="4X"))
    assert bad.returncode == 2 and "KAIOJIT_CACHE_SIZE='4X'" in bad.stderr
    cleared = cli("clear", env=env)
    assert cleared.returncode == 0 and f"from {cache}" in cleared.stdout
    assert not [p for p in cache.rglob("*") if p.is_file()]
    assert "0 files" in cli("size", env=env).stdout


def test_a_librarys_json_record_round_trips_and_a_damaged_one_is_a_miss(cache):
    """``kaiojit.cache``, the disk store kernel libraries use (kj.autotune's choices)."""
    value = {"index": int(rng.integers(0, 1000)), "tried": rng.standard_normal(3).tolist()}
    name = key(int(rng.integers(1, 1 << 30)))
    assert load_json(name, "made_up_lib") is None  # never stored
    store_json(name, value, "made_up_lib", what="made-up record", name="k")
    assert load_json(name, "made_up_lib") == value
    assert load_json(name, "another_lib") is None  # a folder is a library's own
    (found,) = cachefiles.files(read_headers=True)
    assert found.path.endswith(".json") and found.about["what"] == "made-up record"
    with open(found.path, "r+b") as f:  # one byte of the payload changed: the digest differs
        data = bytearray(f.read())
        data[-2] ^= 0x01
        f.seek(0)
        f.write(data)
    assert load_json(name, "made_up_lib") is None

