"""saxpy with kaiojit: compile, launch, check against NumPy.

Runs on a GPU when one is usable, else on kaiojit's cpu backend (same kernel, same results).
"""

import numpy as np

import kaiojit as kj


@kj.jit
def saxpy(out, x, y, a, n):
    i = kj.grid(1)
    if i < n:
        out[i] = a * x[i] + y[i]


def main() -> None:
    n = 1 << 20
    rng = np.random.default_rng()
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    a = np.float32(rng.uniform(-2.0, 2.0))

    d_x, d_y = kj.to_device(x), kj.to_device(y)
    d_out = kj.to_device(np.full(n, np.nan, dtype=np.float32))  # poisoned: every element must be written
    block = 256
    saxpy[(n + block - 1) // block, block](d_out, d_x, d_y, a, np.int32(n))
    out = d_out.copy_to_host()

    expected = a * x + y
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    sig = saxpy.signatures[0]
    print(f"saxpy over {n} float32 on the {kj.backend()} backend: matches NumPy")
    print(f"signature: {sig}")
    print("PTX (sm_90) of the same kernel, first lines:")
    ptx = kj.compile_ptx(saxpy, sig, arch="sm_90")
    for line in ptx.splitlines()[:12]:
        print("   ", line)


if __name__ == "__main__":
    main()
