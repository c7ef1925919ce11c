"""SASS, the GPU's machine code, of a compiled kernel: ptxas assembles the PTX into a cubin,
nvdisasm (or cuobjdump) prints it. Both tools come with a CUDA toolkit or as pip packages."""

from __future__ import annotations

import os
import subprocess
import tempfile

from ..compiler import CompiledKernel
from .binutils import find_tool


def sass_of(ck: CompiledKernel) -> str:
    """SASS of a compiled kernel: ptxas to a cubin, then nvdisasm or cuobjdump."""
    if ck.target.kind != "nvptx":
        raise ValueError(f"{ck.py_name} was compiled for the {ck.target.kind}, not a GPU: it "
                         "has no SASS")
    return sass_of_ptx(ck.ptx, ck.target.arch)


def sass_of_ptx(ptx: str, arch: str) -> str:
    """SASS of PTX text for ``arch`` (e.g. ``"sm_90a"``): what ptxas made of it, as nvdisasm
    (or cuobjdump) prints it."""
    ptxas = find_tool("ptxas")
    if ptxas is None or _disassembler() is None:
        raise RuntimeError(_MISSING.format("ptxas" if ptxas is None else "nvdisasm or cuobjdump"))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        cubin = os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([ptxas, f"-arch={arch}", src, "-o", cubin], check=True,
                       capture_output=True)
        return sass_of_cubin(cubin)


def sass_of_cubin(path: str) -> str:
    """SASS of a cubin file (an exported one, ``kaiojit.aot``), as nvdisasm (or cuobjdump)
    prints it."""
    disasm = _disassembler()
    if disasm is None:
        raise RuntimeError(_MISSING.format("nvdisasm or cuobjdump"))
    if os.path.basename(disasm).startswith("nvdisasm"):
        cmd = [disasm, "-c", path]
    else:
        cmd = [disasm, "-sass", path]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


_MISSING = ("inspect_sass needs {}: install a CUDA toolkit (or the nvidia-cuda-nvcc and "
            "nvidia-cuda-nvdisasm packages: pip install 'kaiojit[test]')")


def _disassembler() -> str | None:
    return find_tool("nvdisasm") or find_tool("cuobjdump")


__all__ = ["find_tool", "sass_of", "sass_of_cubin", "sass_of_ptx"]
