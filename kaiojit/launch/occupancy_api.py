"""``kj.occupancy`` and ``kernel.resources``: a kernel's occupancy at a block size and its
resources, from the driver on a GPU, else from ptxas's resource report and the H200's limits
(``occupancy_calc.py`` does the arithmetic)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tools.occupancy_calc import H200, Occupancy, SmLimits, block_limits, block_size_of, calculate

if TYPE_CHECKING:
    from ..tools.resources import Resources


def occupancy(kernel: Any, sig: Any, block: Any, shared: int = 0) -> Occupancy:
    """``kj.occupancy(kernel, sig, block, shared=0)``: blocks an SM holds, the occupancy
    fraction, what limits it, and a suggested block size.

    On the cuda backend the driver answers for the current device
    (``cuOccupancyMaxActiveBlocksPerMultiprocessor``, ``cuOccupancyMaxPotentialBlockSize``;
    the limiting resource is the calculator's, from the driver's figures); on other backends
    the calculator does, from the ptxas report of the kernel compiled for sm_90, with H200
    limits.
    """
    if not getattr(kernel, "_kaiojit_dispatcher", False) or kernel.device:
        raise TypeError(f"kj.occupancy takes a @kj.jit kernel, got {kernel!r}")
    from ..runtime import get_backend

    backend = get_backend()
    if backend.target_spec().kind == "nvptx":
        return _driver_occupancy(backend, kernel, sig, block, shared)
    from ..target import TargetSpec, ptx_version_for
    from ..tools.resources import ptxas_resources

    ck = kernel.compile(sig, TargetSpec("nvptx", "sm_90", ptx_version_for("sm_90")))
    return calculate(ptxas_resources(ck.ptx, ck.target.arch, ck.name), block, shared, H200)


def _driver_occupancy(backend: Any, kernel: Any, sig: Any, block: Any, shared: int
                      ) -> Occupancy:
    from ..runtime.occupancy_query import max_active_blocks, sm_limits
    from ..tools.resources import Resources

    device = backend.current_device()
    loaded = backend.load_kernel(kernel.compile(sig, backend.target_spec()))
    loaded.configure(1, block, shared, device=device)  # LaunchError if it cannot launch
    fn = loaded.on_device(device).fn
    size = block_size_of(block)
    limits = SmLimits(**sm_limits(backend, device))
    resources = Resources.from_attributes(backend.function_attributes(fn))
    blocks = max_active_blocks(backend, fn, size, shared)
    min_grid, suggested = backend.occupancy_block_size(fn, shared)
    per = block_limits(resources, size, shared, limits)
    factor = next((name for name, n in per.items() if n == blocks), "unknown")
    warps = -(-size // limits.warp_size)
    return Occupancy(
        block_size=size, active_blocks_per_sm=blocks,
        occupancy_fraction=blocks * warps / limits.max_warps_per_sm, limiting_factor=factor,
        suggested_block_size=suggested, min_grid_size=min_grid, limits=tuple(per.items()),
        source="driver")


def kernel_resources(kernel, signature) -> Resources:
    """``kernel.resources(sig)``: from the driver when the current backend is a GPU's (the
    kernel compiled for its device and loaded there; ptxas, if present, adds the spill
    figures), else from ptxas's report of the kernel compiled for sm_90."""
    from ..runtime import get_backend
    from ..tools.resources import PtxasError, Resources, ptxas_resources

    backend = get_backend()
    if backend.target_spec().kind == "nvptx":
        ck = kernel.compile(signature, backend.target_spec())
        attrs = backend.load_kernel(ck).attributes()
        try:
            spills = ptxas_resources(ck.ptx, ck.target.arch, ck.name)
        except PtxasError:
            spills = None
        found = Resources.from_attributes(attrs, spills)
    else:
        ck = kernel.compile(signature)
        found = ptxas_resources(ck.ptx, ck.target.arch, ck.name)
    ck.resources = found
    return found
