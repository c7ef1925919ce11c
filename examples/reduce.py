"""Reductions on the device with ``@kj.reduce``, numba's ``cuda.reduce``.

numba-cuda's documented sum example, moved over by changing the imports, then a maximum
written into a device array. Runs on a GPU when one is usable, else on the cpu backend.
"""

import numpy as np

import kaiojit as kj


@kj.reduce
def sum_reduce(a, b):
    return a + b


@kj.reduce
def max_reduce(a, b):
    return max(a, b)


def main() -> dict:
    a = np.arange(1234, dtype=np.float64) + 1
    expect = a.sum()  # NumPy's sum
    got = sum_reduce(a)  # the device's
    assert expect == got, (expect, got)
    print(f"sum of 1..1234 on the {kj.backend()} backend: {got}")

    values = np.random.default_rng().standard_normal(1 << 20).astype(np.float32)
    result = kj.to_device(np.full(1, np.nan, np.float32))
    max_reduce(kj.to_device(values), res=result, init=-np.inf)
    largest = result.copy_to_host()[0]
    assert largest == values.max(), (largest, values.max())
    print(f"maximum of {values.size} float32 into a device array: {largest}")
    return {"sum": got, "expected_sum": expect, "max": largest, "expected_max": values.max()}


if __name__ == "__main__":
    main()
