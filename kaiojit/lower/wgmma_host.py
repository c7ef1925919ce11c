"""The cpu backend's wgmma: each thread computes its own fragment of D = A·B (+ D) from shared
memory, reading A and B through their matrix descriptors as the hardware does.

The fragment (PTX ISA, "wgmma register fragment D" for m64nNk16 with f32 accumulators): thread
``t`` of the warpgroup (``t = linear thread index % 128``) belongs to warp ``w = t // 32``,
which owns rows ``16w .. 16w + 15``; with ``lane = t % 32``, ``g = lane // 4`` and
``q = lane % 4``, its element ``i`` (of N/2) is

    row = 16w + g + 8 * ((i // 2) % 2),   col = 8 * (i // 4) + 2q + i % 2.

A K-major operand (A is M×K, B is N×K, K contiguous), element (r, k) of 16-bit type, is at
shared address ``start + off`` where, with the descriptor's start address, leading byte offset
(LBO) and stride byte offset (SBO):

* no swizzle (8×16-byte core matrices): ``off = (r%8)*16 + (r//8)*SBO + (k%8)*2 + (k//8)*LBO``;
* a W-byte swizzle (W = 128, 64, 32): rows of W bytes, 8 rows to an atom,
  ``off = (r%8)*W + (r//8)*SBO + 2k``, then the 16-byte chunk bits [4, 4+b) of the address
  are XORed with its bits [7, 7+b) (b = 3, 2, 1): the swizzle of the absolute shared address,
  as the TMA engine writes it (so a descriptor may start 32 bytes into a swizzled row to take
  the next k16 slice). Shared addresses here are offsets from the block's shared memory,
  which the cpu backend aligns to 1024 bytes, as a wgmma kernel's shared arrays are.

Each element is the products of the 16 k in order, each product exact in float32 (16-bit
inputs), added one by one to D (or to 0 when scale-d is 0) in float32, rounded to nearest.
The GPU's order and intermediate precision of that sum are not defined by PTX: results agree
exactly when every partial sum is representable (small integers, identity and permutation
matrices) and otherwise to float32 rounding of a 17-term sum.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..target import CTX_SHARED
from . import narrowfloat
from .host import counted_loop, ctx_word
from .llvmtypes import I32, I64, PTR, VOID

F32 = ir.FloatType()
I16 = ir.IntType(16)
K_BYTES = 32  # one wgmma's K slice: k16 of 16-bit inputs, k32 of fp8
ROWS_PER_WARP = 16
SWIZZLE_BYTES = {1: 128, 2: 64, 3: 32}  # the descriptor's mode -> the swizzle span in bytes


def shared_offset(fl, ptr):
    """``ptr`` as an offset from the block's shared memory: the cpu's shared address."""
    b = fl.builder
    return b.sub(b.ptrtoint(ptr, I64), ctx_word(b, fl.ctx, CTX_SHARED))


def mma(fl, variant: dict, dtype: T.ScalarType, acc, desc_a, desc_b, scale_d) -> None:
    """Call this variant's emulation for the current thread."""
    b = fl.builder
    fn = _emulation(fl.mod.module, variant, dtype)
    base = ctx_word(b, fl.ctx, CTX_SHARED)
    b.call(fn, [acc, desc_a, desc_b, base, fl.thread_linear(), scale_d])


def _load_input(b, ptr, dtype: T.ScalarType):
    """An input at ``ptr`` (16-bit or fp8) as float32 (exact)."""
    if dtype.float_format is not None:  # fp8: decoded as the conversions do
        return narrowfloat.decode_soft(b, b.load(ptr, typ=ir.IntType(8)), dtype.float_format)
    if dtype == T.float16:
        return b.fpext(b.load(ptr, typ=ir.HalfType()), F32)
    assert dtype.name == "bfloat16", dtype  # bf16: the high half of a float32
    bits = b.zext(b.load(ptr, typ=I16), I32)
    return b.bitcast(b.shl(bits, ir.Constant(I32, 16)), F32)


def _fields(b, desc):
    """(start, LBO, SBO, mode) of a descriptor, as i64 (addresses in bytes)."""
    def field(shift):
        v = b.and_(b.lshr(desc, ir.Constant(I64, shift)), ir.Constant(I64, 0x3FFF))
        return b.shl(v, ir.Constant(I64, 4))
    mode = b.lshr(desc, ir.Constant(I64, 62))
    return field(0), field(16), field(32), mode


