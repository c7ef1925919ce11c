"""What a compiled kernel uses per thread and per block: registers, shared, local, constant.

On a device the driver says (``cuFuncGetAttribute``, see :meth:`Resources.from_attributes`);
without one, ptxas does: :func:`ptxas_resources` assembles the PTX with ``ptxas -v`` and reads
its report. ``str(resources)`` is the header line the ``inspect_*`` methods print.

ptxas 13 reports registers, barriers, the stack frame (local memory), spill stores and loads,
and static shared memory; it no longer reports constant banks, so the user constant bytes are
summed from the PTX's own ``.const`` declarations (what ``CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES``
counts). Older ptxas versions print ``cmem[N]`` figures, which are read when present.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from .binutils import find_tool
from .occupancy_calc import DEVICE_MAX_THREADS_PER_BLOCK, max_threads_for_registers

PTXAS_NOT_FOUND = ("kernel resources without a GPU need ptxas, found neither on PATH nor "
                   "through cuda.pathfinder: install a CUDA toolkit or `pip install "
                   "nvidia-cuda-nvcc`")


@dataclass(frozen=True, slots=True)
class Resources:
    """Per-thread and per-block resources of one compiled kernel.

    ``spill_store_bytes`` and ``spill_load_bytes`` are only known from ptxas (None when the
    driver answered alone); ``local_bytes`` is the per-thread local memory (the stack frame:
    local arrays indexed at run time, and spills).
    """

    registers: int
    shared_bytes: int  # static shared memory per block
    local_bytes: int
    const_bytes: int
    max_threads_per_block: int
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    barriers: int | None = None
    source: str = "ptxas"  # "ptxas" or "driver"

    @property
    def spills(self) -> bool:
        """Whether ptxas reported spilling registers to local memory."""
        return bool(self.spill_store_bytes or self.spill_load_bytes)

    def __str__(self) -> str:
        parts = [f"{self.registers} registers", f"{self.shared_bytes} B shared",
                 f"{self.local_bytes} B local"]
        if self.spill_store_bytes is not None:
            if self.spills:
                parts.append(f"{self.spill_store_bytes} B spill stores, "
                             f"{self.spill_load_bytes} B spill loads")
            else:
                parts.append("0 B spill")
        parts.append(f"{self.const_bytes} B constant")
        parts.append(f"{self.max_threads_per_block} threads/block max")
        return f"// kaiojit resources ({self.source}): " + ", ".join(parts)

    @classmethod
    def from_attributes(cls, attrs: dict[str, int], spills: Resources | None = None
                        ) -> Resources:
        """From the driver's function attributes (the runtime backends'
        ``function_attributes`` dict); ``spills``, a ptxas report of the same PTX, adds the
        spill figures the driver does not give."""
        return cls(
            registers=int(attrs["registers"]), shared_bytes=int(attrs["shared_bytes"]),
            local_bytes=int(attrs["local_bytes"]), const_bytes=int(attrs["const_bytes"]),
            max_threads_per_block=int(attrs["max_threads_per_block"]),
            spill_store_bytes=None if spills is None else spills.spill_store_bytes,
            spill_load_bytes=None if spills is None else spills.spill_load_bytes,
            barriers=None if spills is None else spills.barriers,
            source="driver",
        )


# --- ptxas --------------------------------------------------------------------------------------


def find_ptxas() -> str | None:
    """ptxas on PATH, else the one cuda.pathfinder finds (e.g. from nvidia-cuda-nvcc)."""
    return find_tool("ptxas")


class PtxasError(RuntimeError):
    """ptxas is missing, or rejected the PTX (its log is the message)."""


_CACHE: dict[str, str] = {}  # ptxas's log by (arch, PTX) hash
_CACHE_LOCK = threading.Lock()


def ptxas_resources(ptx: str, arch: str = "sm_90", entry: str | None = None) -> Resources:
    """The resources ptxas reports for the kernel ``entry`` of ``ptx`` (the only entry when
    None). Cached by the PTX's hash: one ptxas run costs tens of milliseconds."""
    report = _ptxas_report(ptx, arch)
    if entry is None:
        if len(report) != 1:
            names = ", ".join(sorted(report)) or "none"
            raise ValueError(f"the PTX has several kernel entries ({names}): name one")
        return next(iter(report.values()))
    try:
        return report[entry]
    except KeyError:
        raise ValueError(f"the PTX has no kernel entry {entry!r} "
                         f"(it has {', '.join(sorted(report))})") from None


