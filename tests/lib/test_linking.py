"""Foreign device code: kj.declare_device (numba's ABI or C's), @kj.jit(link=[...]) with .ptx
and .cu files on the GPU, a Python implementation on the cpu backend, and the errors."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.runtime import linker as linking
from tests.lib.conftest import compile_for_gpu
from tests.located import assert_located

rng = np.random.default_rng()

# mul_f32 in numba's ABI, hand-written: *ret = a * b + 1, status 0
MUL_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .func (.param .b32 func_retval0) mul_f32(.param .b64 p0, .param .b32 p1, .param .b32 p2)
{
    .reg .b64 %rd<2>;
    .reg .f32 %f<4>;
    ld.param.u64 %rd1, [p0];
    ld.param.f32 %f1, [p1];
    ld.param.f32 %f2, [p2];
    fma.rn.f32 %f3, %f1, %f2, 0f3F800000;
    st.f32 [%rd1], %f3;
    st.param.b32 [func_retval0], 0;
    ret;
}
"""
# add_c in C's ABI, as CUDA C++
ADD_CU = 'extern "C" __device__ float add_c(float a, float b) { return a + b; }\n'


@pytest.fixture
def sources(tmp_path):
    ptx, cu = tmp_path / "mul.ptx", tmp_path / "add.cu"
    ptx.write_text(MUL_PTX)
    cu.write_text(ADD_CU)
    return str(ptx), str(cu)


def calls_both(mul, add):
    def kernel(out, x):
        i = kj.grid(1)
        if i < x.size:
            out[i] = mul(x[i], 2.0) + add(x[i], 1)
    return kernel


