"""Linking foreign device code into a kernel's module on the GPU (see ``kaiojit/linking.py``):
the kernel's PTX and its files (.ptx, .cubin, .fatbin, .ltoir, and .cu compiled by NVRTC to
PTX) linked by nvJitLink into a cubin, or, without nvJitLink, PTX and cubins by the driver's
own linker. A missing tool is a ``kj.CompileError`` naming the wheel that brings it.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from kaiojit.errors import CompileError
from kaiojit.linking import undefined_declarations


def _missing(tool: str, wheel: str, err: Exception) -> CompileError:
    return CompileError(f"linking foreign device code needs {tool}, which is not installed "
                        f"(pip install {wheel}, or a CUDA toolkit): {err}")


def compile_cu(path: str, arch: str) -> bytes:
    """A .cu file compiled by NVRTC to PTX (``-rdc`` so its functions link)."""
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001 - the library itself is what is missing
        raise _missing("NVRTC", "nvidia-cuda-nvrtc", e) from None
    with open(path, "rb") as f:
        source = f.read()
    err, prog = nvrtc.nvrtcCreateProgram(source, os.path.basename(path).encode(), 0, [], [])
    opts = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}".encode(), b"-rdc=true"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if int(err) != 0:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise CompileError(f"NVRTC could not compile {path}:\n{log.decode(errors='replace')}")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    nvrtc.nvrtcDestroyProgram(prog)
    return ptx.rstrip(b"\0")


def link_inputs(ptx: str, files: tuple[str, ...], arch: str) -> list[tuple[str, str, bytes]]:
    """``(name, kind, bytes)`` of everything a link takes: the kernel's PTX, each file (a .cu
    compiled to PTX by NVRTC first)."""
    inputs = [("kernel.ptx", "ptx", ptx.encode())]
    for path in files:
        ext = os.path.splitext(path)[1]
        if ext == ".cu":
            inputs.append((path, "ptx", compile_cu(path, arch)))
        else:
            with open(path, "rb") as f:
                inputs.append((path, ext[1:], f.read()))
    return inputs


def link_cubin(inputs: list, arch: str) -> bytes | None:
    """The inputs linked by nvJitLink into a cubin for ``arch``; None when nvJitLink is not
    installed and the driver's linker can do it (PTX, cubins and fatbins only)."""
    try:
        from cuda.bindings import nvjitlink
        nvjitlink.version()
    except Exception as e:  # noqa: BLE001 - the library itself is what is missing
        if all(kind in ("ptx", "cubin", "fatbin") for _, kind, _ in inputs):
            return None
        raise _missing("nvJitLink", "nvidia-nvjitlink", e) from None
    lto = any(kind == "ltoir" for _, kind, _ in inputs)
    options = [f"-arch={arch}"] + (["-lto"] if lto else [])
    handle = nvjitlink.create(len(options), options)
    kinds = {"ptx": nvjitlink.InputType.PTX, "ltoir": nvjitlink.InputType.LTOIR,
             "cubin": nvjitlink.InputType.CUBIN, "fatbin": nvjitlink.InputType.FATBIN}
    try:
        for name, kind, data in inputs:
            nvjitlink.add_data(handle, kinds[kind], data, len(data), name)
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    except nvjitlink.nvJitLinkError as e:
        log = bytearray(nvjitlink.get_error_log_size(handle))
        nvjitlink.get_error_log(handle, log)
        names = ", ".join(name for name, _, _ in inputs[1:]) or "the kernel"
        raise CompileError(f"nvJitLink could not link {names}: {e}\n"
                           f"{log.decode(errors='replace').strip()}") from None
    finally:
        nvjitlink.destroy(handle)


def load_linked(backend: Any, ptx: str, files: tuple[str, ...], device: int) -> Any:
    """Link and load a kernel's module on ``device`` (the cuda backend)."""
    from kaiojit.runtime.driver import check

    missing = undefined_declarations(ptx, files)
    if missing:
        raise CompileError(f"the kernel calls declared device function(s) {', '.join(missing)} "
                           "but links no file defining them: pass link=[...] to "
                           "kj.declare_device or @kj.jit")
    arch = backend.target_spec(device).arch
    inputs = link_inputs(ptx, files, arch)
    cubin = link_cubin(inputs, arch)
    pushed = backend._on_device(device)
    try:
        if cubin is None:  # no nvJitLink: the driver links PTX and cubins
            return _driver_link(backend, inputs)
        return check(backend.drv.cuModuleLoadData(cubin), "loading a linked cubin")
    finally:
        if pushed:
            backend._pop()


def _driver_link(backend: Any, inputs: list) -> Any:
    from kaiojit.runtime.driver import check

    drv = backend.drv
    kinds = {"ptx": drv.CUjitInputType.CU_JIT_INPUT_PTX,
             "cubin": drv.CUjitInputType.CU_JIT_INPUT_CUBIN,
             "fatbin": drv.CUjitInputType.CU_JIT_INPUT_FATBINARY}
    state = check(drv.cuLinkCreate(0, [], []))
    try:
        for name, kind, data in inputs:
            data = data + b"\0" if kind == "ptx" else data
            check(drv.cuLinkAddData(state, kinds[kind], data, len(data), name.encode(), 0, [],
                                    []), f"linking {name}")
        cubin_ptr, size = check(drv.cuLinkComplete(state), "completing the link")
        image = ctypes.string_at(int(cubin_ptr), int(size))
        return check(drv.cuModuleLoadData(image), "loading a linked cubin")
    finally:
        drv.cuLinkDestroy(state)


__all__ = ["compile_cu", "link_cubin", "link_inputs", "load_linked"]
