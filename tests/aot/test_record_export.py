"""Arrays of records (NumPy structured dtypes, aligned and packed) through export: the manifest's
signature reads back, the loader launches them, the C header defines each record as a struct of
NumPy's exact layout, and a C program that fills the structs gets the kernel's results."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import aot
from kaiojit import types as kt
from kaiojit.aot.cheader import record_struct
from kaiojit.runtime.backend import set_backend
from kaiojit.runtime.mock import MockBackend
from tests.aot import kernels as K

FIELDS = [("x", "f4"), ("n", "i2"), ("y", "f8"), ("b", "?"), ("z", "c8"), ("u", "u1")]
CC = shutil.which(os.environ.get("CC", "cc"))
CXX = shutil.which("c++") or shutil.which("g++")
rng = np.random.default_rng()


def _dtype(aligned: bool) -> np.dtype:
    return np.dtype(FIELDS, align=aligned)


def _signature(aligned: bool) -> str:
    return f"void({kt.from_dtype(_dtype(aligned))}[::1], float64[::1])"


def _expect(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """out, and the fields x and n after the kernel."""
    out = (a["x"].astype(np.float64) * 2 + a["y"] + a["n"] + a["b"]
           + a["z"].imag.astype(np.float64) + a["u"])
    return out, a["y"].astype(np.float32), a["n"] + 3


@pytest.fixture(scope="module")
def host_export(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("records"))
    previous = set_backend("cpu")
    try:
        aot.export(out, {K.record_sum: [_signature(True), _signature(False)]}, target="host")
    finally:
        set_backend(previous)
    return out


def test_a_record_signature_reads_back():
    for aligned in (True, False):
        sig = kt.parse_signature(_signature(aligned))
        assert sig.args[0] == kt.ArrayType(kt.from_dtype(_dtype(aligned)), 1, "C")
        assert str(sig) == _signature(aligned)
    with pytest.raises(ValueError, match="bad record field 'x: float99@0'"):
        kt.parse_type("Record(x: float99@0; 4)[::1]")


@pytest.mark.parametrize("aligned", [True, False])
def test_records_reloaded_on_the_cpu_match_numpy(host_export, aligned):
    previous = set_backend("cpu")
    try:
        n = int(rng.integers(50, 300))
        a = np.empty(n, _dtype(aligned))
        a["x"], a["y"] = rng.standard_normal(n), rng.standard_normal(n)
        a["n"], a["b"] = rng.integers(-100, 100, n), rng.random(n) > 0.5
        a["z"] = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        a["u"] = rng.integers(1, 255, n)
        d = kj.to_device(a)
        out = kj.to_device(np.full(n, np.nan))
        aot.load(host_export).record_sum[(n + 63) // 64, 64](d, out)
        want, x, count = _expect(a)
        np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-6)
        got = d.copy_to_host()
        np.testing.assert_array_equal(got["x"], x)
        np.testing.assert_array_equal(got["n"], count)
        np.testing.assert_array_equal(got["y"], a["y"])  # untouched fields stay
    finally:
        set_backend(previous)


def test_the_header_defines_each_record_with_its_layout(host_export):
    header = open(os.path.join(host_export, "kaiojit_kernels.h")).read()
    aligned, packed = (record_struct(kt.from_dtype(_dtype(a))) for a in (True, False))
    assert (f"typedef struct {aligned} {{\n    float x;  /* float32 */\n    int16_t n;  /* int16 "
            "*/\n    unsigned char _pad0[2];\n    double y;  /* float64 */") in header
    assert f"#pragma pack(push, 1)\ntypedef struct {packed} {{\n    float x;" in header
    assert f"void *a /* of {aligned} */" in header and f"void *a /* of {packed} */" in header
    assert f"[offsetof({packed}, y) == 6 ? 1 : -1];" in header


PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kaiojit_kernels.h"

int main(int argc, char **argv)
{
    long n = atol(argv[1]), i;
    REC *a = (REC *)calloc((size_t)n, sizeof(REC));
    double *out = (double *)malloc(sizeof(double) * (size_t)n);
    int64_t shape[1] = {n};
    kaiojit_launch_config c = {{(unsigned)((n + 63) / 64), 1, 1}, {64, 1, 1}, 0, NULL,
                               {0, 0, 0}};
    FILE *f;
    (void)argc;
    if (!a || !out) return 3;
    for (i = 0; i < n; i++) {
        a[i].x = 0.25f * (float)i;
        a[i].n = (int16_t)(i - 50);
        a[i].y = 1.5 * (double)i - 7.0;
        a[i].b = i % 3 == 0;
        a[i].z[0] = 1.0f;
        a[i].z[1] = 0.125f * (float)i;
        a[i].u = (uint8_t)(i % 200);
        out[i] = NAN;
    }
    if (LAUNCH(&c, a, shape, out, shape)) return 4;
    f = fopen(argv[2], "wb");
    fwrite(a, sizeof(REC), (size_t)n, f);
    fwrite(out, sizeof(double), (size_t)n, f);
    fclose(f);
    return 0;
}
"""