_NOTE = re.compile(r"\((C\d{4})\)\s*(.*)")


def ptxas_notes(ptx: str, arch: str = "sm_90") -> list[tuple[str, str]]:
    """ptxas's numbered notes on ``ptx`` as (code, text) pairs: what it changed in the
    kernel's schedule, e.g. ``C7514`` (wgmma instructions serialized), ``C7517`` / ``C7519``
    (a ``wgmma.wait_group`` / ``wgmma.fence`` it had to inject), ``C7507`` (``setmaxnreg``
    ignored). A wgmma kernel that overlaps its tensor-core work with other work wants none."""
    return [(m.group(1), m.group(2).strip()) for m in map(_NOTE.search,
                                                          _ptxas_log(ptx, arch).splitlines())
            if m]


def _ptxas_log(ptx: str, arch: str) -> str:
    key = hashlib.sha256(f"{arch}\0{ptx}".encode()).hexdigest()
    log = _CACHE.get(key)
    if log is None:
        log = _run_ptxas(ptx, arch)
        with _CACHE_LOCK:
            if len(_CACHE) > 256:
                _CACHE.clear()
            _CACHE[key] = log
    return log


def _ptxas_report(ptx: str, arch: str) -> dict[str, Resources]:
    return parse_ptxas_report(_ptxas_log(ptx, arch), ptx)


def _run_ptxas(ptx: str, arch: str) -> str:
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasError(PTXAS_NOT_FOUND)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas, "-v", f"-arch={arch}", src, "-o", os.path.join(tmp, "k.cubin")],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise PtxasError(f"ptxas -arch={arch} rejected the PTX:\n{r.stderr.strip()}")
    return r.stderr + r.stdout


# ptxas -v lines (13.0; older versions add ", N bytes cmem[K]" to the "Used" line):
#   ptxas info    : Compiling entry function 'k' for 'sm_90'
#   ptxas info    : Function properties for k
#       256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   ptxas info    : Used 30 registers, used 1 barriers, 256 bytes cumulative stack size, 4096 bytes smem
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_STACK = re.compile(r"(\d+) bytes cumulative stack size")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_LMEM = re.compile(r"(\d+) bytes lmem")


def parse_ptxas_report(log: str, ptx: str) -> dict[str, Resources]:
    """Resources of every kernel entry in a ``ptxas -v`` log of ``ptx``."""
    frames: dict[str, tuple[int, int, int]] = {}
    used: dict[str, str] = {}
    entry = None
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _ENTRY.search(line)
        if m:
            entry = m.group(1)
            continue
        m = _PROPERTIES.search(line)
        if m and i + 1 < len(lines):
            f = _FRAME.search(lines[i + 1])
            if f:
                frames[m.group(1)] = (int(f.group(1)), int(f.group(2)), int(f.group(3)))
            continue
        if entry is not None and _USED.search(line):
            used[entry] = line
            entry = None
    const_declared = _declared_const_bytes(ptx)
    out = {}
    for name, line in used.items():
        frame, stores, loads = frames.get(name, (0, 0, 0))
        stack = _STACK.search(line)
        lmem = _LMEM.search(line)
        local = max(frame, int(stack.group(1)) if stack else 0, int(lmem.group(1)) if lmem else 0)
        smem = _SMEM.search(line)
        barriers = _BARRIERS.search(line)
        # cmem[0] holds the parameters and driver constants; user constants live in a
        # higher bank (cmem[3] on recent GPUs): what the driver's CONST_SIZE_BYTES counts
        banks = {int(b): int(n) for n, b in _CMEM.findall(line)}
        user_const = sum(n for b, n in banks.items() if b != 0) if banks else const_declared
        registers = int(_USED.search(line).group(1))
        out[name] = Resources(
            registers=registers, shared_bytes=int(smem.group(1)) if smem else 0,
            local_bytes=local, const_bytes=user_const,
            max_threads_per_block=min(max_threads_for_registers(registers),
                                      _declared_thread_limit(ptx, name)),
            spill_store_bytes=stores, spill_load_bytes=loads,
            barriers=int(barriers.group(1)) if barriers else None,
        )
    return out


