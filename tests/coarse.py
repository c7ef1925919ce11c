"""A kernel's coarse entry (``kaiojit/kir/coarsen.py``) on the cpu backend, for tests: the
same transformed kernel the GPU gets, compiled by the host pipeline as a kernel of its own
whose last parameter is the user's grid extent. The cpu backend never launches coarse
entries itself; this is how their semantics are checked without a GPU."""

from __future__ import annotations

import dataclasses
from typing import Any


def host_entries(kernel: Any, sig: str) -> tuple[Any, Any]:
    """The active (cpu) backend's loaded kernel of the dispatcher ``kernel`` for ``sig``, and
    of its coarse entry (``ValueError`` where the kernel has none)."""
    from kaiojit import types as T
    from kaiojit.compiler import Metadata, run_stages
    from kaiojit.kir.coarsen import GRID_PARAM, coarsen, coarsenable
    from kaiojit.runtime.backend import get_backend

    backend = get_backend()
    own = kernel.compile(sig, backend.target_spec())
    if own.kfunc is None or not coarsenable(own.kfunc):
        raise ValueError(f"{own.py_name}: no coarse entry")
    coarse_kfunc = coarsen(own.kfunc)
    sig2 = T.Signature((*own.signature.args, T.int64), own.signature.return_type)
    meta = Metadata(symbol=f"{own.name}_coarse", options=own.options, target=own.target,
                    signature=sig2)
    image = run_stages(coarse_kfunc, meta, start="llvm_unoptimized")
    coarse = dataclasses.replace(own, name=meta.symbol, signature=sig2, image=image,
                                 arg_names=(*own.arg_names, GRID_PARAM), kfunc=coarse_kfunc)
    return backend.load_kernel(own), backend.load_kernel(coarse)


def launch_coarse(coarse: Any, grid: int, block: int, args: tuple, factor: int = 4) -> None:
    """Launch a coarse entry as the runtime does a grid of ``grid`` blocks."""
    coarse.launch(((grid + factor - 1) // factor,), (block,), None, 0, (*args, grid))
