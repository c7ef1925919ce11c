"""Compile-time specialization: ``kj.constexpr`` parameters and ``@kj.jit(specialize=...)``
are folded into the kernel (a shared array sized by one, a loop bounded by one), are not
passed to it, and key the memory and disk caches by value."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as T
from kaiojit.lib.autotuner import ConfigError
from tests.located import assert_located, assert_no_internals, position_of
from tests.ptxas import find_ptxas, take_refused_for_shared

RNG = np.random.default_rng()


@kj.jit
def tile_sums(out, a, BLOCK: kj.constexpr):
    buf = kj.shared.array(BLOCK, kj.float32)
    t = kj.threadIdx.x
    buf[t] = a[kj.blockIdx.x * BLOCK + t]
    kj.syncthreads()
    if t == 0:
        s = kj.float32(0)
        for j in range(BLOCK):
            s += buf[j]
        out[kj.blockIdx.x] = s


def scaled_by(out, a, FACTOR):
    i = kj.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] * FACTOR


def run_tile_sums(kernel, block: int, tiles: int = 5):
    a = RNG.standard_normal(block * tiles).astype(np.float32)
    out = kj.to_device(np.full(tiles, np.nan, np.float32))
    kernel[tiles, block](out, kj.to_device(a), block)
    want = np.zeros(tiles, np.float32)
    for j in range(block):  # the kernel's order of additions, in float32
        want += a.reshape(tiles, block)[:, j]
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_constexpr_sizes_shared_array_and_loop_for_each_value(kj_backend):
    for block in (32, 64):
        run_tile_sums(tile_sums, block)
    sigs = {str(s) for s in tile_sums.signatures}
    # fresh device arrays are 16-byte aligned: part of the signature
    assert {"void(float32[::1, align=16], float32[::1, align=16], constexpr(32))",
            "void(float32[::1, align=16], float32[::1, align=16], constexpr(64))"} <= sigs


def test_constexpr_is_folded_not_passed():
    sig = "void(float32[::1], float32[::1], constexpr(48))"
    ck = tile_sums.compile(sig)
    assert ck.arg_names == ("out", "a")
    assert str(ck.signature) == "void(float32[::1], float32[::1])"
    ptx = tile_sums.inspect_ptx(sig)
    entry = ptx[ptx.index(".entry"):ptx.index("{", ptx.index(".entry"))]
    assert entry.count(".param") == 4  # two arrays of (pointer, length): no BLOCK
    assert "[192]" in ptx  # 48 float32 of shared memory
    assert ck.static_shared_bytes == 48 * 4
    other = tile_sums.compile("void(float32[::1], float32[::1], constexpr(16))")
    assert other.name != ck.name  # one entry symbol per value


def test_specialize_option_is_the_annotation(kj_backend):
    kernel = kj.jit(specialize=("FACTOR",))(scaled_by)
    a = RNG.standard_normal(100).astype(np.float32)
    for factor in (3, 2.5):
        out = kj.to_device(np.full(100, np.nan, np.float32))
        kernel[4, 32](out, kj.to_device(a), factor)
        np.testing.assert_array_equal(out.copy_to_host(), (a * np.float32(factor)))
    kir = kernel.inspect_kir("void(float32[::1], float32[::1], constexpr(3))")
    assert "FACTOR" not in kir and "3" in kir
    assert kj.jit(specialize="FACTOR")(scaled_by).constexpr_params == ("FACTOR",)


def test_constexpr_values_of_different_python_types_are_different_kernels():
    assert T.constexpr(1) != T.constexpr(True) != T.constexpr(1.0)
    assert T.constexpr(np.int32(7)) == T.constexpr(7)
    assert T.parse_type("constexpr(32)") == T.constexpr(32)
    assert T.parse_type("constexpr(float32)") == T.constexpr(kj.float32)
    with pytest.raises(ValueError, match="bad constexpr value 'x'"):
        T.parse_type("constexpr(x)")


def test_constexpr_dtype_parameter(kj_backend):
    @kj.jit
    def fill(out, DT: kj.constexpr):
        buf = kj.shared.array(4, DT)
        buf[kj.threadIdx.x] = kj.threadIdx.x
        kj.syncthreads()
        out[kj.threadIdx.x] = buf[3 - kj.threadIdx.x]

    out = kj.to_device(np.full(4, np.nan, np.float64))
    fill[1, 4](out, kj.float64)
    np.testing.assert_array_equal(out.copy_to_host(), [3, 2, 1, 0])
    assert fill.compile("void(float64[::1], constexpr(float64))").static_shared_bytes == 32


def test_constexpr_in_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KAIOJIT_CACHE_DIR", str(tmp_path))
    first = kj.jit(cache=True, specialize="FACTOR")(scaled_by)
    first.compile("void(float32[::1], float32[::1], constexpr(2))")
    first.compile("void(float32[::1], float32[::1], constexpr(5))")
    entries = [f for _, _, fs in os.walk(tmp_path) for f in fs
               if f.endswith(".kjc") and not f.endswith("-coarse.kjc")]  # kernels, not entries
    assert len(entries) == 2
    again = kj.jit(cache=True, specialize="FACTOR")(scaled_by)
    hit = again.compile("void(float32[::1], float32[::1], constexpr(5))")
    assert hit.timings == {"cache": True}
    assert hit.arg_names == ("out", "a") and len(hit.signature.args) == 2
    miss = again.compile("void(float32[::1], float32[::1], constexpr(6))")
    assert "cache" not in miss.timings
    a = RNG.standard_normal(64).astype(np.float32)
    out = kj.to_device(np.full(64, np.nan, np.float32))
    again[2, 32](out, kj.to_device(a), 5)
    np.testing.assert_array_equal(out.copy_to_host(), a * np.float32(5))


# --- errors -----------------------------------------------------------------------------------


def test_assigning_a_constexpr_is_located():
    @kj.jit
    def k(out, N: kj.constexpr):
        N = 3
        out[0] = N

    with pytest.raises(kj.CompileError) as e:
        k[1, 1](kj.to_device(np.zeros(1, np.float32)), 4)
    assert "cannot assign to 'N': it is a kj.constexpr parameter" in str(e.value)
    assert_located(e.value, k.py_func, "N = 3")


def test_a_constexpr_given_a_runtime_value_names_the_parameter():
    a = kj.to_device(RNG.standard_normal(32).astype(np.float32))
    with pytest.raises(TypeError, match=r"tile_sums\(\): parameter 'BLOCK': it is a "
                                        r"kj.constexpr .* got DeviceArray"):
        tile_sums[1, 32](a, a, a)
    with pytest.raises(TypeError, match="parameter 'BLOCK' is a kj.constexpr; the signature "
                                        "must give its value, e.g. constexpr\\(32\\), not int64"):
        tile_sums.compile("void(float32[::1], float32[::1], int64)")


def test_specialize_names_a_missing_parameter():
    line = scaled_by.__code__.co_firstlineno
    with pytest.raises(TypeError, match=rf"test_constexpr.py:{line}: @kj.jit\(specialize=...\) "
                                        r"names 'BLOCK', which is not a parameter of "
                                        r"scaled_by\(out, a, FACTOR\)"):
        kj.jit(specialize=("BLOCK",))(scaled_by)


def test_device_function_cannot_take_constexpr():
    with pytest.raises(TypeError, match="device function scaled_by has constexpr parameter"):
        kj.jit(device=True, specialize="FACTOR")(scaled_by)


# --- autotuning a constexpr tile ----------------------------------------------------------------


def tile_configs(*blocks, threads=None):
    return [kj.Config(block=threads or b, grid=lambda args, b=b: (args["a"].shape[0] // b,),
                      constants={"BLOCK": b}) for b in blocks]


def test_autotune_chooses_a_constexpr_tile(kj_backend, monkeypatch, capsys, ptxas_check):
    monkeypatch.setenv("KAIOJIT_AUTOTUNE_LOG", "1")
    configs = tile_configs(32, 64, 128) + tile_configs(16384, threads=32)  # 64 KB of shared
    times = dict(zip((c.describe() for c in configs), RNG.permutation(4) + 1.0))
    timed = []

    def timer(run, config, stream):
        run()
        timed.append(config.describe())
        return times[config.describe()]

    kernel = kj.autotune(configs=configs, key=["a"], timer=timer, cache=False,
                         check=False)(tile_sums)
    a = RNG.standard_normal(16384).astype(np.float32)
    launchable = {c: t for c, t in times.items() if "BLOCK=16384" not in c}
    best = min(launchable, key=launchable.get)
    block = int(best.split("block=")[1].split(",")[0])
    out = kj.to_device(np.full(16384 // 32, np.nan, np.float32))  # room for every config
    kernel(out, kj.to_device(a))
    assert kernel.best_config(out, a).describe() == best
    assert sorted(timed) == sorted(launchable)
    want = np.zeros(16384 // block, np.float32)
    for j in range(block):
        want += a.reshape(-1, block)[:, j]
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:16384 // block], want)
    assert np.isnan(got[16384 // block:]).all()
    log = capsys.readouterr().err
    assert f"{configs[3]}: skipped (" in log and "static shared memory" in log \
        or "shared data" in log
    expect = 1 if ptxas_check and find_ptxas() else 0  # the 64 KB tile, compiled for the GPU
    assert take_refused_for_shared(ptxas_check) == expect


def test_autotune_constexpr_that_is_not_a_constant_is_located():
    with pytest.raises(ConfigError) as info:
        kj.autotune(configs=[kj.Config(block=32, grid=1, constants={"BLOCK": "32"})])(tile_sums)
    filename, line, col = position_of(test_autotune_constexpr_that_is_not_a_constant_is_located,
                                      'kj.Config(block=32, grid=1, constants={"BLOCK": "32"})')
    assert str(info.value).startswith(f"{filename}:{line}:{col}: Config(block=32, grid=1, "
                                      "BLOCK='32') sets 'BLOCK': it is a kj.constexpr")
    assert_no_internals(info.value)


def test_autotune_all_constexpr_tiles_too_big_is_a_launch_error(kj_backend, ptxas_check):
    configs = tile_configs(16384, 32768, threads=32)
    kernel = kj.autotune(configs=configs, key=["a"], cache=False)(tile_sums)
    a = kj.to_device(RNG.standard_normal(32768).astype(np.float32))
    with pytest.raises(kj.LaunchError) as info:
        kernel(a, a)
    lines = str(info.value).splitlines()
    assert lines[0] == "kj.autotune: no config of tile_sums could be launched:"
    assert lines[1].startswith(f"  {configs[0]}: ") and lines[2].startswith(f"  {configs[1]}: ")
    # the GPU compiled what it could before the driver refused it: ptxas refuses that too
    compiled_for_gpu = bool(ptxas_check and find_ptxas())
    refused = take_refused_for_shared(ptxas_check)
    assert refused >= 1 if compiled_for_gpu else refused == 0


def test_resources_of_each_constexpr_value():
    from tests.ptxas import require_ptxas

    require_ptxas()
    for block in (64, 256):
        r = tile_sums.resources(f"void(float32[::1], float32[::1], constexpr({block}))")
        assert r.shared_bytes == block * 4


# --- on the GPU ---------------------------------------------------------------------------------


def cuda_backend():
    import kaiojit.runtime as rt

    if rt.get_backend().name != "cuda":
        pytest.skip("needs the cuda backend")


@pytest.mark.gpu
def test_constexpr_tiles_on_the_gpu():
    cuda_backend()
    for block in (32, 128, 256):
        run_tile_sums(tile_sums, block, tiles=7)


@pytest.mark.gpu
def test_autotune_on_the_gpu_skips_a_tile_the_device_refuses(ptxas_check):
    cuda_backend()
    configs = tile_configs(64, 128) + tile_configs(16384, threads=32)
    # the tiles sum different spans: results differ by design, so check=False
    kernel = kj.autotune(configs=configs, key=["a"], cache=False, warmup=1, rep=5,
                         outputs=("out",), check=False)(tile_sums)
    a = RNG.standard_normal(16384).astype(np.float32)
    out = kj.to_device(np.full(16384 // 64, np.nan, np.float32))
    kernel(out, kj.to_device(a))
    (tried,) = kernel.history.values()
    assert [ms is None for _, ms, _ in tried] == [False, False, True]
    assert "shared" in tried[2][2]
    # the 64 KB tile's PTX, when this test compiled it (an earlier test may have): ptxas
    # refuses it as the driver did
    assert take_refused_for_shared(ptxas_check) <= 1
    block = kernel.best_config(out, a).constants["BLOCK"]
    got = out.copy_to_host()
    want = np.zeros(16384 // block, np.float32)
    for j in range(block):
        want += a.reshape(-1, block)[:, j]
    np.testing.assert_array_equal(got[:16384 // block], want)
