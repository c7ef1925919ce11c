"""Debug faults on the GPU (``debug=True``): the first out-of-bounds index or failed ``assert``
of a launch is written to a module global, ``kaiojit_fault``. After an out-of-bounds index the
access goes on at element 0; after a failed assert the thread exits (PTX ``exit``).

The record is ``FAULT_WORDS`` 64-bit words (``FAULT_*`` in ``kaiojit/target.py``): the kind
(0: none, ``ERR_BOUNDS``, ``ERR_ASSERT``), the site (an index into the kernel's
``fault_sites``: file, line, and the array and dimension or the assert's message), the index,
the extent (0 for an assert), then the block and the thread, three words each. The first
fault of a launch wins: the faulting thread claims ``kind`` with a compare-and-swap from 0, and
only the winner writes the rest. The runtime reads the record back at the next
synchronization (``kaiojit/runtime/faults.py``), clears it, and raises ``kj.KernelError``.
Nothing traps, so the context stays usable, as on the cpu backend.
"""

from __future__ import annotations

from llvmlite import ir

from ..target import ERR_ASSERT, ERR_BOUNDS, FAULT_GLOBAL, FAULT_KIND, FAULT_SITE, FAULT_WORDS
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


def add_site(sites: list[dict], loc, kind: str = "bounds", **info) -> int:
    """Record where a fault can come from (the same fields as the host's sites)."""
    sites.append(dict(
        kind=kind, filename=loc.filename if loc else None, line=loc.line if loc else 0,
        col=loc.col if loc else 0, source_line=loc.source_line if loc else "", **info))
    return len(sites) - 1


def record_fault(fl, kind: int, site: int, index, extent) -> None:
    """Write the fault (``kind``: an ``ERR_*``) to ``kaiojit_fault`` unless a fault of this
    launch is there already; ``index`` and ``extent`` are i64 values."""
    b = fl.builder
    record = fault_record(fl.mod)

    def word(i: int):
        return b.gep(record, [ir.Constant(I64, 0), ir.Constant(I64, i)])

    pair = b.cmpxchg(word(FAULT_KIND), ir.Constant(I64, 0), ir.Constant(I64, kind),
                     "monotonic", "monotonic")
    with b.if_then(b.extract_value(pair, 1)):
        values = [ir.Constant(I64, site), index, extent]
        for reg in ("ctaid", "tid"):
            values += [b.zext(fl.target.sreg(fl, f"{reg}.{axis}"), I64) for axis in "xyz"]
        for i, v in enumerate(values, start=FAULT_SITE):
            b.store_atomic(v, word(i), "monotonic", 8)


def check_index(fl, index, extent, site: int):
    """Record ``index`` if it is not below ``extent`` (unsigned: a negative one is huge), and
    return an index that is safe to access (0 in that case)."""
    b = fl.builder
    bad = b.icmp_unsigned(">=", index, extent)
    with b.if_then(bad, likely=False):
        record_fault(fl, ERR_BOUNDS, site, index, extent)
    return b.select(bad, ir.Constant(I64, 0), index)


def fail_assert(fl, failed, site: int) -> None:
    """Where ``failed`` (an i1) holds: record the assert's fault, then end the thread."""
    b = fl.builder
    fail = b.append_basic_block("assert.failed")
    ok = b.append_basic_block("assert.ok")
    b.cbranch(failed, fail, ok).set_weights([1, 99])
    b.position_at_end(fail)
    zero = ir.Constant(I64, 0)
    record_fault(fl, ERR_ASSERT, site, zero, zero)
    # PTX exit ends this thread only: the others run on, and a barrier that waits only on
    # exited threads is released (PTX ISA, exit). A device function's ret would not do.
    b.call(fl.mod.declare("llvm.nvvm.exit", ir.VoidType(), []), [])
    b.unreachable()
    b.position_at_end(ok)
