"""kaiojit.bench (do_bench as Triton's, measure and compare with roofline figures), the
``kaiojit`` logger turned on at run time, and autotuning progress through it."""

from __future__ import annotations

import io
import logging
import statistics

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import bench

rng = np.random.default_rng()


@kj.jit
def scale(out, x, a):
    i = kj.grid(1)
    if i < x.size:
        out[i] = a * x[i]


@pytest.fixture
def cpu():
    previous = kj.set_backend("cpu")
    yield
    kj.set_backend(previous)


def _launcher(n: int):
    x = kj.to_device(rng.standard_normal(n).astype(np.float32))
    out = kj.device_array(n, np.float32)
    a = np.float32(rng.uniform(1, 2))
    calls = []

    def run():
        scale[(n + 255) // 256, 256](out, x, a)
        calls.append(1)
    return run, calls, (out, x, a)


def test_do_bench_times_every_call_after_an_l2_flush(cpu, monkeypatch):
    run, calls, (out, x, a) = _launcher(int(rng.integers(1000, 5000)))
    backend = kj.runtime.get_backend()
    flushes = []
    real = backend.memset
    monkeypatch.setattr(backend, "memset", lambda *args: (flushes.append(args[2]), real(*args)))
    times = bench.do_bench(run, warmup=1, rep=2, return_mode="all")
    np.testing.assert_allclose(out.copy_to_host(), a * x.copy_to_host(), rtol=1e-6)
    assert len(times) >= bench.MIN_TIMED and all(t > 0 for t in times)
    assert flushes == [bench.CPU_FLUSH_BYTES] * len(times)  # one flush before each timed call
    assert len(calls) > len(times) + 5  # the estimate and the warm-up ran first
    q20, q50, q80 = bench.do_bench(run, warmup=1, rep=2, quantiles=[0.2, 0.5, 0.8])
    assert q20 <= q50 <= q80
    with pytest.raises(ValueError, match="return_mode must be one of min, max, mean, median, "
                                         "all, got 'avg'"):
        bench.do_bench(run, return_mode="avg")


def test_quantile_is_numpys_linear_quantile():
    data = list(rng.standard_normal(int(rng.integers(1, 50))))
    for q in rng.uniform(0, 1, 5):
        assert bench.quantile(data, q) == pytest.approx(float(np.quantile(data, q)))


def test_measure_reports_bandwidth_against_a_given_peak(cpu):
    n = int(rng.integers(1000, 5000))
    run, _, _ = _launcher(n)
    m = bench.measure(run, name="scale", bytes=8 * n, warmup=1, rep=2)
    assert m.device == "cpu backend" and m.peak_bytes_per_s is None
    assert m.fraction_of_peak is None
    assert m.bytes_per_s == 8 * n / (statistics.median(m.times_ms) * 1e-3)
    peak = float(rng.uniform(1e10, 1e12))
    given = bench.measure(run, name="scale", bytes=8 * n, warmup=1, rep=2, peak_bytes_per_s=peak)
    assert given.fraction_of_peak == pytest.approx(given.bytes_per_s / peak)
    assert f"{given.fraction_of_peak:.0%} of cpu backend's peak" in given.summary()
    flops = bench.measure(run, flops=float(n), warmup=1, rep=2, peak_flops=peak)
    assert flops.fraction_of_peak == pytest.approx(flops.flops_per_s / peak)


def test_the_peak_table_matches_device_names(monkeypatch):
    assert bench.device_peaks()[1] is None or kj.runtime.get_backend().name == "cuda"
    for name, row in [("NVIDIA H200", bench.PEAKS["H200"]),
                      ("NVIDIA H100 80GB HBM3", bench.PEAKS["H100"]),
                      ("NVIDIA H100 PCIe", bench.PEAKS["H100 PCIe"])]:
        assert next(r for frag, r in bench.PEAKS.items() if frag in name) == row


def test_compare_and_an_autotuners_configs(cpu):
    run, _, _ = _launcher(2048)
    c = bench.compare({"first": run, "second": run}, bytes=8 * 2048, warmup=1, rep=2)
    html = c._repr_html_()
    assert [r[0] for r in c.table()] == ["first", "second"] and html.count("<tr>") == 3

    times = {b: float(t) for b, t in zip((64, 128, 256), rng.permutation(3) + 1)}

    @kj.autotune(configs=[kj.Config(block=b, grid=lambda a, b=b: ((a["n"] + b - 1) // b,))
                          for b in (64, 128, 256)], key=["n"], cache=False,
                 timer=lambda run, config, stream: (run(), times[config.block])[1])
    @kj.jit
    def doubled(out, x, n):
        i = kj.grid(1)
        if i < n:
            out[i] = 2 * x[i]

    n = int(rng.integers(500, 3000))
    x = rng.standard_normal(n).astype(np.float32)
    out = kj.to_device(np.full(n, np.nan, np.float32))
    stream = io.StringIO()
    kj.set_log_level("INFO", stream)
    try:
        doubled(out, kj.to_device(x), np.int32(n))
    finally:
        kj.set_log_level("OFF")
    np.testing.assert_array_equal(out.copy_to_host(), 2 * x)
    tuned = bench.Comparison.from_autotune(doubled)
    assert [m.median_ms for m in tuned.measurements] == [times[b] for b in (64, 128, 256)]
    lines = [ln for ln in stream.getvalue().splitlines() if "autotune" in ln]
    assert len(lines) == 3 and all(ln.startswith("kaiojit: autotune ") and
                                   f".doubled[n={n}](" in ln for ln in lines)
    best_first_two = min(times[64], times[128])
    assert lines[0].endswith(f"config 1/3 Config(block=64, grid=<lambda>): {times[64]:.4f} ms; "
                             f"best so far {times[64]:.4f} ms: Config(block=64, grid=<lambda>)")
    assert f"best so far {best_first_two:.4f} ms" in lines[1]
    assert f"best so far {min(times.values()):.4f} ms" in lines[2]
    compiled = [ln for ln in stream.getvalue().splitlines() if ln.startswith("kaiojit: compiled")]
    assert compiled and all("doubled(" in ln and " ms (kir " in ln for ln in compiled)


def test_plot_draws_a_bar_per_measurement():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ms = [bench.Measurement(f"k{i}", tuple(rng.uniform(1, 2, 5))) for i in range(3)]
    ax = bench.Comparison(ms).plot()
    assert [p.get_height() for p in ax.patches] == [m.median_ms for m in ms]


def test_set_log_level_rejects_unknown_levels():
    with pytest.raises(ValueError, match="log level must be DEBUG, INFO, WARNING, ERROR, OFF"):
        kj.set_log_level("LOUD")
    assert kj.set_log_level("OFF").level > logging.CRITICAL
