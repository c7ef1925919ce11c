"""numba's ``get_regs_per_thread`` and friends on ``cuda.jit`` kernels (issue 28), and an
array's ``.dtype`` used as a type inside a kernel."""

import numpy as np

from kaiojit import cuda
from kaiojit.cuda import float32, float64, int64, void

rng = np.random.default_rng()


@cuda.jit
def staged(x, out):
    t = cuda.local.array(8, dtype=x.dtype)  # the argument's dtype, as numba allows
    s = cuda.shared.array(64, dtype=x.dtype)
    i = cuda.threadIdx.x
    s[i] = x[i]
    cuda.syncthreads()
    for j in range(8):
        t[j] = s[(i + j) % 64]
    acc = x.dtype(0)
    for j in range(8):
        acc += t[j] * (j + 1)
    out[i] = acc


def test_array_dtype_in_kernel(kj_backend):
    for dt in (np.float32, np.int64):
        x = (rng.standard_normal(64) * 100).astype(dt)
        out = cuda.to_device(np.full(64, 77, dt))
        staged[1, 64](cuda.to_device(x), out)
        want = np.array([sum(x[(i + j) % 64] * (j + 1) for j in range(8)) for i in range(64)])
        # float32: the 8 weighted terms may cancel, so the bound is on their magnitudes
        size = 36 * float(np.abs(x).max())
        atol = 0 if dt == np.int64 else 4 * float(np.finfo(np.float32).eps) * size
        np.testing.assert_allclose(out.copy_to_host(), want.astype(dt), rtol=1e-6, atol=atol)


def test_resource_getters_by_signature():
    sig32, sig64 = void(float32[::1], float32[::1]), void(int64[::1], int64[::1])
    staged.compile(sig32)
    staged.compile(sig64)
    regs = staged.get_regs_per_thread()
    assert set(regs) >= {sig32.args, sig64.args}
    assert regs[sig32.args] == staged.get_regs_per_thread(sig32) > 0
    assert staged.get_shared_mem_per_block(sig32) == 64 * 4
    assert staged.get_shared_mem_per_block(sig64) == 64 * 8
    assert staged.get_max_threads_per_block(sig32) > 0
    assert isinstance(staged.get_local_mem_per_thread(sig32), int)


@cuda.jit(void(float64[::1]))
def one_signature(x):
    s = cuda.shared.array(100, dtype=float64)
    s[cuda.threadIdx.x] = x[cuda.threadIdx.x]
    cuda.syncthreads()
    x[cuda.threadIdx.x] = s[99 - cuda.threadIdx.x]


def test_resource_getters_of_a_declared_kernel_are_ints():
    assert one_signature.get_shared_mem_per_block() == 800
    assert isinstance(one_signature.get_regs_per_thread(), int)


def test_inspect_lto_ptx_is_the_linked_ptx():
    ptx = one_signature.inspect_lto_ptx((float64[::1],))
    assert ptx == one_signature.inspect_asm(void(float64[::1])) and ".entry" in ptx
