"""Autotuned kernels through export: every config exported, the tuner's choices recorded in the
manifest and launched by the loader (cpu backend, host library; mock backend, cubins), the C
header naming each config and the one chosen, and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import aot
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend
from tests.test_bad_argument_frames import visible_kaiojit_frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALL = "void(float32[::1], float32[::1], int64)"
rng = np.random.default_rng()

# three configs; the fake timer makes the tuner choose config 1 for n=N1 and config 2 for N2
CONFIGS = [kj.Config(block=(b,), constants={"W": w, "SCALE": s})
           for b, w, s in ((32, 1, 2.0), (64, 2, 3.0), (128, 4, 5.0))]
N1, N2 = 700, 1300
_FAVOURITE = {N1: 1, N2: 2}
_now = {"n": N1}


def _timer(run, config, stream) -> float:
    return 0.5 if CONFIGS.index(config) == _FAVOURITE[_now["n"]] else 2.0


def _grid(args):
    return ((args["n"] + 127) // 128,)


def _make_tuned(fixed_grid: bool):
    @kj.autotune(configs=CONFIGS, key=["n"], grid=(16,) if fixed_grid else _grid,
                 timer=_timer, check=False, cache=False)
    @kj.jit
    def scale(out, x, n, W: kj.constexpr, SCALE):
        """out = x * SCALE + the block's width (which tells the config launched), W unused
        but folded: each config is its own compile."""
        i = kj.grid(1)
        if i < n:
            out[i] = x[i] * SCALE + kj.float32(kj.blockDim.x + W - W)
    return scale


def _tune(tuner, n: int) -> None:
    _now["n"] = n
    x = kj.to_device(rng.standard_normal(n, np.float32))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    tuner(out, x, np.int64(n))


@pytest.fixture
def cpu():
    previous = set_backend("cpu")
    yield
    set_backend(previous)


def _expect(x: np.ndarray, index: int) -> np.ndarray:
    block, _, scale = ((32, 1, 2.0), (64, 2, 3.0), (128, 4, 5.0))[index]
    return x * np.float32(scale) + np.float32(block)


def test_every_config_exported_and_the_choice_per_key_launched(tmp_path, cpu):
    tuner = _make_tuned(fixed_grid=False)
    _tune(tuner, N1)
    _tune(tuner, N2)
    assert tuner.best_config(kj.to_device(np.zeros(N1, np.float32)),
                             kj.to_device(np.zeros(N1, np.float32)), np.int64(N1)) is CONFIGS[1]
    manifest = aot.export(str(tmp_path), {tuner: [CALL]}, target="host")
    assert [e.c_name.rsplit("__", 1)[1] for e in manifest.entries] == \
        ["config0", "config1", "config2"]
    record = manifest.autotuned["scale"]
    assert sorted((c["key"], c["index"]) for c in record["choices"]) == [([N1], 1), ([N2], 2)]
    mod = aot.load(str(tmp_path))
    for n, index in ((N1, 1), (N2, 2), (N1 + 1, 2)):  # a key never tuned: the last one tuned
        x = rng.standard_normal(n, np.float32)
        out = kj.to_device(np.full(n, np.nan, np.float32))
        mod.scale(out, kj.to_device(x), np.int64(n), grid=((n + 31) // 32,))
        np.testing.assert_allclose(out.copy_to_host(), _expect(x, index), rtol=1e-6)
        assert mod.scale.best_config(out, out, np.int64(n))["text"] == str(CONFIGS[index])


def test_an_untuned_kernel_exports_all_configs_and_launches_the_first(tmp_path, cpu):
    tuner = _make_tuned(fixed_grid=True)
    aot.export(str(tmp_path), {tuner: CALL}, target="host")
    mod = aot.load(str(tmp_path))
    n = int(rng.integers(100, 400))
    x = rng.standard_normal(n, np.float32)
    out = kj.to_device(np.full(n, np.nan, np.float32))
    mod.scale(out, kj.to_device(x), np.int64(n))  # the grid (16,) was fixed: recorded
    np.testing.assert_allclose(out.copy_to_host(), _expect(x, 0), rtol=1e-6)


def test_a_grid_function_must_be_given_at_the_call(tmp_path, cpu):
    tuner = _make_tuned(fixed_grid=False)
    aot.export(str(tmp_path), {tuner: [CALL]}, target="host")
    mod = aot.load(str(tmp_path))
    x = kj.to_device(np.ones(8, np.float32))
    with pytest.raises(TypeError, match=r"scale\(\): its grid was a function \(_grid\) when it "
                                        r"was exported.*pass grid=\(\.\.\.\) to the call") as info:
        mod.scale(x, x, np.int64(8))
    assert visible_kaiojit_frames(info.value) == []  # the user's line only
    with pytest.raises(TypeError, match="scale is autotuned: it launches the config its tuner "
                                        "chose; call it as scale") as info:
        mod.scale[1, 8]
    assert visible_kaiojit_frames(info.value) == []
    with pytest.raises(TypeError, match=r"scale was exported for void\(float32\[::1\], "
                                        r"float32\[::1\], int64\); none accepts \(float64"):
        mod.scale(kj.to_device(np.ones(8)), x, np.int64(8), grid=(1,))
    with pytest.raises(TypeError, match=r"is called with 3 arguments \(out, x, n; the configs "
                                        r"set W, SCALE\), the signature gives 5"):
        aot.export(str(tmp_path / "bad"),
                   {tuner: ["void(float32[::1], float32[::1], int64, int32, float64)"]},
                   target="host")


def test_the_c_header_names_each_config_and_the_choice(tmp_path, cpu):
    tuner = _make_tuned(fixed_grid=False)
    _tune(tuner, N2)
    aot.export(str(tmp_path), {tuner: [CALL]}, target="host")
    header = (tmp_path / "kaiojit_kernels.h").read_text()
    assert (" * autotuned: config 2 of 3, Config(block=(128,), W=4, SCALE=5.0)\n"
            " * launch with block [128] and 0 bytes of dynamic shared memory, passing "
            f"SCALE = 5.0\n * the tuner chose it for n={N2} */\n"
            "int kaiojit_scale__f32_1dC__f32_1dC__i64__f64__config2(") in header
    assert header.count("the tuner chose it") == 1


def test_the_gpu_export_loads_the_chosen_configs_cubin(tmp_path):
    mock = MockBackend(compute_capability=(9, 0))
    previous = set_backend(mock)
    try:
        tuner = _make_tuned(fixed_grid=True)
        _tune(tuner, N1)  # on the mock backend: the fake timer decides
        aot.export(str(tmp_path), {tuner: [CALL]}, archs=["sm_80", "sm_90"])
        manifest = json.loads((tmp_path / "manifest.json").read_text())
        assert manifest["autotuned"]["scale"]["choices"][0]["index"] == 1
        mod = aot.load(str(tmp_path))
        x = kj.to_device(rng.standard_normal(N1, np.float32))
        mod.scale(x, x, np.int64(N1))
        cubin = manifest["entries"][1]["cubins"]["sm_90"]
        assert mock.loaded_images == [(tmp_path / cubin).read_bytes()]
        assert mock.launches[-1].block == (64, 1, 1) and mock.launches[-1].grid == (16, 1, 1)
    finally:
        set_backend(previous)


def test_the_command_line_exports_an_autotuned_kernel(tmp_path):
    source = tmp_path / "tuned.py"
    source.write_text(
        "import kaiojit as kj\n"
        "@kj.autotune(configs=[kj.Config(block=(64,), constants={'W': 1}),\n"
        "                      kj.Config(block=(128,), constants={'W': 2})], grid=(4,))\n"
        "@kj.jit\n"
        "def double(out, x, W: kj.constexpr):\n"
        "    i = kj.grid(1)\n"
        "    if i < x.size:\n"
        "        out[i] = x[i] * 2 + W - W\n")
    done = subprocess.run([sys.executable, "-m", "kaiojit", "aot", f"{source}:double", "--sig",
                           "void(float32[::1], float32[::1])", "--target", "host", "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, check=False,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr
    assert "double: void(float32[::1], float32[::1]) -> kaiojit_double__f32_1dC__f32_1dC__" \
           "config1" in done.stdout
