"""Tensor maps on the host: kaiojit's 128-byte encoding, and the native tile copies and mbarrier
operations that the cpu backend runs in place of the bulk tensor copy engine (TMA).

The GPU's CUtensorMap is opaque: only the driver writes it. The cpu backend writes its own
128 bytes instead (``encode_tiled``), in the layout below, so that a kernel takes the same
parameter (128 bytes by value) on both backends and the host code reads what it needs from it.
All fields are little-endian; dimensions are innermost first, as the driver and PTX count them.

    offset  bytes  field
    0       8      global address of element (0, ..., 0)
    8       4      magic b"KJTM"
    12      1      layout version (1)
    13      1      rank, 1 to 5
    14      1      data type: the CUtensorMapDataType value (UINT8 = 0, ..., FLOAT64 = 8)
    15      1      element size in bytes
    16      40     dims[5], u64 (1 past the rank)
    56      32     byte strides of dims 1 to 4, u64 (dim 0 is contiguous; 0 past the rank)
    88      10     box[5], u16 (1 past the rank)
    98      5      element strides[5], u8 (1 past the rank)
    103     1      swizzle: 0 none, 1 32B, 2 64B, 3 128B (CUtensorMapSwizzle)
    104     1      interleave: 0 none, 1 16B, 2 32B (CUtensorMapInterleave; recorded only)
    105     1      L2 promotion: 0 none, 1 64B, 2 128B, 3 256B (recorded only)
    106     1      out-of-bounds fill: 0 zeros, 1 NaN
    107     21     zero

The copies are native code generated with llvmlite and compiled once with MCJIT, not Python
callbacks: the cpu backend runs blocks on several host threads at once, and a ctypes callback
would take the GIL for every tile (and cost microseconds of Python per call). Generated code
calls them by symbol (``register_symbols`` makes the names known to MCJIT); tests call them
through ctypes (``tile_load``, ``tile_store`` and the ``mbarrier_*`` functions).

What the copies do, as the PTX ISA and the driver define tiled mode:

* The box starts at the signed coordinates given; along dimension ``d`` it loads
  ``ceil(box[d] / element_strides[d])`` elements, the ``j``-th at coordinate
  ``coord[d] + j * element_strides[d]``. Shared memory holds them densely, innermost first.
* A load fills elements outside ``[0, dims[d])`` in any dimension with zeros (or, with NaN
  fill, with the bits 0x7FF7 in every 16 bits: the NaN an H200 writes for float16, float32 and
  float64 alike); a store does not write them.
* A reduce-add (``cp.reduce.async.bulk.tensor ... .add``) adds each element of the shared box
  to the tensor's element, as an atomic add (the blocks run on several host threads), for the
  types PTX's tensor ``.add`` takes (float32, float16, bfloat16, int32, uint32, uint64; any
  other map is refused). It reads the box as a store does and skips every element outside
  the tensor, including the row padding a store writes on to (unmeasured on a GPU for the
  reduction: nothing is added where nothing belongs).
* What the H200 refuses with an illegal instruction (checked on one) the copies refuse with a
  status and copy nothing: an innermost coordinate whose byte offset is not a multiple of 16
  (the box must start 16-byte aligned), and, for a store, any negative coordinate.
* Swizzled boxes: each row of the box (one innermost run) starts a new swizzle span (32, 64
  or 128 bytes; the CUDA programming guide: "if the swizzle width exceeds the inner dimension,
  the shared memory must be allocated to accommodate the full swizzle width"), and the 16-byte
  chunk of every shared memory address is XOR-ed with address bits 7 and up: bits [4, 4 + b)
  ^= bits [7, 7 + b) with b = 1, 2, 3 for 32B, 64B, 128B. As on the GPU the pattern follows
  the absolute shared memory address, so it repeats every 256, 512 or 1024 bytes.
* A load completes ``box bytes`` of transactions on its mbarrier, as ``complete_tx::bytes``.
The mbarrier operations are kaiojit/mbarrier_host.py's.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir

from kaiojit.mbarrier_host import (
    I32,
    I64,
    PTR,
    SYMBOL_MBARRIER_ARRIVE,
    SYMBOL_MBARRIER_ARRIVE_EXPECT_TX,
    SYMBOL_MBARRIER_COMPLETE_TX,
    SYMBOL_MBARRIER_EXPECT_TX,
    SYMBOL_MBARRIER_INIT,
    SYMBOL_MBARRIER_TRY_WAIT_PARITY,
    atomic_update,
    const,
    define_mbarrier,
)

MAGIC = b"KJTM"
VERSION = 1
TENSORMAP_BYTES = 128
MAX_RANK = 5

# CUtensorMapDataType values and element sizes; the names are the driver's without the prefix
DATA_TYPES: dict[str, tuple[int, int]] = {
    "UINT8": (0, 1), "UINT16": (1, 2), "UINT32": (2, 4), "INT32": (3, 4), "UINT64": (4, 8),
    "INT64": (5, 8), "FLOAT16": (6, 2), "FLOAT32": (7, 4), "FLOAT64": (8, 8), "BFLOAT16": (9, 2),
}
SWIZZLES = {"NONE": 0, "32B": 1, "64B": 2, "128B": 3}
INTERLEAVES = {"NONE": 0, "16B": 1, "32B": 2}
L2_PROMOTIONS = {"NONE": 0, "L2_64B": 1, "L2_128B": 2, "L2_256B": 3}
OOB_FILLS = {"NONE": 0, "NAN_REQUEST_ZERO_FMA": 1}

# Byte offsets of the fields (see the module docstring)
OFF_ADDRESS, OFF_MAGIC, OFF_VERSION, OFF_RANK, OFF_DTYPE, OFF_ELEM = 0, 8, 12, 13, 14, 15
OFF_DIMS, OFF_STRIDES, OFF_BOX, OFF_ESTRIDES = 16, 56, 88, 98
OFF_SWIZZLE, OFF_INTERLEAVE, OFF_L2, OFF_OOB = 103, 104, 105, 106
_LAYOUT = struct.Struct("<Q4sBBBB5Q4Q5H5BBBBB21x")
assert _LAYOUT.size == TENSORMAP_BYTES

# Status codes of the tile copies
OK = 0
ERR_NOT_A_HOST_MAP = 1
ERR_MISALIGNED_COORDINATE = 2      # innermost coordinate * element size not a multiple of 16
ERR_NEGATIVE_STORE_COORDINATE = 3  # a store's box must not start below 0 in any dimension
ERR_REDUCE_TYPE = 4                # a reduce-add into a map of a type PTX's .add does not take
OOB_NAN_BITS = 0x7FF7  # the 16-bit pattern of the NaN fill, repeated to the element's width

SYMBOL_LOAD = "kaiojit_tma_load"
SYMBOL_STORE = "kaiojit_tma_store"
SYMBOL_REDUCE_ADD = "kaiojit_tma_reduce_add"


def _prefixed(name: str, prefix: str) -> str:
    return name[len(prefix):] if name.startswith(prefix) else name


def encode_tiled(*, dtype: str, rank: int, address: int, dims: Sequence[int],
                 strides: Sequence[int], box: Sequence[int], element_strides: Sequence[int],
                 interleave: str, swizzle: str, l2_promotion: str, oob_fill: str) -> bytes:
    """The host encoding of a tiled map, from the fields ``cuTensorMapEncodeTiled`` takes
    (innermost first, enum members by their driver names); checked by ``tiled_fields`` first."""
    code, size = DATA_TYPES[_prefixed(dtype, "CU_TENSOR_MAP_DATA_TYPE_")]
    pad = MAX_RANK - rank
    return _LAYOUT.pack(
        address, MAGIC, VERSION, rank, code, size,
        *dims, *(1,) * pad,
        *strides, *(0,) * (MAX_RANK - 1 - len(strides)),
        *box, *(1,) * pad,
        *element_strides, *(1,) * pad,
        SWIZZLES[_prefixed(swizzle, "CU_TENSOR_MAP_SWIZZLE_")],
        INTERLEAVES[_prefixed(interleave, "CU_TENSOR_MAP_INTERLEAVE_")],
        L2_PROMOTIONS[_prefixed(l2_promotion, "CU_TENSOR_MAP_L2_PROMOTION_")],
        OOB_FILLS[_prefixed(oob_fill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_")])


@dataclass(frozen=True, slots=True)
class HostTensorMap:
    """The fields of a host-encoded map (innermost first), as ``decode`` reads them."""

    address: int
    rank: int
    dtype_code: int
    elem_size: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: int
    interleave: int
    l2_promotion: int
    oob_fill: int


def decode(data: bytes) -> HostTensorMap:
    """Read a host-encoded map; ValueError if ``data`` is not one."""
    if len(data) != TENSORMAP_BYTES or data[OFF_MAGIC:OFF_MAGIC + 4] != MAGIC:
        raise ValueError("not a kaiojit host tensor map (a map encoded by the cuda backend "
                         "cannot be used on the cpu backend, nor the other way round)")
    f = _LAYOUT.unpack(data)
    rank = f[3]
    return HostTensorMap(
        address=f[0], rank=rank, dtype_code=f[4], elem_size=f[5], dims=f[6:6 + rank],
        strides=f[11:11 + rank - 1], box=f[15:15 + rank], element_strides=f[20:20 + rank],
        swizzle=f[25], interleave=f[26], l2_promotion=f[27], oob_fill=f[28])


# --- native code ----------------------------------------------------------------------------

I8, I16 = ir.IntType(8), ir.IntType(16)
_WORD = {1: I8, 2: I16, 4: I32, 8: I64}
F32 = ir.FloatType()
REDUCE_ADD_TYPES = ("float32", "float16", "bfloat16", "int32", "uint32", "uint64")


@contextmanager
def _counted_loop(b: ir.IRBuilder, n: ir.Value, name: str) -> Iterator[ir.Value]:
    """``for i in range(n)`` (i64) around the body emitted inside the ``with``."""
    before = b.block
    cond = b.append_basic_block(f"{name}.cond")
    body = b.append_basic_block(f"{name}.body")
    end = b.append_basic_block(f"{name}.end")
    b.branch(cond)
    b.position_at_end(cond)
    i = b.phi(I64, name=name)
    i.add_incoming(const(0), before)
    b.cbranch(b.icmp_unsigned("<", i, n), body, end)
    b.position_at_end(body)
    yield i
    i.add_incoming(b.add(i, const(1)), b.block)
    b.branch(cond)
    b.position_at_end(end)


def _field(b: ir.IRBuilder, tmap: ir.Value, offset: int, ty: ir.IntType) -> ir.Value:
    """The tensor map field at ``offset``, zero-extended to i64."""
    p = b.gep(tmap, [const(offset)], source_etype=I8)
    v = b.load(p, typ=ty, align=1)
    return v if ty == I64 else b.zext(v, I64)


class _TileGeometry:
    """The fields of a map, loaded once at the top of a tile copy."""

    def __init__(self, b: ir.IRBuilder, tmap: ir.Value):
        self.address = _field(b, tmap, OFF_ADDRESS, I64)
        self.elem = _field(b, tmap, OFF_ELEM, I8)
        self.dims = [_field(b, tmap, OFF_DIMS + 8 * d, I64) for d in range(MAX_RANK)]
        self.strides = [self.elem] + [_field(b, tmap, OFF_STRIDES + 8 * d, I64)
                                      for d in range(MAX_RANK - 1)]
        estrides = [_field(b, tmap, OFF_ESTRIDES + d, I8) for d in range(MAX_RANK)]
        self.estrides = estrides
        # elements loaded along each dimension: ceil(box / element stride)
        self.counts = [b.udiv(b.add(_field(b, tmap, OFF_BOX + 2 * d, I16),
                                    b.sub(es, const(1))), es)
                       for d, es in enumerate(estrides)]
        swizzle = _field(b, tmap, OFF_SWIZZLE, I8)
        # 16-byte chunk bits XOR-ed with address bits 7 and up: (1 << swizzle) - 1 of them
        self.swizzle_mask = b.sub(b.shl(const(1), swizzle), const(1))
        row_bytes = b.mul(self.counts[0], self.elem)
        span = b.shl(const(16), swizzle)
        self.pitch = b.select(b.icmp_unsigned("==", swizzle, const(0)), row_bytes, span)
        self.nan_fill = b.icmp_unsigned("!=", _field(b, tmap, OFF_OOB, I8), const(0))
        self.dtype = _field(b, tmap, OFF_DTYPE, I8)

    def box_bytes(self, b: ir.IRBuilder) -> ir.Value:
        total = self.elem
        for n in self.counts:
            total = b.mul(total, n)
        return total


def _valid_map(b: ir.IRBuilder, tmap: ir.Value) -> ir.Value:
    magic = b.load(b.gep(tmap, [const(OFF_MAGIC)], source_etype=I8), typ=I32, align=1)
    version = b.load(b.gep(tmap, [const(OFF_VERSION)], source_etype=I8), typ=I8, align=1)
    return b.and_(b.icmp_unsigned("==", magic, const(int.from_bytes(MAGIC, "little"), I32)),
                  b.icmp_unsigned("==", version, const(VERSION, I8)))


def _refuse_if(b: ir.IRBuilder, condition: ir.Value, status: int) -> None:
    with b.if_then(condition, likely=False):
        b.ret(const(status, I32))


def _define_tile_copy(mod: ir.Module, name: str, op: str,
                      complete_tx: ir.Function | None) -> ir.Function:
    """``i32 load(smem, tmap, c0..c4, mbar)``, or ``i32 store(tmap, c0..c4, smem)`` and
    ``i32 reduce_add(...)`` with the store's operands (``op``: "load", "store" or "add")."""
    load = op == "load"
    coords_ty = [I32] * MAX_RANK
    params = [PTR, PTR, *coords_ty, PTR] if load else [PTR, *coords_ty, PTR]
    fn = ir.Function(mod, ir.FunctionType(I32, params), name)
    fn.attributes.add("nounwind")
    if load:
        smem, tmap, *coords, mbar = fn.args
    else:
        tmap, *coords, smem = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bad = fn.append_basic_block("bad")
    good = fn.append_basic_block("good")
    b.cbranch(_valid_map(b, tmap), good, bad)
    b.position_at_end(bad)
    b.ret(const(ERR_NOT_A_HOST_MAP, I32))
    b.position_at_end(good)
    g = _TileGeometry(b, tmap)
    starts = [b.sext(c, I64) for c in coords]
    misaligned = b.icmp_unsigned("!=", b.and_(b.mul(starts[0], g.elem), const(15)), const(0))
    _refuse_if(b, misaligned, ERR_MISALIGNED_COORDINATE)
    if op == "add":
        supported = ir.Constant(ir.IntType(1), 0)
        for code in _ADDS:
            supported = b.or_(supported, b.icmp_unsigned("==", g.dtype, const(code)))
        _refuse_if(b, b.not_(supported), ERR_REDUCE_TYPE)
    if not load:
        negative = ir.Constant(ir.IntType(1), 0)
        for start in starts:
            negative = b.or_(negative, b.icmp_signed("<", start, const(0)))
        _refuse_if(b, negative, ERR_NEGATIVE_STORE_COORDINATE)
    smem_base = b.ptrtoint(smem, I64)

    def outer(d: int, row: ir.Value, inside: ir.Value, gaddr: ir.Value) -> None:
        """Loops over dimensions d..1; ``row`` counts box rows, ``gaddr`` the global row."""
        if d == 0:
            srow = b.add(smem_base, b.mul(row, g.pitch))
            if op == "add":
                _row_add(b, g, starts[0], srow, inside, gaddr)
            else:
                _row_copy(b, g, starts[0], srow, inside, gaddr, load)
            return
        with _counted_loop(b, g.counts[d], f"i{d}") as i:
            coord = b.add(starts[d], b.mul(i, g.estrides[d]))
            # one unsigned compare covers both coord < 0 and coord >= dims[d]
            ok = b.and_(inside, b.icmp_unsigned("<", coord, g.dims[d]))
            outer(d - 1, b.add(b.mul(row, g.counts[d]), i), ok,
                  b.add(gaddr, b.mul(coord, g.strides[d])))

    outer(MAX_RANK - 1, const(0), ir.Constant(ir.IntType(1), 1), g.address)
    if load and complete_tx is not None:
        has_bar = b.icmp_unsigned("!=", b.ptrtoint(mbar, I64), const(0))
        with b.if_then(has_bar):
            b.call(complete_tx, [mbar, b.trunc(g.box_bytes(b), I32)])
    b.ret(const(OK, I32))
    return fn