def _address(b, fields, r, k, itemsize: int):
    """The shared address of element (r, k) of a K-major operand (see the module's doc)."""
    start, lbo, sbo, mode = fields
    c = lambda v: ir.Constant(I64, v)
    row8, group = b.and_(r, c(7)), b.lshr(r, c(3))
    per_row = 16 // itemsize  # elements in a 16-byte core matrix row
    plain = b.add(b.add(b.mul(row8, c(16)), b.mul(group, sbo)),
                  b.add(b.mul(b.urem(k, c(per_row)), c(itemsize)),
                        b.mul(b.udiv(k, c(per_row)), lbo)))
    plain = b.add(start, plain)
    # swizzled: mode 1, 2, 3 -> rows of 128, 64, 32 bytes and 3, 2, 1 XOR bits
    width = b.lshr(c(128), b.sub(mode, c(1)))
    bits = b.sub(b.shl(c(1), b.sub(c(4), mode)), c(1))
    swz = b.add(start, b.add(b.add(b.mul(row8, width), b.mul(group, sbo)),
                             b.mul(k, c(itemsize))))
    swz = b.xor(swz, b.shl(b.and_(b.lshr(swz, c(7)), bits), c(4)))
    return b.select(b.icmp_unsigned("==", mode, c(0)), plain, swz)


def _emulation(module: ir.Module, v: dict, dtype: T.ScalarType) -> ir.Function:
    """``void (acc, desc_a, desc_b, shared_base, thread, scale_d)``: one thread's wgmma."""
    name = (f"kaiojit.wgmma.m64n{v['n']}k16.{v['dtype']}.{v['scale_a']}.{v['scale_b']}."
            f"{v['trans_a']}.{v['trans_b']}")
    if name in module.globals:
        return module.globals[name]
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, I64, I64, I64, I64, I32]), name)
    fn.linkage = "internal"
    acc, desc_a, desc_b, base, thread, scale_d = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c = lambda x: ir.Constant(I64, x)
    t = b.and_(thread, c(127))
    warp, lane = b.lshr(t, c(5)), b.and_(t, c(31))
    g, q = b.lshr(lane, c(2)), b.and_(lane, c(3))
    fa, fb = _fields(b, desc_a), _fields(b, desc_b)
    base = b.inttoptr(base, PTR)
    keep = b.icmp_unsigned("!=", scale_d, ir.Constant(I32, 0))
    negate = v["scale_a"] * v["scale_b"] < 0
    with counted_loop(b, c(0), c(v["n"] // 2)) as i:
        row = b.add(b.add(b.mul(warp, c(ROWS_PER_WARP)), g),
                    b.mul(b.and_(b.lshr(i, c(1)), c(1)), c(8)))
        col = b.add(b.add(b.mul(b.lshr(i, c(2)), c(8)), b.mul(q, c(2))), b.and_(i, c(1)))
        slot = b.gep(acc, [i], source_etype=F32)
        total = fn.append_basic_block("sum")
        sum_ptr = _entry_alloca(fn, F32)
        b.store(b.select(keep, b.load(slot, typ=F32), ir.Constant(F32, 0.0)), sum_ptr)
        b.branch(total)
        b.position_at_end(total)
        with counted_loop(b, c(0), c(K_BYTES // dtype.itemsize)) as k:
            pa = b.gep(base, [_address(b, fa, row, k, dtype.itemsize)], source_etype=ir.IntType(8))
            pb = b.gep(base, [_address(b, fb, col, k, dtype.itemsize)], source_etype=ir.IntType(8))
            prod = b.fmul(_load_input(b, pa, dtype), _load_input(b, pb, dtype))
            if negate:
                prod = b.fneg(prod)
            b.store(b.fadd(b.load(sum_ptr, typ=F32), prod), sum_ptr)
        b.store(b.load(sum_ptr, typ=F32), slot)
    b.ret_void()
    return fn


def _entry_alloca(fn: ir.Function, ty: ir.Type):
    entry = fn.entry_basic_block
    b = ir.IRBuilder(entry)
    if entry.instructions:
        b.position_before(entry.instructions[0])
    return b.alloca(ty)


__all__ = ["mma", "shared_offset"]
