"""``kj.autotune``: the choice (with a fake timer), per-key and disk caching, trial copies,
located configuration errors, skipped and failing configs. Runs on the cpu backend; the
``gpu`` test checks the choice against re-measured times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.lib.autotuner import ConfigError, event_timer
from tests.located import assert_no_internals, position_of

RNG = np.random.default_rng()


@kj.jit
def scale_rows(out, x, n, STEP):
    # each thread handles STEP consecutive elements
    base = kj.grid(1) * STEP
    for k in range(STEP):
        if base + k < n:
            out[base + k] = 2 * x[base + k]


def covering(block: int, step: int):
    return lambda a: ((a["n"] + block * step - 1) // (block * step),)


CONFIGS = [kj.Config(block=b, grid=covering(b, s), constants={"STEP": s})
           for b in (32, 128) for s in (1, 4)]


class FakeTimer:
    """Milliseconds by config (listed in ``times``), each config's launches counted."""

    def __init__(self, times: dict[str, float]):
        self.times = times
        self.calls: list[str] = []

    def __call__(self, run, config, stream) -> float:
        run()
        self.calls.append(config.describe())
        return self.times[config.describe()]


def random_times() -> dict[str, float]:
    return {c.describe(): float(t) for c, t in zip(CONFIGS, RNG.permutation(len(CONFIGS)) + 1)}


def inputs(n: int):
    x = RNG.standard_normal(n).astype(np.float32)
    return kj.to_device(np.full(n, np.nan, np.float32)), kj.to_device(x), x


def tuned(timer, **kwargs):
    return kj.autotune(configs=CONFIGS, key=["n"], timer=timer, cache=False, **kwargs)(scale_rows)


def test_the_fastest_config_is_chosen_and_launched(kj_backend):
    times = random_times()
    timer = FakeTimer(times)
    kernel = tuned(timer)
    n = int(RNG.integers(500, 3000))
    out, x, host = inputs(n)
    kernel(out, x, n)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * host)
    fastest = min(times, key=times.get)
    assert kernel.best_config(out, x, n).describe() == fastest
    assert sorted(timer.calls) == sorted(times)


def test_the_choice_is_kept_per_key(kj_backend):
    timer = FakeTimer(random_times())
    kernel = tuned(timer)
    n = int(RNG.integers(500, 3000))
    for _ in range(3):
        out, x, host = inputs(n)
        kernel(out, x, n)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * host)
    assert len(timer.calls) == len(CONFIGS)
    out, x, host = inputs(n + 1)
    kernel(out, x, n=n + 1)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * host)
    assert len(timer.calls) == 2 * len(CONFIGS)
    assert len(kernel.chosen) == 2


def test_trials_leave_the_arguments_as_they_were(kj_backend):
    @kj.jit
    def bump(x, n, STEP):
        base = kj.grid(1) * STEP
        for k in range(STEP):
            if base + k < n:
                x[base + k] += 1.5

    n = int(RNG.integers(500, 3000))
    host = RNG.standard_normal(n).astype(np.float32)
    for outputs in (None, ("x",)):
        kernel = kj.autotune(configs=CONFIGS, key=["n"], timer=FakeTimer(random_times()),
                             outputs=outputs, cache=False)(bump)
        x = kj.to_device(host)
        kernel(x, n)  # four trials, each timed: only the real launch may reach x
        np.testing.assert_array_equal(x.copy_to_host(), host + np.float32(1.5))
        # a NumPy argument of a new size (a new key): copied to the device for the trials
        h = RNG.standard_normal(n + 1).astype(np.float32)
        want = h + np.float32(1.5)
        with pytest.warns(kj.PerformanceWarning):
            kernel(h, n + 1)
        np.testing.assert_array_equal(h, want)


def test_results_that_depend_on_the_config_are_an_error(kj_backend):
    @kj.jit
    def block_id(out, n, STEP):
        base = kj.grid(1) * STEP
        for k in range(STEP):
            if base + k < n:
                out[base + k] = kj.blockIdx.x

    kernel = kj.autotune(configs=CONFIGS, key=["n"], timer=FakeTimer(random_times()),
                         cache=False)(block_id)
    out = kj.to_device(np.full(300, -1, np.int64))
    with pytest.raises(kj.KernelError) as info:
        kernel(out, 300)
    text = str(info.value)
    assert f"with {CONFIGS[0]} and with {CONFIGS[1]}" in text
    assert "'out'" in text and "check=False" in text
    unchecked = kj.autotune(configs=CONFIGS, key=["n"], timer=FakeTimer(random_times()),
                            cache=False, check=False)(block_id)
    unchecked(out, 300)
    chosen = unchecked.best_config(out, 300)
    per_block = chosen.block * chosen.constants["STEP"]
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(300) // per_block)


