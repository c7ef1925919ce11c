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
    disasm = find_tool("nvdisasm") or find_tool("cuobjdump")
    if ptxas is None or disasm is None:
        missing = "ptxas" if ptxas is None else "nvdisasm or cuobjdump"
        raise RuntimeError(f"inspect_sass needs {missing}: install a CUDA toolkit (or the "
                           "nvidia-cuda-nvcc and nvidia-cuda-nvdisasm packages: pip install "
                           "'kaiojit[test]')")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        cubin = os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([ptxas, f"-arch={arch}", src, "-o", cubin], check=True,
                       capture_output=True)
        if os.path.basename(disasm).startswith("nvdisasm"):
            cmd = [disasm, "-c", cubin]
        else:
            cmd = [disasm, "-sass", cubin]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


__all__ = ["find_tool", "sass_of", "sass_of_ptx"]
