"""Timing kernels as Triton users do with ``triton.testing.do_bench``, plus roofline figures.

``do_bench(fn)`` runs ``fn`` (a callable that launches work) for about ``warmup`` ms, then
times about ``rep`` ms of calls one by one: before each, the L2 cache is flushed by writing a
buffer larger than it (256 MiB on a GPU, as Triton does; 64 MiB on the cpu backend, larger than
a CPU's last-level cache), and each call is timed by a pair of events on the stream (CUDA
events on the GPU; the cpu backend's events read the host clock, and its launches finish before
they return). It returns the mean, median, min, max or all the times in milliseconds, or the
requested quantiles, as Triton's does.

``measure(fn, bytes=..., flops=...)`` gives a :class:`Measurement`: the times' median and
quantiles and, when the call's bytes moved or FLOPs are given, the achieved bandwidth or FLOP/s
and its fraction of the device's peak (a table of NVIDIA datacenter GPUs, :data:`PEAKS`; none
on the cpu backend, or give ``peak_bytes_per_s``/``peak_flops``). ``compare({name: fn})`` or
``Comparison.from_autotune(kernel)`` measure several and show them as a table and, in a notebook
with matplotlib, a bar plot with the 20-80 % quantiles as error bars.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GPU_FLUSH_BYTES = 256 << 20
CPU_FLUSH_BYTES = 64 << 20
RETURN_MODES = ("min", "max", "mean", "median", "all")
MIN_TIMED, MAX_TIMED = 5, 1000

# name fragment (cuDeviceGetName) -> (memory bytes/s, fp32 FLOP/s, dense fp16/bf16 tensor FLOP/s),
# NVIDIA's datasheet figures; the first fragment the device's name contains wins
PEAKS: dict[str, tuple[float, float, float]] = {
    "H200": (4.8e12, 67e12, 989e12),
    "H100 NVL": (3.9e12, 60e12, 835e12),
    "H100 PCIe": (2.0e12, 51e12, 756e12),
    "H100": (3.35e12, 67e12, 989e12),
    "A100-SXM4-80GB": (2.039e12, 19.5e12, 312e12),
    "A100": (1.555e12, 19.5e12, 312e12),
    "L40S": (0.864e12, 91.6e12, 362e12),
}


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean", *,
             flush_l2: bool = True, stream: Any = None) -> float | list[float]:
    """Milliseconds per call of ``fn``, as ``triton.testing.do_bench`` reports them:
    ``quantiles`` (e.g. ``[0.5, 0.2, 0.8]``) gives those quantiles of the times, else
    ``return_mode`` one of "min", "max", "mean", "median" or "all" (the list)."""
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode must be one of {', '.join(RETURN_MODES)}, "
                         f"got {return_mode!r}")
    times = bench_times(fn, warmup, rep, flush_l2=flush_l2, stream=stream)
    if quantiles is not None:
        return [quantile(times, q) for q in quantiles]
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.fmean,
            "median": statistics.median}[return_mode](times)


def bench_times(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, *,
                flush_l2: bool = True, stream: Any = None, max_calls: int = MAX_TIMED
                ) -> list[float]:
    """The milliseconds of each timed call of ``fn`` (see :func:`do_bench`)."""
    from .runtime import Event, get_backend

    flush = _Flush(get_backend()) if flush_l2 else None
    start, end = Event(), Event()
    start.record(stream)
    for _ in range(5):
        fn()
    end.record(stream)
    end.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-4)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    n = min(max(MIN_TIMED, int(rep / estimate)), max_calls)
    pairs = [(Event(), Event()) for _ in range(n)]
    for a, b in pairs:
        if flush is not None:
            flush(stream)
        a.record(stream)
        fn()
        b.record(stream)
    pairs[-1][1].synchronize()
    return [a.elapsed_time(b) for a, b in pairs]


def quantile(times: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``times`` (linear between the two nearest, as torch.quantile)."""
    if not 0 <= q <= 1:
        raise ValueError(f"a quantile is between 0 and 1, got {q}")
    s = sorted(times)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class _Flush:
    """Writes a buffer larger than the last-level cache on the stream before a timed call."""

    def __init__(self, backend: Any):
        from .runtime import device_array

        self.backend = backend
        nbytes = GPU_FLUSH_BYTES if backend.name == "cuda" else CPU_FLUSH_BYTES
        self.buffer = device_array(nbytes, np.uint8)
        self.nbytes = nbytes

    def __call__(self, stream: Any) -> None:
        from .runtime.stream import stream_handle

        self.backend.memset(self.buffer.ptr, 0, self.nbytes, stream_handle(stream))


def device_peaks() -> tuple[str, tuple[float, float, float] | None]:
    """The current device's name and its :data:`PEAKS` row (None where not known: the cpu
    backend, a GPU not in the table)."""
    from .runtime import get_backend

    backend = get_backend()
    if backend.name != "cuda":
        return f"{backend.name} backend", None
    name = device_name(backend)
    return name, next((row for frag, row in PEAKS.items() if frag in name), None)


def device_name(backend: Any) -> str:
    """The CUDA device's name (``cuDeviceGetName``)."""
    from .runtime.driver import check

    dev = backend.current_device()
    raw = check(backend.drv.cuDeviceGetName(256, dev))
    return (raw.decode() if isinstance(raw, bytes) else str(raw)).split("\0")[0].strip()


