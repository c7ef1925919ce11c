"""The hooks a target gives the shared lowering (codegen.py, ops.py).

A target is a table of named methods: what a special register is, where shared memory lives,
how a math function, an atomic or a print is lowered, and the kernel's parameter list. Each
hook without an implementation fails loudly. Intrinsics carry their own lowering per target
name (``kaiojit/intrinsics/``), written with these hooks.
"""

from __future__ import annotations

import zlib

from llvmlite import ir

from .. import types as T
from ..errors import UnsupportedError
from .llvmtypes import I8, I64, ll_mem_type, ll_param_type, ll_type


def aligned_rows(b: ir.IRBuilder, t: T.ArrayType, shape: list, strides: list | None) -> None:
    """Tell LLVM what an aligned array's type promises: its row stride is a multiple of
    ``t.align`` bytes. The value is masked with the bits it is known to have (the mask changes
    nothing at run time), so every address computed from it has known low zero bits and
    accesses of consecutive elements may become one 128-bit access."""
    if t.ndim < 2:
        return
    if t.layout == "A":
        for d in range(t.ndim - 1):
            strides[d] = b.and_(strides[d], ir.Constant(I64, -t.align))
        return
    per_row = t.align // t.dtype.itemsize  # elements in one aligned unit
    if per_row > 1:
        d = t.ndim - 1 if t.layout == "C" else 0
        shape[d] = b.and_(shape[d], ir.Constant(I64, -per_row))


class Target:
    name = "abstract"
    triple = ""
    data_layout = ""

    # --- the kernel's parameters ------------------------------------------------------------------

    def define_kernel(self, mod, kfunc, symbol: str, written: set[str]) -> ir.Function:
        """The kernel function with one LLVM parameter per kernel parameter part."""
        raise NotImplementedError

    def kernel_arguments(self, fl) -> list:
        """The values of the user's arguments, built from the flat parameters of ``fl.llfunc``."""
        args = iter(fl.llfunc.args)
        values = []
        for name, t in fl.kfunc.params:
            values.append(self.argument_value(fl, t, args))
        return values

    def argument_value(self, fl, t: T.Type, args):
        b = fl.builder
        if isinstance(t, T.ScalarType):
            v = next(args)
            if t.is_bool:
                v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
            if t.is_complex:  # passed as its two parts
                pair = ir.Constant(ll_type(t), ir.Undefined)
                v = b.insert_value(b.insert_value(pair, v, 0), next(args), 1)
            return v
        if isinstance(t, T.ArrayType):
            ptr = next(args)
            shape = [next(args) for _ in range(t.ndim)]
            strides = [next(args) for _ in range(t.ndim)] if t.passes_strides else None
            if t.align:
                aligned_rows(b, t, shape, strides)
            return fl.make_array(ptr, shape, t.dtype, t.layout, strides)
        if isinstance(t, (T.TensorMapType, T.RecordType, T.CPointer)):
            return next(args)  # a record refers to its element in memory, as a[i] does
        if isinstance(t, T.TupleType):  # passed flat: its items, in order
            value = ir.Constant(ll_type(t), ir.Undefined)
            for i, e in enumerate(t.elements):
                value = b.insert_value(value, self.argument_value(fl, e, args), i)
            return value
        raise TypeError(f"type {t} cannot be a kernel parameter")

    @staticmethod
    def flat_param_types(kfunc) -> list[tuple[str, ir.Type]]:
        out = []
        for param, whole in kfunc.params:
            for path, t in T.param_leaves(whole):  # a tuple's items, flat
                name = param + path
                for i, part in enumerate(T.param_parts(t)):
                    if isinstance(t, T.ScalarType):
                        suffix = ".imag" if i else ""  # a complex scalar's second part
                    else:
                        suffix = "" if i == 0 else (
                            f".shape{i - 1}" if i <= getattr(t, "ndim", 0)
                            else f".stride{i - 1 - t.ndim}")
                    ty = ir.PointerType() if part == T.PARAM_TENSORMAP else ll_param_type(part)
                    out.append((name + suffix, ty))
        return out

    # --- hooks ---------------------------------------------------------------------------------------

    def begin_function(self, fl):
        pass

    def end_function(self, fl):
        pass

    def sreg(self, fl, name: str):
        raise UnsupportedError(f"special register {name} on {self.name}")

    def load(self, fl, ptr, dtype: T.ScalarType):
        return fl.builder.load(ptr, typ=ll_mem_type(dtype), align=dtype.align)

    def store(self, fl, ptr, value, dtype: T.ScalarType):
        fl.builder.store(value, ptr, align=dtype.align)

    def store_packed(self, fl, ptr, value, align: int):
        """Store ``value`` at ``ptr``, which is only ``align``-byte aligned (a packed record's
        field)."""
        fl.builder.store(value, ptr, align=align)

    def local_array(self, fl, llty: ir.Type, count: int):
        return fl.alloca(ir.ArrayType(llty, count), name="local")

    def dynamic_shared_bytes(self, fl):
        raise UnsupportedError(f"dynamic shared memory on {self.name}")

    def shared_array(self, fl, name, shape, dtype):
        raise UnsupportedError(f"shared memory on {self.name}")

    def align_shared(self, fl, name, shape, alignment: int) -> None:
        """Align the shared array ``name`` (just made by ``shared_array``) to ``alignment``
        bytes; a target whose layout already does so (the host's) needs nothing."""

    def shared_base(self, fl, name: str):
        """The shared array ``name``'s address in the target's shared address space, for
        loads and stores that address it directly; None where shared memory has no address
        space of its own (the host)."""
        return None

    def const_array(self, fl, name, array):
        raise UnsupportedError(f"constant memory on {self.name}")

    def math(self, fl, name: str, t: T.ScalarType, args: list):
        raise UnsupportedError(f"math.{name} on {self.name}")

    def atomic(self, fl, op: str, dtype: T.ScalarType, ptr, vals: list):
        raise UnsupportedError(f"atomics on {self.name}")

    def print(self, fl, fmt: str, values: list):
        raise UnsupportedError(f"print on {self.name}")

    def string_pointer(self, fl, text: str):
        """A generic pointer to the NUL-terminated constant ``text`` (a ``%s`` operand of
        ``print``)."""
        zero = ir.Constant(ir.IntType(32), 0)
        return fl.builder.gep(string_constant(fl.mod, text), [zero, zero])  # the first char

    def check_arch(self, decl, loc) -> None:
        """Raise a located error if this target's arch is below ``decl.min_arch``."""

    def link_symbols(self, names: tuple[str, ...]) -> None:
        """Make C functions that generated code calls (``decl.host_symbols``) resolvable."""

    def bounds_check(self, fl, index, extent, at, dim, loc):
        pass

    prefetches = False  # whether prefetch_ahead does anything (the lowering asks first)

    def prefetch_ahead(self, fl, ptr, index, extent, dtype: T.ScalarType, streams: int) -> None:
        """After a load of a streamed array (``kir.analysis.streamed_arrays``) at ``ptr``, the
        element ``index`` of ``extent``: ask for what a later block will load. Called only
        where ``prefetches`` is true."""