def test_declared_functions_run_their_python_on_the_cpu_backend(kj_backend, sources):
    ptx, cu = sources
    mul = kj.declare_device("mul_f32", "float32(float32, float32)", link=[ptx],
                            py_impl=lambda a, b: a * b + 1.0)
    add = kj.declare_device("add_c", "float32(float32, float32)", abi="c",
                            py_impl=lambda a, b: a + b)
    kernel = kj.jit(link=[cu])(calls_both(mul, add))
    x = rng.standard_normal(int(rng.integers(50, 300))).astype(np.float32)
    out = kj.to_device(np.full(x.size, np.nan, np.float32))
    kernel[(x.size + 127) // 128, 128](out, kj.to_device(x))
    np.testing.assert_allclose(out.copy_to_host(), (x * 2 + 1) + (x + 1), rtol=1e-6)
    assert mul(3.0, 2.0) == 7.0  # the declaration is callable from Python too, with py_impl
    gpu_ptx = compile_for_gpu(kernel)[0]  # assembled relocatable (ptxas -c)
    assert "call.uni (retval0), mul_f32, (param0, param1, param2);" in gpu_ptx
    assert "call.uni (retval0), add_c, (param0, param1);" in gpu_ptx
    if shutil.which("nvlink") and shutil.which("ptxas") and shutil.which("nvcc"):
        _nvlink(gpu_ptx, ptx, cu)


def _nvlink(kernel_ptx: str, mul_ptx: str, add_cu: str) -> None:
    """The kernel's PTX, the hand-written PTX and nvcc's object of the .cu link for sm_90:
    the calls match the definitions' ABI."""
    tmp = os.path.dirname(mul_ptx)
    with open(os.path.join(tmp, "k.ptx"), "w") as f:
        f.write(kernel_ptx)
    run = [["ptxas", "-arch=sm_90", "-c", os.path.join(tmp, "k.ptx"), "-o",
            os.path.join(tmp, "k.o")],
           ["ptxas", "-arch=sm_90", "-c", mul_ptx, "-o", os.path.join(tmp, "mul.o")],
           ["nvcc", "-arch=sm_90", "-rdc=true", "-c", add_cu, "-o", os.path.join(tmp, "add.o")],
           ["nvlink", "-arch=sm_90", *(os.path.join(tmp, f) for f in ("k.o", "mul.o", "add.o")),
            "-o", os.path.join(tmp, "linked.cubin")]]
    for cmd in run:
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, (cmd, r.stderr)


def _on_gpu(kernel_of, expect) -> None:
    if not kj.is_cuda_available():
        pytest.skip("needs a CUDA device")
    previous = kj.set_backend("cuda")
    try:
        kernel = kernel_of()
        x = rng.standard_normal(1000).astype(np.float32)
        out = kj.to_device(np.full(x.size, np.nan, np.float32))
        kernel[8, 128](out, kj.to_device(x))
        np.testing.assert_allclose(out.copy_to_host(), expect(x), rtol=1e-6)
    finally:
        kj.set_backend(previous)


@pytest.mark.gpu
def test_linked_ptx_runs_on_the_gpu(sources):
    mul = kj.declare_device("mul_f32", "float32(float32, float32)", link=[sources[0]])

    def kernel_of():
        @kj.jit
        def k(out, x):
            i = kj.grid(1)
            if i < x.size:
                out[i] = mul(x[i], 2.0)
        return k
    _on_gpu(kernel_of, lambda x: x * 2 + 1)


@pytest.mark.gpu
def test_linked_ptx_and_cu_run_on_the_gpu(sources):
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not loadable here: {e}")
    ptx, cu = sources
    mul = kj.declare_device("mul_f32", "float32(float32, float32)", link=[ptx])
    add = kj.declare_device("add_c", "float32(float32, float32)", abi="c")
    _on_gpu(lambda: kj.jit(link=[cu])(calls_both(mul, add)), lambda x: (x * 2 + 1) + (x + 1))


def no_python(out, x):
    out[0] = sub_f32(x[0], 1.0)


sub_f32 = kj.declare_device("sub_f32", "float32(float32, float32)")


def test_foreign_code_without_python_is_a_located_error_on_the_cpu(kj_backend):
    if kj_backend != "cpu":
        pytest.skip("the cpu backend's error")
    with pytest.raises(kj.UnsupportedError,
                       match=r"sub_f32\(\) is foreign device code, which cannot run on the cpu "
                             r"backend: link CUDA C source \(.cu, cuda.CUSource\), which the cpu "
                             r"backend compiles for the host, or declare it with "
                             r"kj.declare_device\(..., py_impl=") as e:
        kj.jit(no_python)[1, 1](kj.device_array(1, np.float32),
                                kj.to_device(np.ones(1, np.float32)))
    assert_located(e.value, no_python, "sub_f32(x[0], 1.0)")


def test_declaration_errors(tmp_path):
    with pytest.raises(TypeError, match=r"arguments are real scalars, pointers "
                                        r"\(types.CPointer\) or arrays, and the result a real "
                                        r"scalar or void; got float32\[:\]"):
        kj.declare_device("f", "float32[:](float32)")
    with pytest.raises(ValueError, match=r"abi is 'numba' or 'c', got 'cpp'"):
        kj.declare_device("f", "float32(float32)", abi="cpp")
    with pytest.raises(ValueError, match=r"'2f' is not a C identifier"):
        kj.declare_device("2f", "float32(float32)")
    with pytest.raises(FileNotFoundError, match=r"no file '.*nothere.ptx' to link"):
        kj.declare_device("f", "float32(float32)", link=[str(tmp_path / "nothere.ptx")])
    (tmp_path / "f.o").write_bytes(b"")
    with pytest.raises(ValueError, match=r"kj.jit\(link=...\): cannot link '.*f.o': give .ptx, "
                                         r".cu, .ltoir, .cubin, .fatbin files"):
        kj.jit(link=[str(tmp_path / "f.o")])


def test_missing_linker_names_its_wheel():
    try:
        from cuda.bindings import nvjitlink
        nvjitlink.version()
        pytest.skip("nvJitLink is installed here")
    except Exception:  # noqa: BLE001
        pass
    inputs = [("kernel.ptx", "ptx", b""), ("f.ltoir", "ltoir", b"")]
    with pytest.raises(kj.CompileError, match=r"needs nvJitLink, which is not installed "
                                              r"\(pip install nvidia-nvjitlink"):
        linking.link_cubin(inputs, "sm_90")
    assert linking.link_cubin(inputs[:1], "sm_90") is None  # PTX alone: the driver links it


def test_missing_nvrtc_names_its_wheel(sources):
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
        pytest.skip("NVRTC is installed here")
    except Exception:  # noqa: BLE001
        pass
    with pytest.raises(kj.CompileError, match=r"needs NVRTC, which is not installed "
                                              r"\(pip install nvidia-cuda-nvrtc"):
        linking.compile_cu(sources[1], "sm_90")


def test_the_hand_written_ptx_assembles(sources):
    from tests.ptxas import assemble

    assemble(MUL_PTX.replace(".visible .func", ".visible .func"))  # a .func alone: -c not
    # needed, nothing is external



redeclared = None  # a declaration, declared again by the test as a re-run notebook cell does


def _calls_redeclared(out, x):
    i = kj.grid(1)
    if i < x.size:
        out[i] = redeclared(x[i])


def test_redeclared_name_leaves_compiled_kernels_calling_what_they_were_linked_with():
    """A re-run notebook cell declares the name again: kernels compiled before keep calling
    the implementation they were linked with (its callback is never freed), later ones call
    the new one."""
    import gc

    global redeclared
    previous = kj.set_backend("cpu")

    def run(kernel, x):
        out = kj.to_device(np.full(x.size, np.nan))
        kernel[1, x.size](out, kj.to_device(x))
        return out.copy_to_host()

    try:
        x = rng.uniform(1, 2, int(rng.integers(8, 64)))
        redeclared = kj.declare_device("redeclared", "float64(float64)",
                                       py_impl=lambda v: v * 3.0)
        first = kj.jit(_calls_redeclared)
        np.testing.assert_array_equal(run(first, x), x * 3.0)
        redeclared = kj.declare_device("redeclared", "float64(float64)",
                                       py_impl=lambda v: v - 5.0)
        gc.collect()
        # callbacks made now would take the first one's memory had it been freed
        others = [kj.declare_device(f"unrelated_{n}", "float64(float64)",
                                    py_impl=lambda v: -1.0) for n in range(50)]
        np.testing.assert_array_equal(run(first, x), x * 3.0)
        np.testing.assert_array_equal(run(kj.jit(_calls_redeclared), x), x - 5.0)
        assert len(others) == 50
    finally:
        redeclared = None
        kj.set_backend(previous)