@dataclass(frozen=True)
class Measurement:
    """The times of one function, and the roofline figures its bytes or FLOPs give."""

    name: str
    times_ms: tuple[float, ...]
    bytes: float | None = None
    flops: float | None = None
    peak_bytes_per_s: float | None = None
    peak_flops: float | None = None
    device: str = ""

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def p20_ms(self) -> float:
        return quantile(self.times_ms, 0.2)

    @property
    def p80_ms(self) -> float:
        return quantile(self.times_ms, 0.8)

    @property
    def bytes_per_s(self) -> float | None:
        """Achieved bandwidth at the median time (None without ``bytes``)."""
        return None if self.bytes is None else self.bytes / (self.median_ms * 1e-3)

    @property
    def flops_per_s(self) -> float | None:
        return None if self.flops is None else self.flops / (self.median_ms * 1e-3)

    @property
    def fraction_of_peak(self) -> float | None:
        """Achieved over peak: bandwidth if ``bytes`` were given, else FLOP/s; None without
        a known peak."""
        if self.bytes_per_s is not None and self.peak_bytes_per_s:
            return self.bytes_per_s / self.peak_bytes_per_s
        if self.flops_per_s is not None and self.peak_flops:
            return self.flops_per_s / self.peak_flops
        return None

    def summary(self) -> str:
        parts = [f"{self.name}: median {self.median_ms:.4f} ms "
                 f"(20-80 %: {self.p20_ms:.4f}-{self.p80_ms:.4f}, {len(self.times_ms)} calls)"]
        if self.bytes_per_s is not None:
            parts.append(f"{self.bytes_per_s / 1e9:.1f} GB/s")
        if self.flops_per_s is not None:
            parts.append(f"{self.flops_per_s / 1e12:.3f} TFLOP/s")
        if self.fraction_of_peak is not None:
            parts.append(f"{self.fraction_of_peak:.0%} of {self.device}'s peak")
        return ", ".join(parts)

    __str__ = summary

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())


def measure(fn: Callable[[], Any], *, name: str | None = None, bytes: float | None = None,
            flops: float | None = None, warmup: float = 25, rep: float = 100,
            flush_l2: bool = True, stream: Any = None, tensor_cores: bool = False,
            peak_bytes_per_s: float | None = None, peak_flops: float | None = None
            ) -> Measurement:
    """Time ``fn`` (see :func:`do_bench`) and relate it to the device's peak: ``bytes`` moved
    or ``flops`` done per call give the achieved rate; the peak FLOP/s is the fp32 one, or
    the dense fp16/bf16 tensor-core one with ``tensor_cores=True``."""
    times = bench_times(fn, warmup, rep, flush_l2=flush_l2, stream=stream)
    device, row = device_peaks()
    if row is not None:
        peak_bytes_per_s = peak_bytes_per_s or row[0]
        peak_flops = peak_flops or (row[2] if tensor_cores else row[1])
    return Measurement(name or getattr(fn, "__name__", "fn"), tuple(times), bytes, flops,
                       peak_bytes_per_s, peak_flops, device)


@dataclass
class Comparison:
    """Several measurements side by side: a table (text and HTML) and :meth:`plot`."""

    measurements: list[Measurement] = field(default_factory=list)
    title: str = "kaiojit.bench"

    def table(self) -> list[tuple[str, str, str, str]]:
        rows = []
        for m in self.measurements:
            rate = ("" if m.bytes_per_s is None else f"{m.bytes_per_s / 1e9:.1f} GB/s") or (
                "" if m.flops_per_s is None else f"{m.flops_per_s / 1e12:.3f} TFLOP/s")
            peak = "" if m.fraction_of_peak is None else f"{m.fraction_of_peak:.0%}"
            rows.append((m.name, f"{m.median_ms:.4f} ({m.p20_ms:.4f}-{m.p80_ms:.4f})", rate,
                         peak))
        return rows

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        head = ("name", "median ms (20-80 %)", "rate", "of peak")
        rows = [head, *self.table()]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        p.text("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                         for r in rows))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("name", "median ms (20-80 %)", "rate",
                                                  "of peak"))
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self.table())
        return (f"<table><caption>{html.escape(self.title)}</caption><tr>{head}</tr>{body}"
                "</table>")

    def plot(self, ax: Any = None) -> Any:
        """A bar plot of the medians with 20-80 % error bars (matplotlib); returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(max(4, 1.2 * len(self.measurements)), 3))
        names = [m.name for m in self.measurements]
        med = [m.median_ms for m in self.measurements]
        err = [[m.median_ms - m.p20_ms for m in self.measurements],
               [m.p80_ms - m.median_ms for m in self.measurements]]
        ax.bar(names, med, yerr=err, capsize=4, color="#4a6fa5")
        ax.set_ylabel("ms per call (median)")
        ax.set_title(self.title)
        ax.tick_params(axis="x", labelrotation=30)
        return ax

    @classmethod
    def from_autotune(cls, tuner: Any, key: Any = None) -> Comparison:
        """An autotuned kernel's configurations as the tuner timed them (for ``key``, by
        default the last one tuned); configs that could not run are left out."""
        if not tuner.history:
            raise ValueError(f"{tuner.__qualname__} has not been tuned yet: call it first")
        tried = tuner.history[key if key is not None else next(reversed(tuner.history))]
        return cls([Measurement(str(c), (ms,)) for c, ms, _ in tried if ms is not None],
                   title=f"kj.autotune: {tuner.__qualname__}")


def compare(fns: Mapping[str, Callable[[], Any]], **measure_args: Any) -> Comparison:
    """:func:`measure` each of ``fns`` (by name) with the same arguments."""
    return Comparison([measure(fn, name=name, **measure_args) for name, fn in fns.items()])


__all__ = ["PEAKS", "Comparison", "Measurement", "bench_times", "compare", "device_peaks",
           "do_bench", "measure", "quantile"]
