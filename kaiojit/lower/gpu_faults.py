"""Debug bounds checks on the GPU (``debug=True``): the first out-of-bounds index of a launch
is written to a module global, ``kaiojit_fault``, and the access goes on at element 0.

The record is ``FAULT_WORDS`` 64-bit words (``FAULT_*`` in ``kaiojit/target.py``): the kind
(0: none, ``ERR_BOUNDS``), the site (an index into the kernel's ``fault_sites``: file, line,
array, dimension), the index, the extent, then the block and the thread, three words each. The first fault of a launch wins: the
faulting thread claims ``kind`` with a compare-and-swap from 0, and only the winner writes
the rest. The runtime reads the record back at the next synchronization
(``kaiojit/runtime/faults.py``), clears it, and raises ``kj.KernelError``. Nothing traps, so
the context stays usable, as on the cpu backend.
"""

from __future__ import annotations

from llvmlite import ir

from ..target import ERR_BOUNDS, FAULT_GLOBAL, FAULT_KIND, FAULT_SITE, FAULT_WORDS
from .llvmtypes import I64

_GLOBAL_SPACE = 1


def fault_record(mod) -> ir.GlobalVariable:
    """The module's ``kaiojit_fault`` record (a visible ``.global``, zero at load)."""
    gv = mod.globals_by_name.get(FAULT_GLOBAL)
    if gv is None:
        ty = ir.ArrayType(I64, FAULT_WORDS)
        gv = ir.GlobalVariable(mod.module, ty, name=FAULT_GLOBAL, addrspace=_GLOBAL_SPACE)
        gv.initializer = ir.Constant(ty, None)
        gv.align = 8
        mod.globals_by_name[FAULT_GLOBAL] = gv
    return gv


def add_site(sites: list[dict], loc, **info) -> int:
    """Record where a fault can come from (the same fields as the host's sites)."""
    sites.append(dict(
        kind="bounds", filename=loc.filename if loc else None, line=loc.line if loc else 0,
        col=loc.col if loc else 0, source_line=loc.source_line if loc else "", **info))
    return len(sites) - 1


def check_index(fl, index, extent, site: int):
    """Record ``index`` if it is not below ``extent`` (unsigned: a negative one is huge), and
    return an index that is safe to access (0 in that case)."""
    b = fl.builder
    bad = b.icmp_unsigned(">=", index, extent)
    with b.if_then(bad, likely=False):
        record = fault_record(fl.mod)

        def word(i: int):
            return b.gep(record, [ir.Constant(I64, 0), ir.Constant(I64, i)])

        pair = b.cmpxchg(word(FAULT_KIND), ir.Constant(I64, 0), ir.Constant(I64, ERR_BOUNDS),
                         "monotonic", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            values = [ir.Constant(I64, site), index, extent]
            for reg in ("ctaid", "tid"):
                values += [b.zext(fl.target.sreg(fl, f"{reg}.{axis}"), I64) for axis in "xyz"]
            for i, v in enumerate(values, start=FAULT_SITE):
                b.store_atomic(v, word(i), "monotonic", 8)
    return b.select(bad, ir.Constant(I64, 0), index)
