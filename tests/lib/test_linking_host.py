"""Foreign CUDA C on the cpu backend (kaiojit/hostcu.py): a declared device function's .cu
files compiled for the host, in numba's ABI and C's, pointers from ffi.from_buffer, and the
errors, each located at the kernel's call."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import cuda, hostcu
from kaiojit.cuda import types
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located, assert_no_internals, position_of

cffi = pytest.importorskip("cffi")
rng = np.random.default_rng()
pytestmark = pytest.mark.skipif(hostcu.compiler() is None, reason="needs a host C++ compiler")

# numba's ABI: int name(T *ret, args...); scale3 calls affine, defined in the other file
AFFINE_CU = """
extern "C" __device__ int affine(int *out, int a, int b) { *out = a * 7 - b; return 0; }
"""
SCALE_CU = """
extern "C" __device__ int affine(int *out, int a, int b);
extern "C" __device__ int scale3(int *out, int a) {
  int t;
  affine(&t, a, 1);
  *out = 3 * t;
  return 0;
}
"""


@pytest.fixture
def cpu_backend(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("the cpu backend's host compilation of CUDA C")
    return kj_backend


def test_numba_abi_functions_of_two_linked_files_run_on_the_cpu_backend(cpu_backend, tmp_path):
    path = tmp_path / "affine.cu"
    path.write_text(AFFINE_CU)
    affine = kj.declare_device("affine", "int32(int32, int32)", link=[str(path)])
    scale3 = cuda.declare_device("scale3", "int32(int32)",
                                 link=(str(path), cuda.CUSource(SCALE_CU)))

    @kj.jit
    def kernel(out, x, y):
        i = kj.grid(1)
        if i < x.size:
            out[i] = affine(x[i], y[i]) + scale3(x[i])

    n = int(rng.integers(40, 300))
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    y = rng.integers(-1000, 1000, n).astype(np.int32)
    out = kj.to_device(np.full(n, -12345, np.int32))
    kernel[(n + 63) // 64, 64](out, kj.to_device(x), kj.to_device(y))
    np.testing.assert_array_equal(out.copy_to_host(), (x * 7 - y) + 3 * (x * 7 - 1))


def test_c_abi_zero_two_arguments_and_void_with_a_pointer(cpu_backend):
    ffi = cffi.FFI()
    seed = int(rng.integers(1, 1000))
    const = cuda.declare_device("hostcu_const", "int32()", abi="c", link=cuda.CUSource(
        f'extern "C" __device__ int hostcu_const() {{ return {seed}; }}'))
    mix = cuda.declare_device("hostcu_mix", "float64(float64, int32)", abi="c",
                              link=cuda.CUSource('extern "C" __device__ double hostcu_mix('
                                                 'double a, int b) { return a * b + 0.5; }'))
    poke = cuda.declare_device("hostcu_poke", types.void(types.CPointer(types.float64)),
                               abi="c", link=cuda.CUSource(
                                   'extern "C" __device__ void hostcu_poke(double *p) '
                                   '{ p[0] = -p[0]; }'))

    @kj.jit
    def kernel(out, x, k):
        i = kj.grid(1)
        if i < x.size:
            out[i] = mix(x[i], k[i]) + const()
            poke(ffi.from_buffer(x[i:]))  # negates x[i] in place

    n = int(rng.integers(40, 300))
    x = rng.standard_normal(n)
    k = rng.integers(-50, 50, n).astype(np.int32)
    out, dx = kj.to_device(np.full(n, np.nan)), kj.to_device(x)
    kernel[(n + 31) // 32, 32](out, dx, kj.to_device(k))
    np.testing.assert_array_equal(out.copy_to_host(), x * k + 0.5 + seed)
    np.testing.assert_array_equal(dx.copy_to_host(), -x)
    gpu_ptx = compile_for_gpu(kernel)[0]  # the GPU's calls in C's ABI, the pointer passed on
    assert "call.uni hostcu_poke, (param0);" in gpu_ptx
    assert "call.uni (retval0), hostcu_mix, (param0, param1);" in gpu_ptx


def test_one_name_in_two_libraries_keeps_each_kernel_on_its_own(cpu_backend):
    numba_abi = cuda.declare_device("hostcu_twice", "int32(int32)", link=cuda.CUSource(
        'extern "C" __device__ int hostcu_twice(int *r, int a) { *r = 2 * a; return 0; }'))

    @kj.jit
    def first(out, x):
        out[0] = numba_abi(x[0])

    v = int(rng.integers(-10**6, 10**6))
    x = kj.to_device(np.array([v], np.int32))
    first[1, 1](kj.device_array(1, np.int32), x)  # compiled before the name is declared again
    c_abi = cuda.declare_device("hostcu_twice", "int32(int32)", abi="c", link=cuda.CUSource(
        'extern "C" __device__ int hostcu_twice(int a) { return 2 * a + 1; }'))

    @kj.jit
    def second(out, x):
        out[0] = c_abi(x[0])

    for kernel, want in ((first, 2 * v), (second, 2 * v + 1), (first, 2 * v)):
        out = kj.to_device(np.array([-7], np.int32))
        kernel[1, 1](out, x)
        assert out.copy_to_host()[0] == want


def uses_thread_index(out):
    out[0] = no_host()


no_host = cuda.declare_device("hostcu_tid", "int32()", abi="c", link=cuda.CUSource(
    'extern "C" __device__ int hostcu_tid() { return threadIdx.x; }'))


def test_cuda_c_without_a_host_meaning_is_the_compilers_located_error(cpu_backend):
    with pytest.raises(kj.CompileError, match=r"(?s)hostcu_tid\(\): the cpu backend runs foreign "
                                              r"CUDA C on the host, compiled as C\+\+ by .*"
                                              r"threadIdx. was not declared") as e:
        kj.jit(uses_thread_index)[1, 1](kj.device_array(1, np.int32))
    # the compiler's lines come between the location and the kernel's line with its caret
    filename, line, col = position_of(uses_thread_index, "no_host()")
    text = str(e.value)
    assert text.startswith(f"{filename}:{line}:{col}: ") and "{ return threadIdx.x; }" in text
    assert text.endswith("out[0] = no_host()\n             ^^^^^^^^^"), text
    assert_no_internals(e.value)


def calls_mangled(out):
    out[0] = mangled(1)


mangled = cuda.declare_device("hostcu_mangled", "int32(int32)", abi="c", link=cuda.CUSource(
    "__device__ int hostcu_mangled(int a) { return a; }"))


def calls_ptx_only(out):
    out[0] = ptx_only(1)


ptx_only = cuda.declare_device("hostcu_ptx", "int32(int32)", link=cuda.PTXSource(
    ".version 8.0\n.target sm_90\n.address_size 64\n"))


@pytest.mark.parametrize("kernel, snippet, cls, words", [
    (calls_mangled, "mangled(1)", kj.CompileError,
     (r"define no function 'hostcu_mangled' \(a declared device function is looked up by its C "
     r"name: define it extern \"C\"\)")),
    (calls_ptx_only, "ptx_only(1)", kj.UnsupportedError,
     (r"hostcu_ptx\(\) is foreign device code, which cannot run on the cpu backend "
     r"\(\w+\.ptx is GPU code\): link CUDA C source")),
], ids=["no C linkage", "GPU code alone"])
def test_foreign_code_the_cpu_backend_cannot_run_is_named(cpu_backend, kernel, snippet, cls,
                                                         words):
    with pytest.raises(cls, match=words) as e:
        kj.jit(kernel)[1, 1](kj.device_array(1, np.int32))
    assert_located(e.value, kernel, snippet)


def passes_an_array(out):
    with_array(out)


with_array = cuda.declare_device("hostcu_array", "int32(int32[:])")


def test_declaration_shapes_and_array_parameters():
    decl = cuda.declare_device("hostcu_api", types.int32(types.float32[:]))
    assert decl.name == "hostcu_api" and decl.sig.args == (types.float32[:],)
    assert decl.sig.return_type == types.int32
    for bad in ((types.float32[:],), "(float32[:],)"):
        with pytest.raises(TypeError, match=r"declare_device 'f1': Return type missing from the "
                                            r"signature"):
            cuda.declare_device("f1", bad)
    with pytest.raises(kj.TypingError, match=r"hostcu_array\(\) is declared with an array "
                                             r"parameter \(int32\[:\]\), which kaiojit cannot "
                                             r"pass to foreign code: declare a pointer "
                                             r"\(types.CPointer\(int32\)\) and pass "
                                             r"ffi.from_buffer\(array\)") as e:
        kj.jit(passes_an_array).compile("void(int32[:])")
    assert_located(e.value, passes_an_array, "out")


def test_cached_host_code_finds_its_library_again(cpu_backend):
    """A kernel read back from the disk cache names its foreign function by the library's
    digest: the library is loaded again from the folder it was built in."""
    source = cuda.CUSource('extern "C" __device__ int hostcu_again(int a) { return a - 3; }')
    registered = hostcu.symbol("hostcu_again", (source.path,))
    digest = registered[len(hostcu.SYMBOL_PREFIX):].split("_")[0]
    hostcu._LIBRARIES.pop(digest)  # as in a fresh process
    hostcu.register_symbols([registered])
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(
        ctypes.cast(hostcu._LIBRARIES[digest].hostcu_again, ctypes.c_void_p).value)
    v = int(rng.integers(-1000, 1000))
    assert fn(v) == v - 3
    with pytest.raises(kj.CompileError, match=r"compiled CUDA C is gone"):
        hostcu.register_symbols([f"{hostcu.SYMBOL_PREFIX}00000000000000000000_x"])
