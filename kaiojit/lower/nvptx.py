"""The NVPTX target: special registers, shared and constant memory, barriers, warp operations,
atomics, libdevice math and vprintf, as the PTX ISA and LLVM's NVPTX backend spell them."""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from .llvmtypes import I1, I8, I32, I64, PTR, ll_type
from .target import Target, atomic_rmw, string_constant

SHARED, CONST, GLOBAL = 3, 4, 1

# math functions whose libdevice name differs from Python's
_LIBDEVICE_NAMES = {"gamma": "tgamma"}
# fastmath=True: libdevice's approximate versions (float32 only)
_FAST_F32 = {"exp", "log", "log2", "log10", "sin", "cos", "tan", "pow"}


class NVPTXTarget(Target):
    name = "nvptx"
    triple = "nvptx64-nvidia-cuda"
    data_layout = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

    def define_kernel(self, mod, kfunc, symbol, written):
        flat = self.flat_param_types(kfunc)
        fnty = ir.FunctionType(ir.VoidType(), [ty for _, ty in flat])
        fn = ir.Function(mod.module, fnty, name=symbol)
        fn.calling_convention = "ptx_kernel"
        readonly = {n for n, t in kfunc.params if isinstance(t, T.ArrayType) and n not in written}
        i = 0
        for name, t in kfunc.params:
            for part in T.param_parts(t):
                arg = fn.args[i]
                arg.name = flat[i][0]
                if part == T.PARAM_PTR:
                    arg.attributes.add("noundef")
                    if name in readonly:
                        # lets LLVM use the read-only data cache (ld.global.nc)
                        arg.attributes.add("noalias")
                        set.add(arg.attributes, "readonly")
                elif part == T.PARAM_TENSORMAP:
                    # a CUtensorMap by value in param space: __grid_constant__, 64-byte aligned
                    set.add(arg.attributes, "byval([16 x i64])")
                    set.add(arg.attributes, '"nvvm.grid_constant"')
                    arg.attributes.align = 64
                i += 1
        return fn

    def sreg(self, fl, name):
        fn = fl.mod.declare(f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
        return fl.builder.call(fn, [])

    def dynamic_shared_bytes(self, fl):
        ty = ir.FunctionType(I32, [])
        v = fl.builder.asm(ty, "mov.u32 $0, %dynamic_smem_size;", "=r", [], False)
        return fl.builder.zext(v, I64)

    def shared_array(self, fl, name, shape, dtype):
        mod = fl.mod
        if not shape:
            gv = mod.globals_by_name.get("$dynamic_shared")
            if gv is None:
                # every dynamic shared array aliases one buffer sized at launch, as in numba
                gv = ir.GlobalVariable(mod.module, ir.ArrayType(I8, 0), "kaiojit_dynamic_smem",
                                       addrspace=SHARED)
                gv.linkage = "external"
                gv.align = 16
                mod.globals_by_name["$dynamic_shared"] = gv
        else:
            gv = mod.globals_by_name.get(name)
            if gv is None:
                count = 1
                for d in shape:
                    count *= d
                elt = I8 if dtype.is_bool else ll_type(dtype)
                gv = ir.GlobalVariable(mod.module, ir.ArrayType(elt, count), name,
                                       addrspace=SHARED)
                gv.linkage = "internal"
                gv.initializer = ir.Constant(gv.value_type, ir.Undefined)
                gv.align = max(16, dtype.itemsize)
                mod.globals_by_name[name] = gv
        return fl.builder.addrspacecast(gv, PTR)

    def const_array(self, fl, name, array):
        mod = fl.mod
        gv = mod.globals_by_name.get(name)
        if gv is None:
            data = bytearray(array.tobytes())
            ty = ir.ArrayType(I8, len(data))
            gv = ir.GlobalVariable(mod.module, ty, name, addrspace=CONST)
            gv.initializer = ir.Constant(ty, data)
            gv.global_constant = True
            gv.linkage = "internal"
            gv.align = 16
            mod.globals_by_name[name] = gv
        return fl.builder.addrspacecast(gv, PTR)

    def math(self, fl, name, t, args):
        base = _LIBDEVICE_NAMES.get(name, name)
        if t == T.float32:
            fast = getattr(fl.options, "fastmath", False) and name in _FAST_F32
            sym = f"__nv_fast_{base}f" if fast else f"__nv_{base}f"
        elif t == T.float64:
            sym = f"__nv_{base}"
        else:
            raise AssertionError(f"math.{name} on {t}")
        lt = ll_type(t)
        fl.mod.needs_libdevice = True
        return fl.builder.call(fl.mod.declare(sym, lt, [lt] * len(args)), args)

    def atomic(self, fl, op, dtype, ptr, vals):
        return atomic_rmw(fl, op, dtype, ptr, vals, scope="device")

    def print(self, fl, fmt, values):
        b = fl.builder
        mod = fl.mod
        vprintf = mod.declare("vprintf", I32, [PTR, PTR])
        fmt_ptr = b.addrspacecast(string_constant(mod, fmt, GLOBAL), PTR)
        if values:
            struct = ir.LiteralStructType([v.type for v in values])
            buf = fl.alloca(struct, name="printf.args")
            for i, v in enumerate(values):
                b.store(v, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
            args = buf
        else:
            args = ir.Constant(PTR, None)
        b.call(vprintf, [fmt_ptr, args])

    def sync(self, fl, name, args, e):
        return _SYNC[name](fl, args)

    def bounds_check(self, fl, index, extent, at, dim, loc):
        b = fl.builder
        bad = b.icmp_unsigned(">=", index, extent)  # negative indices are huge unsigned
        with b.if_then(bad, likely=False):
            where = f"{loc.filename}:{loc.line}" if loc else "?"
            msg = (f"kaiojit: index out of bounds in kernel {fl.kfunc.qualname}: index %lld of "
                   f"dimension {dim} (size %lld) of an array {at} at {where}")
            self.print(fl, msg + "\n", [index, extent])
            b.call(fl.mod.declare("llvm.trap", ir.VoidType(), []), [])


# --- barriers, fences, warp operations ---------------------------------------------------------------


def _asm(fl, ret, text, constraints, args, ty_args):
    """Inline PTX, marked convergent: LLVM must not hoist or sink it across branches (an
    activemask or bar.red moved out of a divergent branch would see other threads)."""
    from llvmlite.ir.instructions import InlineAsm

    asm = InlineAsm(ir.FunctionType(ret, ty_args), text, constraints, side_effect=True)
    return fl.builder.call(asm, args, attrs=("convergent",))


def _syncthreads(fl, args):
    fn = fl.mod.declare("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32])
    fl.builder.call(fn, [ir.Constant(I32, 0)])


def _bar_red(kind):
    def lower(fl, args):
        pred = fl.builder.zext(args[0], I32)
        if kind == "popc":
            text = "{ .reg .pred p; setp.ne.u32 p, $1, 0; bar.red.popc.u32 $0, 0, p; }"
        else:
            text = ("{ .reg .pred p, q; setp.ne.u32 p, $1, 0; "
                    f"bar.red.{kind}.pred q, 0, p; selp.u32 $0, 1, 0, q; }}")
        return _asm(fl, I32, text, "=r,r,~{memory}", [pred], [I32])
    return lower


def _syncwarp(fl, args):
    fn = fl.mod.declare("llvm.nvvm.bar.warp.sync", ir.VoidType(), [I32])
    fl.builder.call(fn, [args[0]])


def _fence(level):
    def lower(fl, args):
        _asm(fl, ir.VoidType(), f"membar.{level};", "~{memory}", [], [])
    return lower


def _shuffle(mode):
    # the c operand packs the clamp (lanes 0..31 for idx/down/bfly, 0 for up) and segment mask
    clamp = 0 if mode == "up" else 0x1F

    def lower(fl, args):
        b = fl.builder
        mask, value, lane = args
        c = ir.Constant(I32, clamp)
        vty = value.type
        if isinstance(vty, ir.FloatType):
            fn = fl.mod.declare(f"llvm.nvvm.shfl.sync.{mode}.f32", vty, [I32, vty, I32, I32])
            return b.call(fn, [mask, value, lane, c])
        fn = fl.mod.declare(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
        if vty == I32:
            return b.call(fn, [mask, value, lane, c])
        # 64-bit values: shuffle both halves
        bits = b.bitcast(value, I64) if isinstance(vty, ir.DoubleType) else value
        lo = b.trunc(bits, I32)
        hi = b.trunc(b.lshr(bits, ir.Constant(I64, 32)), I32)
        lo = b.call(fn, [mask, lo, lane, c])
        hi = b.call(fn, [mask, hi, lane, c])
        out = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        return b.bitcast(out, vty) if isinstance(vty, ir.DoubleType) else out
    return lower


def _vote(kind):
    def lower(fl, args):
        mask, pred = args
        if kind == "ballot":
            fn = fl.mod.declare("llvm.nvvm.vote.ballot.sync", I32, [I32, I1])
        else:
            fn = fl.mod.declare(f"llvm.nvvm.vote.{kind}.sync", I1, [I32, I1])
        return fl.builder.call(fn, [mask, pred])
    return lower


def _activemask(fl, args):
    return _asm(fl, I32, "activemask.b32 $0;", "=r", [], [])


_SYNC = {
    "sync.syncthreads": _syncthreads,
    "sync.syncthreads_count": _bar_red("popc"),
    "sync.syncthreads_and": _bar_red("and"),
    "sync.syncthreads_or": _bar_red("or"),
    "sync.syncwarp": _syncwarp,
    "fence.threadfence": _fence("gl"),
    "fence.threadfence_block": _fence("cta"),
    "fence.threadfence_system": _fence("sys"),
    "warp.shfl_idx": _shuffle("idx"),
    "warp.shfl_up": _shuffle("up"),
    "warp.shfl_down": _shuffle("down"),
    "warp.shfl_xor": _shuffle("bfly"),
    "warp.all": _vote("all"),
    "warp.any": _vote("any"),
    "warp.ballot": _vote("ballot"),
    "warp.activemask": _activemask,
}