def test_configs_that_cannot_launch_are_skipped_and_logged(kj_backend, monkeypatch, capsys):
    monkeypatch.setenv("KAIOJIT_AUTOTUNE_LOG", "1")  # read when the decorator runs
    too_big = kj.Config(block=2048, grid=covering(2048, 1), constants={"STEP": 1})
    ok = CONFIGS[2]
    timer = FakeTimer({ok.describe(): 1.0})
    kernel = kj.autotune(configs=[too_big, ok], key=["n"], timer=timer, cache=False)(scale_rows)
    n = int(RNG.integers(500, 3000))
    out, x, host = inputs(n)
    kernel(out, x, n)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * host)
    log = capsys.readouterr().err
    assert f"kaiojit autotune: scale_rows[n={n}]" in log
    assert f"{too_big}: skipped (LaunchError: " in log and "2048 threads" in log
    assert f"{ok}: 1.0000 ms" in log and f"chose {ok}" in log


def test_when_no_config_launches_the_error_lists_why(kj_backend):
    configs = [kj.Config(block=(32, 64), grid=1, constants={"STEP": 1}),
               kj.Config(block=64, grid=1, shared=300 * 1024, constants={"STEP": 1})]
    kernel = kj.autotune(configs=configs, key=["n"], cache=False)(scale_rows)
    out, x, _ = inputs(100)
    with pytest.raises(kj.LaunchError) as info:
        kernel(out, x, 100)
    lines = str(info.value).splitlines()
    assert lines[0] == "kj.autotune: no config of scale_rows could be launched:"
    assert lines[1].startswith(f"  {configs[0]}: LaunchError: ") and "2048 threads" in lines[1]
    assert lines[2].startswith(f"  {configs[1]}: LaunchError: ")
    assert "shared memory" in lines[2]


def test_the_default_timer_times_every_config(kj_backend):
    kernel = kj.autotune(configs=CONFIGS, key=["n"], warmup=1, rep=2, cache=False)(scale_rows)
    out, x, host = inputs(1000)
    kernel(out, x, 1000)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * host)
    (tried,) = kernel.history.values()
    assert [c for c, _, _ in tried] == CONFIGS
    assert all(ms is not None and ms >= 0 for _, ms, _ in tried)
    assert event_timer(lambda: None, CONFIGS[0], None, warmup=0.1, rep=0.1) >= 0