@pytest.mark.skipif(CC is None or CXX is None, reason="no C or C++ compiler")
@pytest.mark.parametrize("aligned", [True, False])
def test_a_c_program_fills_the_structs_and_gets_the_kernels_results(host_export, aligned,
                                                                      tmp_path):
    from kaiojit.aot.exporter import c_function_name

    dt = _dtype(aligned)
    launch = c_function_name("record_sum", kt.parse_signature(_signature(aligned)))
    defines = [f"-DREC={record_struct(kt.from_dtype(dt))}", f"-DLAUNCH={launch}"]
    source = tmp_path / "main.c"
    source.write_text(PROGRAM)
    for compiler, std in ((CXX, ["-std=c++17", "-x", "c++"]), (CC, ["-std=c99"])):
        done = subprocess.run([compiler, *std, "-Wall", "-Wextra", "-Werror", *defines,
                               f"-I{host_export}", "-o", str(tmp_path / "main"), str(source),
                               os.path.join(host_export, "kaiojit_kernels.c"),
                               f"-L{host_export}", "-lkaiojit_kernels", "-lpthread", "-lm",
                               f"-Wl,-rpath,{host_export}"], capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, done.stderr
    n = int(rng.integers(100, 400))
    result = tmp_path / "result"
    done = subprocess.run([str(tmp_path / "main"), str(n), str(result)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    raw = result.read_bytes()
    got = np.frombuffer(raw[:n * dt.itemsize], dt)
    out = np.frombuffer(raw[n * dt.itemsize:], np.float64)
    i = np.arange(n)
    before = np.zeros(n, dt)
    before["x"], before["n"], before["y"] = 0.25 * i, i - 50, 1.5 * i - 7.0
    before["b"], before["z"], before["u"] = i % 3 == 0, 1 + 0.125j * i, i % 200
    want, x, count = _expect(before)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_array_equal(got["x"], x)
    np.testing.assert_array_equal(got["n"], count)
    np.testing.assert_array_equal(got["z"], before["z"])


def test_records_export_for_the_gpu_and_launch_on_the_mock(tmp_path):
    mock = MockBackend(compute_capability=(9, 0))
    previous = set_backend(mock)
    try:
        manifest = aot.export(str(tmp_path), {K.record_sum: [_signature(False)]},
                              archs=["sm_90"])
        a = kj.to_device(np.zeros(64, _dtype(False)))
        aot.load(str(tmp_path)).record_sum[1, 64](a, kj.to_device(np.zeros(64)))
        cubin = manifest.entries[0].cubins["sm_90"]
        assert mock.loaded_images == [(tmp_path / cubin).read_bytes()]
        assert mock.launches[-1].block == (64, 1, 1)
    finally:
        set_backend(previous)