def string_constant(mod, text: str, addrspace: int = 0) -> ir.GlobalVariable:
    """A NUL-terminated string as a private global, shared by equal strings."""
    data = bytearray(text.encode("utf-8") + b"\0")
    key = f"str.{zlib.crc32(data):08x}.{len(data)}"  # the same name in every process
    gv = mod.globals_by_name.get(key)
    if gv is None:
        ty = ir.ArrayType(I8, len(data))
        gv = ir.GlobalVariable(mod.module, ty, name=key, addrspace=addrspace)
        gv.initializer = ir.Constant(ty, data)
        gv.global_constant = True
        gv.linkage = "private"
        mod.globals_by_name[key] = gv
    return gv


def atomic_rmw(fl, op: str, dtype: T.ScalarType, ptr, vals: list, scope: str = ""):
    """The atomics every LLVM target lowers (atomicrmw and cmpxchg), returning the old value."""
    b = fl.builder
    ordering = f'syncscope("{scope}") monotonic' if scope else "monotonic"
    if op == "cas":
        old, new = vals
        if dtype.is_float:
            ity = ir.IntType(dtype.bits)
            old, new = b.bitcast(old, ity), b.bitcast(new, ity)
        pair = b.cmpxchg(ptr, old, new, ordering, "monotonic")
        res = b.extract_value(pair, 0)
        return b.bitcast(res, ll_type(dtype)) if dtype.is_float else res
    (v,) = vals
    if dtype.is_float and op in ("max", "min"):
        return _float_max_min(fl, op, dtype, ptr, v, ordering)
    if dtype.is_float:
        rmw = {"add": "fadd", "sub": "fsub", "nanmax": "fmax", "nanmin": "fmin",
               "exch": "xchg"}[op]
    else:
        signed = dtype.kind == "i"
        rmw = {
            "add": "add", "sub": "sub", "exch": "xchg", "and": "and", "or": "or", "xor": "xor",
            "max": "max" if signed else "umax", "min": "min" if signed else "umin",
            "nanmax": "max" if signed else "umax", "nanmin": "min" if signed else "umin",
            "inc": "uinc_wrap", "dec": "udec_wrap",
        }[op]
    return b.atomic_rmw(rmw, ptr, v, ordering)


def _float_max_min(fl, op: str, dtype: T.ScalarType, ptr, v, ordering: str):
    """Python's ``max(old, v)`` (``min``) as a compare-and-swap loop: ``v`` is stored only
    where it compares greater (less) than what memory holds, so a NaN in memory stays and a
    NaN ``v`` changes nothing (LLVM's ``atomicrmw fmax`` is maxnum, NumPy's nanmax)."""
    b = fl.builder
    ity = ir.IntType(dtype.bits)
    start = b.block
    loop = b.append_basic_block("atomic.minmax.loop")
    swap = b.append_basic_block("atomic.minmax.swap")
    done = b.append_basic_block("atomic.minmax.done")
    first = b.load_atomic(ptr, "monotonic", dtype.bits // 8, typ=ity)
    b.branch(loop)
    b.position_at_end(loop)
    cur_bits = b.phi(ity)
    cur_bits.add_incoming(first, start)
    cur = b.bitcast(cur_bits, ll_type(dtype))
    better = b.fcmp_ordered(">" if op == "max" else "<", v, cur)
    b.cbranch(better, swap, done)
    b.position_at_end(swap)
    pair = b.cmpxchg(ptr, cur_bits, b.bitcast(v, ity), ordering, "monotonic")
    seen = b.extract_value(pair, 0)
    cur_bits.add_incoming(seen, swap)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    result = b.phi(ity)
    result.add_incoming(cur_bits, loop)
    result.add_incoming(cur_bits, swap)
    return b.bitcast(result, ll_type(dtype))


__all__ = ["Target", "string_constant", "atomic_rmw"]