_CONST_DECL = re.compile(r"^\s*(?:\.visible\s+|\.global\s+)?\.const\s+(?:\.align\s+\d+\s+)?"
                         r"\.([busf])(\d+)\s+[\w$]+((?:\[\d+\])*)", re.MULTILINE)


def _declared_const_bytes(ptx: str) -> int:
    """Bytes of the module's ``.const`` variables."""
    total = 0
    for _, bits, dims in _CONST_DECL.findall(ptx):
        n = int(bits) // 8
        for d in re.findall(r"\d+", dims):
            n *= int(d)
        total += n
    return total


def _declared_thread_limit(ptx: str, name: str) -> int:
    """The product of the entry's ``.maxntid`` (or ``.reqntid``) dimensions, if it has one."""
    start = ptx.find(f".entry {name}(")
    if start < 0:
        return DEVICE_MAX_THREADS_PER_BLOCK
    body = ptx.find("{", start)
    m = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?",
                  ptx[start:body if body >= 0 else None])
    if m is None:
        return DEVICE_MAX_THREADS_PER_BLOCK
    n = 1
    for d in m.groups():
        if d:
            n *= int(d)
    return min(n, DEVICE_MAX_THREADS_PER_BLOCK)


# --- the inspect_* header -----------------------------------------------------------------


def resource_summary(ck) -> list[tuple[str, str]]:
    """``(label, value)`` pairs a notebook shows above a kernel's text: the kernel and its
    target; for a GPU compile, ptxas's registers, spills, shared and local bytes and the
    occupancy the H200 calculator gives at the best block size (where ptxas is found)."""
    from .occupancy_calc import calculate, suggest_block_size

    args = ", ".join(str(a) for a in ck.signature.args)
    rows = [("kernel", f"{ck.py_name}({args})"),
            ("target", ck.target.arch if ck.target.kind == "nvptx" else "host (cpu backend)")]
    if ck.target.kind != "nvptx":
        image = getattr(ck, "image", None)
        shared = getattr(image, "static_shared_bytes", None)
        if shared is not None:
            rows.append(("shared", f"{shared} B static"))
        return rows
    if not ck.ptx or find_ptxas() is None:
        return rows + [("resources", "unknown (no ptxas)")]
    try:
        found = ptxas_resources(ck.ptx, ck.target.arch, ck.name)
    except (PtxasError, ValueError):
        return rows
    spills = ("none" if not found.spills else
              f"{found.spill_store_bytes} B stored, {found.spill_load_bytes} B loaded")
    rows += [("registers", str(found.registers)), ("spills", spills),
             ("shared", f"{found.shared_bytes} B static"), ("local", f"{found.local_bytes} B"),
             ("max block", f"{found.max_threads_per_block} threads")]
    block = suggest_block_size(found)[1]
    if block:
        occ = calculate(found, block)
        fraction = f"{occ.occupancy_fraction:.0%}"
        rows.append(("occupancy", f"{fraction} at {block} threads/block (H200, limited by "
                                  f"{occ.limiting_factor})"))
    return rows


def resources_header(ck, comment: str = "//") -> str:
    """The resource line ``inspect_*`` prints above a kernel's text (ptxas's figures for the
    PTX shown), or "" where there is no ptxas or no PTX."""
    if ck.target.kind != "nvptx" or not ck.ptx or find_ptxas() is None:
        return ""
    try:
        found = ptxas_resources(ck.ptx, ck.target.arch, ck.name)
    except (PtxasError, ValueError):
        return ""
    return comment + str(found).removeprefix("//") + "\n"