def _row_copy(b: ir.IRBuilder, g: _TileGeometry, start: ir.Value, srow: ir.Value,
              inside: ir.Value, grow: ir.Value, load: bool) -> None:
    """One innermost run of the box, with a loop specialized for each element size."""
    fn = b.function
    done = fn.append_basic_block("row.done")
    cases = {size: fn.append_basic_block(f"row.{size}") for size in _WORD}
    switch = b.switch(g.elem, done)
    for size, block in cases.items():
        switch.add_case(const(size), block)
        b.position_at_end(block)
        word = _WORD[size]
        nan = int.from_bytes(OOB_NAN_BITS.to_bytes(2, "little") * (size // 2), "little")
        fill = b.select(g.nan_fill, const(nan, word), const(0, word))
        # the H200 stores whole 16-byte chunks: a row whose size in bytes is no multiple of 16
        # is written on up to the next 16-byte boundary (into the row pitch's padding)
        limit = g.dims[0] if load else b.udiv(
            b.and_(b.add(b.mul(g.dims[0], const(size)), const(15)), const(~15)), const(size))
        with _counted_loop(b, g.counts[0], f"j{size}") as j:
            coord = b.add(start, b.mul(j, g.estrides[0]))
            ok = b.and_(inside, b.icmp_unsigned("<", coord, limit))
            sptr = _shared_element(b, g, srow, j, size)
            gptr_int = b.add(grow, b.mul(coord, const(size)))
            if load:
                with b.if_else(ok) as (then, otherwise):
                    with then:
                        b.store(b.load(b.inttoptr(gptr_int, PTR), typ=word, align=size), sptr,
                                align=size)
                    with otherwise:
                        b.store(fill, sptr, align=size)
            else:
                with b.if_then(ok):
                    b.store(b.load(sptr, typ=word, align=size), b.inttoptr(gptr_int, PTR),
                            align=size)
        b.branch(done)
    b.position_at_end(done)


def _shared_element(b: ir.IRBuilder, g: _TileGeometry, srow: ir.Value, j: ir.Value,
                    size: int) -> ir.Value:
    """The (swizzled) shared memory address of element ``j`` of a box row at ``srow``."""
    saddr = b.add(srow, b.mul(j, const(size)))
    chunk = b.and_(b.lshr(saddr, const(7)), g.swizzle_mask)
    return b.inttoptr(b.xor(saddr, b.shl(chunk, const(4))), PTR)


def _atomic_add(ty: ir.Type, rmw: str, size: int):
    """``add(b, global, shared)``: the shared element added to the global one by an
    ``atomicrmw`` (relaxed, as the GPU's ``red`` is)."""
    def add(b: ir.IRBuilder, gptr: ir.Value, sptr: ir.Value) -> None:
        b.atomic_rmw(rmw, gptr, b.load(sptr, typ=ty, align=size), "monotonic")
    return add


def _widen_bf16(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(bits, I32), const(16, I32)), F32)


def _atomic_add_bf16(b: ir.IRBuilder, gptr: ir.Value, sptr: ir.Value) -> None:
    """bfloat16 (llvmlite has no type for it): the sum in float32, which holds two bfloat16s'
    sum closely enough that rounding it to bfloat16 (nearest, ties to even; NaN 0x7FFF, as
    ``cvt.rn.bf16.f32``) gives the correctly rounded sum; swapped in by compare-and-swap."""
    v = _widen_bf16(b, b.load(sptr, typ=I16, align=2))

    def added(old: ir.Value) -> ir.Value:
        total = b.fadd(_widen_bf16(b, old), v)
        bits = b.bitcast(total, I32)
        lsb = b.and_(b.lshr(bits, const(16, I32)), const(1, I32))
        rounded = b.lshr(b.add(bits, b.add(const(0x7FFF, I32), lsb)), const(16, I32))
        nan = b.fcmp_unordered("uno", total, total)
        return b.trunc(b.select(nan, const(0x7FFF, I32), rounded), I16)
    atomic_update(b, gptr, added, I16)


# the map types a reduce-add takes (PTX's tensor .add): data type code -> (size, adder)
_ADDS = {DATA_TYPES[name][0]: (DATA_TYPES[name][1], add) for name, add in (
    ("FLOAT32", _atomic_add(F32, "fadd", 4)), ("FLOAT16", _atomic_add(ir.HalfType(), "fadd", 2)),
    ("BFLOAT16", _atomic_add_bf16), ("INT32", _atomic_add(I32, "add", 4)),
    ("UINT32", _atomic_add(I32, "add", 4)), ("UINT64", _atomic_add(I64, "add", 8)))}


def _row_add(b: ir.IRBuilder, g: _TileGeometry, start: ir.Value, srow: ir.Value,
             inside: ir.Value, grow: ir.Value) -> None:
    """One innermost run of a reduce-add: each element inside the tensor added atomically,
    a loop specialized for each type the map may have."""
    fn = b.function
    done = fn.append_basic_block("add.done")
    switch = b.switch(g.dtype, done)
    for code, (size, add) in _ADDS.items():
        block = fn.append_basic_block(f"add.{code}")
        switch.add_case(const(code), block)
        b.position_at_end(block)
        with _counted_loop(b, g.counts[0], f"k{code}") as j:
            coord = b.add(start, b.mul(j, g.estrides[0]))
            ok = b.and_(inside, b.icmp_unsigned("<", coord, g.dims[0]))
            with b.if_then(ok):
                add(b, b.inttoptr(b.add(grow, b.mul(coord, const(size))), PTR),
                    _shared_element(b, g, srow, j, size))
        b.branch(done)
    b.position_at_end(done)


def build_module() -> ir.Module:
    """The LLVM module of every host TMA and mbarrier function (target set by the caller)."""
    mod = ir.Module(name="kaiojit_tma_host")
    barrier = define_mbarrier(mod)
    _define_tile_copy(mod, SYMBOL_LOAD, "load", barrier[SYMBOL_MBARRIER_COMPLETE_TX])
    _define_tile_copy(mod, SYMBOL_STORE, "store", None)
    _define_tile_copy(mod, SYMBOL_REDUCE_ADD, "add", None)
    return mod


class _Native:
    """The module compiled for this machine, its function addresses and ctypes callers."""

    def __init__(self) -> None:
        from llvmlite import binding as llvm

        from kaiojit.target import host_target_machine

        tm = host_target_machine()
        mod = build_module()
        mod.triple = llvm.get_process_triple()
        mod.data_layout = str(tm.target_data)
        ref = llvm.parse_assembly(str(mod))
        ref.verify()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(ref, pb)
        self.engine = llvm.create_mcjit_compiler(ref, tm)
        self.engine.finalize_object()
        self.addresses = {fn.name: self.engine.get_function_address(fn.name)
                          for fn in ref.functions if not fn.is_declaration}
        p, i32, u64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64
        coords = [i32] * MAX_RANK
        protos = {
            SYMBOL_LOAD: ctypes.CFUNCTYPE(i32, p, p, *coords, p),
            SYMBOL_STORE: ctypes.CFUNCTYPE(i32, p, *coords, p),
            SYMBOL_REDUCE_ADD: ctypes.CFUNCTYPE(i32, p, *coords, p),
            SYMBOL_MBARRIER_INIT: ctypes.CFUNCTYPE(None, p, i32),
            SYMBOL_MBARRIER_ARRIVE: ctypes.CFUNCTYPE(u64, p),
            SYMBOL_MBARRIER_ARRIVE_EXPECT_TX: ctypes.CFUNCTYPE(u64, p, i32),
            SYMBOL_MBARRIER_EXPECT_TX: ctypes.CFUNCTYPE(None, p, i32),
            SYMBOL_MBARRIER_COMPLETE_TX: ctypes.CFUNCTYPE(None, p, i32),
            SYMBOL_MBARRIER_TRY_WAIT_PARITY: ctypes.CFUNCTYPE(i32, p, i32),
        }
        self.call = {name: proto(self.addresses[name]) for name, proto in protos.items()}


_NATIVE: _Native | None = None
_NATIVE_LOCK = threading.Lock()


def _native() -> _Native:
    global _NATIVE
    if _NATIVE is None:
        with _NATIVE_LOCK:
            if _NATIVE is None:
                _NATIVE = _Native()
    return _NATIVE


def symbols() -> dict[str, int]:
    """Every host TMA/mbarrier function by symbol name, with its address (compiled once)."""
    return dict(_native().addresses)


def register_symbols() -> None:
    """Make the functions known to MCJIT's symbol resolution, for kernels that call them."""
    from llvmlite import binding as llvm

    for name, address in _native().addresses.items():
        llvm.add_symbol(name, address)


_REFUSALS = {
    ERR_NOT_A_HOST_MAP: "the tensor map was not encoded by the cpu backend (make it with "
                        "kj.TensorMap.tiled while the cpu backend is active)",
    ERR_MISALIGNED_COORDINATE: "the box's innermost coordinate times the element size is not a "
                               "multiple of 16 bytes (the box must start 16-byte aligned; an "
                               "illegal instruction on the GPU)",
    ERR_NEGATIVE_STORE_COORDINATE: "a store's box starts at a negative coordinate (an illegal "
                                   "instruction on the GPU)",
    ERR_REDUCE_TYPE: "a reduce-add needs a tensor map of float32, float16, bfloat16, int32, "
                     "uint32 or uint64 elements (PTX's tensor .add)",
}


def device_fault(kernel: str, op: str, refused_copy: bool, detail: int, where: str) -> str:
    """The message of a kernel fault the host copies or waits report (the cpu backend's
    ``KernelError``): a refused copy (``detail`` its status) or a stuck mbarrier wait
    (``detail`` the parity waited for)."""
    if refused_copy:
        why = _REFUSALS.get(detail, f"status {detail}")
        return f"kernel {kernel!r}: {op}() refused at {where}: {why}"
    return (f"kernel {kernel!r}: {op}() for parity {detail} at {where} can never complete: "
            "every thread of the block has run up to the wait and the phase is still pending "
            "(too few arrivals, or fewer bytes loaded than expected; on the cpu backend the "
            "threads of one branch run before those of the other, so a wait for arrivals "
            "from another branch of the same block cannot complete either)")


def _coords(coords: Sequence[int]) -> list[int]:
    if not 1 <= len(coords) <= MAX_RANK:
        raise ValueError(f"a tile copy takes 1 to {MAX_RANK} coordinates, got {len(coords)}")
    return [int(c) for c in coords] + [0] * (MAX_RANK - len(coords))


def tile_load(dst: int, tensormap: int, coords: Sequence[int], mbarrier: int = 0) -> int:
    """Copy the box at ``coords`` (innermost first) into shared memory at ``dst``; complete its
    bytes on ``mbarrier`` (an address, or 0 for none). Returns OK or an ERR_* status."""
    return _native().call[SYMBOL_LOAD](dst, tensormap, *_coords(coords), mbarrier or None)


def tile_store(tensormap: int, coords: Sequence[int], src: int) -> int:
    """Copy the box in shared memory at ``src`` to the tensor at ``coords`` (in-bounds
    elements only). Returns OK or an ERR_* status."""
    return _native().call[SYMBOL_STORE](tensormap, *_coords(coords), src)


def tile_reduce_add(tensormap: int, coords: Sequence[int], src: int) -> int:
    """Add the box in shared memory at ``src`` to the tensor at ``coords``, element by element
    (in-bounds elements only, each add atomic). Returns OK or an ERR_* status."""
    return _native().call[SYMBOL_REDUCE_ADD](tensormap, *_coords(coords), src)


def mbarrier_init(bar: int, count: int) -> None:
    _native().call[SYMBOL_MBARRIER_INIT](bar, count)


def mbarrier_arrive(bar: int) -> int:
    """Arrive once; returns the parity of the phase arrived on."""
    return _native().call[SYMBOL_MBARRIER_ARRIVE](bar)


def mbarrier_arrive_expect_tx(bar: int, nbytes: int) -> int:
    """Expect ``nbytes`` more transactions, then arrive; returns the phase's parity."""
    return _native().call[SYMBOL_MBARRIER_ARRIVE_EXPECT_TX](bar, nbytes)


def mbarrier_expect_tx(bar: int, nbytes: int) -> None:
    _native().call[SYMBOL_MBARRIER_EXPECT_TX](bar, nbytes)


def mbarrier_complete_tx(bar: int, nbytes: int) -> None:
    _native().call[SYMBOL_MBARRIER_COMPLETE_TX](bar, nbytes)


def mbarrier_try_wait_parity(bar: int, parity: int) -> bool:
    """Whether the phase of parity ``parity`` has completed."""
    return bool(_native().call[SYMBOL_MBARRIER_TRY_WAIT_PARITY](bar, parity))
