"""numba's inline= and forceinline= as kaiojit's inline option: "always" (alwaysinline),
"never" (noinline), or LLVM's choice; cuda.compile's forceinline only for LTO-IR."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda, types

rng = np.random.default_rng()
SIG = (types.float32[::1], types.float32[::1])


def make(**options):
    @cuda.jit(device=True, **options)
    def scaled(v):
        return v * 3.0 + 1.0

    @cuda.jit(SIG)
    def kernel(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = scaled(x[i])
    return kernel


@pytest.mark.parametrize("options, called", [
    ({"inline": "never"}, True), ({"inline": False}, True),
    ({"inline": "always"}, False), ({"inline": True}, False), ({"forceinline": True}, False),
    ({}, False), ({"inline": lambda expr, caller, callee: False}, False),
], ids=["never", "False", "always", "True", "forceinline", "default", "cost-model"])
def test_inline_options_keep_or_inline_the_call(kj_backend, options, called):
    kernel = make(**options)
    x = rng.standard_normal(int(rng.integers(20, 200))).astype(np.float32)
    out = kj.to_device(np.full(x.size, np.nan, np.float32))
    kernel[(x.size + 63) // 64, 64](out, kj.to_device(x))
    np.testing.assert_allclose(out.copy_to_host(), x * 3.0 + 1.0, rtol=1e-6, atol=1e-6)
    ck = kernel.compile(kj.Signature(SIG))
    assert bool(re.search(r"call\.uni\s+\(retval0\),\s+scaled_dev_", ck.ptx)) == called
    attr = {"never": "noinline", "always": "alwaysinline"}.get(
        {False: "never", True: "always"}.get(options.get("inline"), options.get("inline")))
    if options.get("forceinline"):
        attr = "alwaysinline"
    unoptimized = ck.stage("llvm_unoptimized")
    head = re.search(r"define internal \S+ @\"?scaled_dev_[^\n]*", unoptimized).group(0)
    assert (attr in head) if attr else ("inline" not in head), head


def test_bad_inline_values_and_forceinline_outside_ltoir():
    with pytest.raises(ValueError, match=r"inline is 'always', 'never' or '' \(LLVM decides\), "
                                         r"got 'sometimes'"):
        kj.jit(inline="sometimes")
    with pytest.raises(ValueError, match=r"inline is 'always', 'never', a bool or a cost-model "
                                         r"function, got 3"):
        cuda.jit(inline=3)

    def set_zero(a):
        a[0] = 0

    with pytest.raises(ValueError, match=r"Can only designate forced inlining in LTO-IR"):
        cuda.compile(set_zero, (types.float32[::1],), device=True, forceinline=True)
    forced, resty = cuda.compile(set_zero, (types.float32[::1],), device=True,
                                 output="ltoir", forceinline=True)
    plain, _ = cuda.compile(set_zero, (types.float32[::1],), device=True, output="ltoir")
    assert resty == types.none
    assert "alwaysinline" in forced and "alwaysinline" not in plain