# --- the disk cache -----------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kaiojit as kj

    @kj.jit
    def twice(out, x, n, B):
        i = kj.grid(1)
        if i < n:
            out[i] = 2 * x[i] + B - B

    CONFIGS = [kj.Config(block=b, grid=lambda a, b=b: ((a["n"] + b - 1) // b,),
                         constants={"B": b}) for b in (32, 64, 128, 256)]
    TIMES = json.loads(sys.argv[1])
    timed = []

    def timer(run, config, stream):
        timed.append(config.describe())
        return TIMES[config.describe()]

    kernel = kj.autotune(configs=CONFIGS, key=["n"], timer=timer)(twice)
    x = np.random.default_rng().standard_normal(777).astype(np.float32)
    out = kj.to_device(np.full(777, np.nan, np.float32))
    kernel(out, kj.to_device(x), 777)
    assert np.array_equal(out.copy_to_host(), 2 * x)
    print(json.dumps({"chosen": kernel.best_config(out, out, 777).describe(), "timed": timed}))
""")


def test_a_choice_is_read_back_by_a_later_process(tmp_path):
    script = tmp_path / "tuned_kernel.py"
    script.write_text(CHILD)
    names = [f"Config(block={b}, grid=<lambda>, B={b})" for b in (32, 64, 128, 256)]
    times = dict(zip(names, (RNG.permutation(4) + 1.0).tolist()))
    env = dict(os.environ, KAIOJIT_BACKEND="cpu", KAIOJIT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.getcwd())

    def child(times_given):
        r = subprocess.run([sys.executable, str(script), json.dumps(times_given)], env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = child(times)
    assert first["chosen"] == min(times, key=times.get) and sorted(first["timed"]) == sorted(names)
    reversed_times = {k: -v for k, v in times.items()}  # would choose another config if timed
    second = child(reversed_times)
    assert second == {"chosen": first["chosen"], "timed": []}
    (entry,) = (tmp_path / "cache" / "autotune").iterdir()  # a checked cache entry
    assert json.loads(entry.read_text().partition("\n")[2])["config"] == first["chosen"]


# --- bad input ----------------------------------------------------------------------------------

def assert_config_error_at(err: BaseException, pyfunc, snippet: str) -> None:
    filename, line, col = position_of(pyfunc, snippet)
    text = str(err)
    assert text.startswith(f"{filename}:{line}:{col}: "), text
    src, caret = text.splitlines()[1:3]
    assert src[caret.index("^"):].startswith(snippet), text
    assert_no_internals(err)


def test_a_config_naming_a_missing_parameter_is_located():
    with pytest.raises(ConfigError) as info:
        @kj.autotune(configs=[CONFIGS[0],
                              kj.Config(block=64, grid=1, constants={"STEPS": 2})], key=["n"])
        @kj.jit
        def k(out, x, n, STEP):
            pass
    assert_config_error_at(info.value, test_a_config_naming_a_missing_parameter_is_located,
                           'kj.Config(block=64, grid=1, constants={"STEPS": 2})')
    assert "sets 'STEPS', which is not a parameter of the kernel (out, x, n, STEP)" in str(
        info.value)


def test_a_key_naming_a_missing_parameter_is_located():
    with pytest.raises(ConfigError) as info:
        @kj.autotune(configs=CONFIGS, key=["size"])
        @kj.jit
        def k(out, x, n, STEP):
            pass
    assert_config_error_at(info.value, test_a_key_naming_a_missing_parameter_is_located,
                           'kj.autotune(configs=CONFIGS, key=["size"])')
    assert "key names 'size', which is not a parameter of" in str(info.value)


def test_configs_must_set_the_same_constants_and_have_a_grid():
    with pytest.raises(ConfigError) as info:
        kj.autotune(configs=[CONFIGS[0], kj.Config(block=32, grid=1)], key=["n"])(scale_rows)
    assert_config_error_at(info.value, test_configs_must_set_the_same_constants_and_have_a_grid,
                           "kj.Config(block=32, grid=1)")
    assert "every config must set the same constants" in str(info.value)
    with pytest.raises(ConfigError) as info:
        kj.autotune(configs=[kj.Config(block=32, constants={"STEP": 1})])(scale_rows)
    assert_config_error_at(info.value, test_configs_must_set_the_same_constants_and_have_a_grid,
                           'kj.Config(block=32, constants={"STEP": 1})')
    assert "has no grid" in str(info.value)


def test_autotune_decorates_a_kernel():
    with pytest.raises(ConfigError, match=r"put @kj.autotune\(...\) above @kj.jit"):
        kj.autotune(configs=CONFIGS)(lambda out: None)


def test_calls_name_what_is_wrong(kj_backend):
    kernel = tuned(FakeTimer(random_times()))
    out, x, _ = inputs(64)
    with pytest.raises(TypeError, match=r"missing argument\(s\): n"):
        kernel(out, x)
    with pytest.raises(TypeError, match="'STEP' is set by the autotune configs"):
        kernel(out, x, 64, STEP=2)
    with pytest.raises(TypeError, match="chooses its own launch configuration"):
        kernel[1, 32]


# --- on the GPU ---------------------------------------------------------------------------------

@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


@pytest.mark.gpu
def test_the_choice_is_within_5_percent_of_the_best_remeasured():
    import kaiojit.runtime as rt

    if rt.get_backend().name != "cuda":
        pytest.skip("needs the cuda backend")
    n = 1 << 24
    configs = [kj.Config(block=b, grid=(n + b - 1) // b) for b in (32, 64, 128, 256, 512, 1024)]
    kernel = kj.autotune(configs=configs, key=["n"], cache=False)(saxpy)
    x, y = (RNG.standard_normal(n).astype(np.float32) for _ in range(2))
    out = kj.to_device(np.full(n, np.nan, np.float32))
    dx, dy, a = kj.to_device(x), kj.to_device(y), np.float32(RNG.uniform(0.5, 2))
    kernel(out, dx, dy, a, n)
    np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-6)
    chosen = kernel.best_config(out, dx, dy, a, n)
    again = {c.describe(): event_timer(lambda c=c: saxpy[c.grid, c.block](out, dx, dy, a, n),
                                       c, None) for c in configs}
    assert again[chosen.describe()] <= 1.05 * min(again.values()), (chosen, again)
