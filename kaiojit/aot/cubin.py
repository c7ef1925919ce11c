"""Who makes an export's cubins, and with which options: ``compiler="auto"``, ``"ptxas"`` or
``"driver"`` (``python -m kaiojit aot --compiler``).

A ``@kj.jit`` kernel's cubin is made at its first launch by the driver's own PTX compiler
(``cuModuleLoadDataEx`` on the PTX text): the whole module compiled as one program, at the
default optimization level (``-O3``), with line info only where the PTX has a line table, no
register limit but the kernel's own launch bounds. An export makes the same cubin when:

- ``ptxas`` assembles the PTX with those options (``-arch``, ``-lineinfo`` where the PTX has
  ``.loc``; nothing else): ptxas of the driver's CUDA version is the driver's compiler; or
- the driver's linker (``cuLinkCreate``/``cuLinkAddData``/``cuLinkComplete``, with
  ``CU_JIT_TARGET`` and the same line-info option) does, in a process whose backend has a
  driver (cuda; the mock backend's stand-in in tests). The driver compiles linker input as
  relocatable code (``-rdc``), which the CUDA documentation says "will have similar
  consequences as offline relocatable device code linking": it may be slower than the JIT's.

``auto`` therefore takes ptxas where one is found and the driver's linker otherwise. The
manifest records which made the cubins and its version (``ptxas --version``'s release line, or
the driver's CUDA version), so a cubin slower than the JIT's can be traced to its compiler.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

from kaiojit.aot.manifest import ExportError

COMPILERS = ("auto", "ptxas", "driver")


def has_line_table(ptx: str) -> bool:
    """Whether the PTX carries a line table (``lineinfo=True`` or ``debug=True``): the JIT
    then asks the driver for line info, and so does an export."""
    return "\t.loc\t" in ptx


class Ptxas:
    """ptxas as the driver's JIT compiles: whole program, default ``-O3``, ``-lineinfo``
    where the PTX has a line table."""

    name = "ptxas"

    def __init__(self, path: str):
        self.path = path
        self.version = _ptxas_version(path)
        self.ptx_limit: int | None = None  # the PTX ISA is ptxas's to refuse

    def make(self, ptx: str, ptx_path: str, cubin_path: str, arch: str, what: str) -> None:
        args = [self.path, f"-arch={arch}", *(["-lineinfo"] if has_line_table(ptx) else []),
                "-o", cubin_path, ptx_path]
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ExportError(f"ptxas ({self.version}) refused {what} for {arch}:\n"
                              f"{done.stderr.strip()}")


class DriverLinker:
    """The CUDA driver's linker of the exporting process's backend (``backend.link_ptx``)."""

    name = "driver"

    def __init__(self, backend: Any):
        self.backend = backend
        self.version = backend.compiler_version()
        self.ptx_limit = _driver_ptx_limit(backend)

    def make(self, ptx: str, ptx_path: str, cubin_path: str, arch: str, what: str) -> None:
        from kaiojit.errors import CudaError

        try:
            cubin = self.backend.link_ptx(ptx, arch)
        except CudaError as e:
            raise ExportError(f"the driver's linker ({self.version}) refused {what} for "
                              f"{arch}: {e}") from None
        with open(cubin_path, "wb") as f:
            f.write(cubin)


def cubin_compiler(choice: str) -> Ptxas | DriverLinker:
    """The compiler ``choice`` names (see the module's docstring), or an
    :class:`ExportError` saying what is missing."""
    from kaiojit.tools.binutils import find_tool

    if choice not in COMPILERS:
        raise ValueError(f"compiler must be one of {', '.join(map(repr, COMPILERS))}, got "
                         f"{choice!r}")
    ptxas = find_tool("ptxas") if choice != "driver" else None
    if ptxas is not None:
        return Ptxas(ptxas)
    if choice == "ptxas":
        raise ExportError("compiler='ptxas': ptxas was not found (`pip install "
                          "nvidia-cuda-nvcc` or a CUDA toolkit on PATH)")
    from kaiojit.runtime import get_backend

    backend = get_backend()
    if hasattr(backend, "link_ptx"):
        return DriverLinker(backend)
    if choice == "driver":
        raise ExportError(f"compiler='driver' links with the CUDA driver, which this "
                          f"process does not use (it runs the {backend.name} backend): "
                          "export on a machine with a GPU, or with compiler='ptxas'")
    raise ExportError("export needs ptxas to make cubins, or a CUDA driver: `pip "
                      "install nvidia-cuda-nvcc` or a CUDA toolkit on PATH")


def _ptxas_version(path: str) -> str:
    """``ptxas 13.0 (V13.0.88)`` from ``ptxas --version``; the last line as it is where that
    line has another form."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             check=False).stdout
    except OSError as e:
        raise ExportError(f"{path} cannot run: {e.strerror}") from None
    release = re.search(r"release (\d+\.\d+), (V[\d.]+)", out)
    if release:
        return f"ptxas {release.group(1)} ({release.group(2)})"
    build = re.search(r"cuda_(\d+\.\d+)\.\S*", out)
    if build:
        return f"ptxas {build.group(1)} ({build.group(0)})"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return f"ptxas ({lines[-1] if lines else os.path.basename(path)})"


def _driver_ptx_limit(backend: Any) -> int | None:
    """The newest PTX ISA version the backend's driver takes (10 x major + minor), or None
    where it has no limit (the mock backend)."""
    if backend.name != "cuda":
        return None
    from kaiojit.runtime import driver

    major, minor = driver.max_ptx_version()
    return 10 * major + minor


__all__ = ["COMPILERS", "DriverLinker", "Ptxas", "cubin_compiler", "has_line_table"]
