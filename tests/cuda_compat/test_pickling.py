"""Pickling kernels, device functions, configured launches and ufuncs (issue 28; numba's
test_serialize): a function of a module's top level travels by reference, one defined in a
function by value (its code, the globals it names, its closure), and compiles again where
it is loaded, in this process or another."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda

rng = np.random.default_rng()


@kj.jit
def top_level(a, v):
    i = kj.grid(1)
    if i < a.size:
        a[i] = a[i] * v


def _kernel_with_a_closure(offset):
    @cuda.jit(device=True)
    def shifted(x):
        return x + offset

    @cuda.jit
    def apply(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = shifted(np.float64(x[i]))
    return apply


def test_a_local_kernel_travels_by_value_and_compiles_again(kj_backend):
    offset = float(rng.standard_normal())
    kernel = _kernel_with_a_closure(offset)
    x = rng.standard_normal(int(rng.integers(2, 60)))
    for rebuilt in (pickle.loads(pickle.dumps(kernel)),
                    pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(kernel))))):
        assert rebuilt is not kernel and type(rebuilt) is type(kernel)
        out = cuda.to_device(np.full(x.size, np.nan))
        rebuilt[1, 64](out, cuda.to_device(x))
        np.testing.assert_array_equal(out.copy_to_host(), x + offset)


def test_a_top_level_kernel_and_the_scalar_types_travel_by_reference():
    assert pickle.loads(pickle.dumps(top_level)) is top_level
    for t in (kj.float32, kj.int64, kj.bfloat16):
        assert pickle.loads(pickle.dumps(t)) is t


def test_a_pickled_kernel_runs_in_another_process(tmp_path):
    offset = float(rng.integers(1, 1000))
    path = tmp_path / "kernel.pickle"
    path.write_bytes(pickle.dumps(_kernel_with_a_closure(offset)))
    program = (
        "import pickle, sys, numpy as np\n"
        "from kaiojit import cuda\n"
        "k = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "x = np.arange(5.0)\n"
        "out = cuda.to_device(np.full(5, np.nan))\n"
        "k[1, 32](out, cuda.to_device(x))\n"
        "print((out.copy_to_host() - x).tolist())\n")
    done = subprocess.run([sys.executable, "-c", program, str(path)], check=False,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KAIOJIT_BACKEND": "cpu"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([offset] * 5)


def test_configured_launches_pickle_with_numbas_dimensions(kj_backend):
    kernel = _kernel_with_a_closure(1.0)
    grid, block = int(rng.integers(1, 9)), (int(rng.integers(1, 32)), 2)
    launch = pickle.loads(pickle.dumps(kernel[grid, block]))
    assert launch.griddim == (grid, 1, 1) and launch.blockdim == (*block, 1)
    with pytest.raises(pickle.PicklingError, match="configured with a stream"):
        pickle.dumps(kernel[grid, block, cuda.stream()])


def test_ufuncs_pickle_and_compute_again(kj_backend):
    @cuda.vectorize(["float64(float64)", "int64(int64)"])
    def twice(x):
        return x * 2

    @cuda.guvectorize(["(f8[:], f8[:])"], "(n)->()")
    def total(x, out):
        s = 0.0
        for v in x:
            s += v
        out[0] = s

    x = rng.standard_normal((3, int(rng.integers(2, 9))))
    twice2, total2 = pickle.loads(pickle.dumps((twice, total)))
    assert type(twice2) is type(twice) and type(total2) is type(total)
    np.testing.assert_array_equal(twice2(x), x * 2)
    np.testing.assert_allclose(total2(x), x.sum(axis=1), rtol=1e-12)
