"""Ahead-of-time export: kernels compiled once, shipped as cubins and PTX (or a host library),
a manifest and a C launcher, and loaded later without the JIT.

    python -m kaiojit aot kernels.py:saxpy --sig "void(float32[::1], float32[::1], int32)" \\
        --arch sm_80,sm_90 -o out/
    mod = kaiojit.aot.load("out/")
    mod.saxpy[grid, block](out, x, n)

``load`` imports neither llvmlite nor the kernels' source; ``export`` compiles, so it does.
"""

from __future__ import annotations

from kaiojit.aot.loader import ExportedKernel, ExportedModule, load
from kaiojit.aot.manifest import USER_ERRORS, ArtifactError
from kaiojit.errors import user_facing


@user_facing(errors=USER_ERRORS)
def export(out_dir, kernels, archs=("sm_90",), target="nvptx", compiler="auto"):
    """Export ``kernels`` (``{kernel: [signature, ...]}``) into ``out_dir``; see
    :func:`kaiojit.aot.exporter.export`."""
    from kaiojit.aot.exporter import export as _export

    return _export(out_dir, kernels, archs, target, compiler)


__all__ = ["ArtifactError", "ExportedKernel", "ExportedModule", "export", "load"]
