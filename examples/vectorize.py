"""Elementwise kernels from scalar functions with ``@kj.vectorize``, numba's CUDA ufuncs.

The discriminant example of numba-cuda's documentation, moved over by changing the imports,
then the same ufunc on device arrays with broadcasting, ``out=`` and a stream. Runs on a GPU
when one is usable, else on kaiojit's cpu backend.
"""

import math

import numpy as np

import kaiojit as kj


@kj.vectorize(["float32(float32, float32, float32)",
               "float64(float64, float64, float64)"], target="cuda")
def cu_discriminant(a, b, c):
    return math.sqrt(b ** 2 - 4 * a * c)


def main(n: int = 10000) -> dict:
    rng = np.random.default_rng()
    dtype = np.float32
    a = rng.random(n, dtype=dtype)
    b = rng.random(n, dtype=dtype) + 10
    c = rng.random(n, dtype=dtype)

    d = cu_discriminant(a, b, c)  # NumPy in, NumPy out (copied to the device and back)
    expected = np.sqrt(b ** 2 - 4 * a * c)
    np.testing.assert_allclose(d, expected, rtol=1e-6)
    print(f"discriminant of {n} float32 triples on the {kj.backend()} backend: matches NumPy")

    # device arrays stay on the device; a column of `a` meets a row of `c` (broadcasting),
    # written into a preallocated array on a stream of our own
    rows = 64
    d_a = kj.to_device(a[:rows].astype(np.float64).reshape(rows, 1))
    d_c = kj.to_device(c[:rows].astype(np.float64))
    out = kj.device_array((rows, rows), np.float64)
    stream = kj.Stream()
    cu_discriminant(d_a, 12.0, d_c, out=out, stream=stream)
    table = out.copy_to_host(stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(table, np.sqrt(144.0 - 4 * d_a.copy_to_host() * d_c.copy_to_host()),
                               rtol=1e-12)
    print(f"a {rows} x {rows} table from a column and a row on a stream: matches NumPy")
    return {"discriminant": d, "expected": expected, "table": table}


if __name__ == "__main__":
    main()
