"""The NVPTX target: special registers, shared and constant memory, atomics, libdevice math,
vprintf and bounds checks, as the PTX ISA and LLVM's NVPTX backend spell them. The arch it
compiles for decides which intrinsics it has (``Intrinsic.min_arch``)."""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..errors import UnsupportedError
from ..target import parse_arch
from .llvmtypes import I8, I32, I64, PTR, ll_mem_type, ll_type
from .gpu_faults import add_site, check_index
from .target import Target, atomic_rmw, string_constant

SHARED, CONST, GLOBAL = 3, 4, 1

# math functions whose libdevice name differs from Python's
_LIBDEVICE_NAMES = {"gamma": "tgamma"}
# fastmath=True: libdevice's approximate versions (float32 only)
_FAST_F32 = {"exp", "log", "log2", "log10", "sin", "cos", "tan", "pow"}

# How far a streamed kernel's L2 prefetches run ahead, all its streams together, and from
# which arch on. Measured on the H200 (50 MB of L2; benchmarks/saxpy_probe.py, figures in
# benchmarks/RESULTS.md): saxpy's two streams 0.5 MB ahead each went from 3.34 TB/s to 3.90,
# 1 to 4 MB to 3.99-4.12 in every form tried, 8 MB fell back to 3.27 (prefetched lines evicted
# before their load). Smaller L2s (sm_75, sm_86: 4-6 MB) were not measured and get none.
PREFETCH_AHEAD_BYTES = 4 << 20
PREFETCH_MIN_ARCH = "sm_90"


class NVPTXTarget(Target):
    name = "nvptx"
    triple = "nvptx64-nvidia-cuda"
    data_layout = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

    def __init__(self, arch: str = "sm_90"):
        parse_arch(arch)  # a malformed arch is a ValueError here, not a puzzle later
        self.arch = arch
        self.prefetches = arch_has(arch, PREFETCH_MIN_ARCH)
        self.sites: list[dict] = []  # where a debug fault can come from (gpu_faults.py)

    def store_packed(self, fl, ptr, value, align: int):
        """ptxas reads a byte store of a register an f32 instruction wrote as a conversion to
        u8 (F2I), not as its low byte; LLVM splits an under-aligned float store into exactly
        such byte stores. Floats pass through a ``mov`` of their bits first, which ptxas
        keeps as bits."""
        b = fl.builder
        if isinstance(value.type, ir.LiteralStructType):  # complex: {real, imag}
            part = value.type.elements[0]
            for k in range(len(value.type.elements)):
                at = b.gep(ptr, [ir.Constant(I64, k * _bytes(part))], source_etype=I8)
                self.store_packed(fl, at, b.extract_value(value, k), align)
            return
        if isinstance(value.type, (ir.HalfType, ir.FloatType, ir.DoubleType)) or \
                str(value.type) == "bfloat":
            bits = _bytes(value.type) * 8
            it = ir.IntType(bits)
            reg = {16: "h", 32: "r", 64: "l"}[bits]
            asm = ir.InlineAsm(ir.FunctionType(it, [it]), f"mov.b{bits} $0, $1;",
                               f"={reg},{reg}")
            value = b.call(asm, [b.bitcast(value, it)])
        b.store(value, ptr, align=align)

    def check_arch(self, decl, loc):
        if not arch_has(self.arch, decl.min_arch):
            need = (f"exactly {decl.min_arch}" if decl.min_arch.endswith("a")
                    else f"{decl.min_arch} or newer")
            raise UnsupportedError(f"{decl.user_name}() needs {need}; this kernel is compiled "
                                   f"for {self.arch}", loc)

    def define_kernel(self, mod, kfunc, symbol, written):
        flat = self.flat_param_types(kfunc)
        fnty = ir.FunctionType(ir.VoidType(), [ty for _, ty in flat])
        fn = ir.Function(mod.module, fnty, name=symbol)
        fn.calling_convention = "ptx_kernel"
        readonly = {n for n, t in kfunc.params if isinstance(t, T.ArrayType) and n not in written}
        i = 0
        for name, whole in kfunc.params:
            for part, t in ((p, leaf) for _, leaf in T.param_leaves(whole)
                            for p in T.param_parts(leaf)):
                arg = fn.args[i]
                arg.name = flat[i][0]
                if part == T.PARAM_PTR:
                    arg.attributes.add("noundef")
                    if getattr(t, "align", 0):  # specialized on: LLVM may use 128-bit accesses
                        arg.attributes.align = t.align
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

    def local_array(self, fl, llty, count):
        slot = fl.alloca(ir.ArrayType(llty, count), name="local")
        # 16-byte aligned, so that neighbouring elements of an array left in local memory
        # may be accessed as ld/st.local.v2/v4 (one promoted to registers has no address)
        slot.align = 16
        return slot

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

    def align_shared(self, fl, name, shape, alignment):
        gv = fl.mod.globals_by_name[name if shape else "$dynamic_shared"]
        gv.align = max(gv.align or 1, alignment)

    def shared_base(self, fl, name):
        # the addrspace(3) global itself: LLVM cannot see an alignment through the cast to a
        # generic pointer, so only accesses addressed from it become ld/st.shared.v2/v4
        gv = fl.mod.globals_by_name.get(name)
        if gv is None:
            return None
        # the global itself as an opaque `ptr addrspace(3)` (llvmlite types it as a pointer
        # to its array, which a store of one element would refuse)
        return ir.FormattedConstant(ir.PointerType(addrspace=SHARED), gv.get_reference())

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
        fast = getattr(fl.options, "fastmath", False)
        if fast and name == "tanh" and t == T.float32 and arch_has(self.arch, "sm_75"):
            # libdevice has no fast tanhf: PTX's tanh.approx.f32 (sm_75 on), as nvcc's
            # --use_fast_math gives (max. relative error 2**-11)
            f32 = ll_type(t)
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32]), "tanh.approx.f32 $0, $1;", "=f,f")
            return fl.builder.call(asm, args)
        if name == "hypot" and t == T.float32 and not getattr(fl.options, "fastmath", False):
            # __nv_hypotf is up to 3 ulp off (1.0101524 for hypot(0.71428573, 0.71428573),
            # where the host and NumPy give 1.0101526): in float64, rounded once at the end
            b = fl.builder
            wide = [b.fpext(a, ir.DoubleType()) for a in args]
            return b.fptrunc(self.math(fl, name, T.float64, wide), ir.FloatType())
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

    def string_pointer(self, fl, text):
        return fl.builder.addrspacecast(string_constant(fl.mod, text, GLOBAL), PTR)

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

    def prefetch_ahead(self, fl, ptr, index, extent, dtype, streams):
        """``prefetch.global.L2`` of the element ``PREFETCH_AHEAD_BYTES / streams`` bytes on,
        where that is still within the array. A one-element-a-thread kernel keeps only one
        load per thread and stream in flight, which caps the bytes in flight below what HBM
        needs; a prefetch holds no register, so the lines later blocks load are on their way
        (or in L2) by the time those blocks start."""
        b = fl.builder
        ahead = ir.Constant(I64, max(1, PREFETCH_AHEAD_BYTES // streams // dtype.itemsize))
        within = b.icmp_signed("<", b.add(index, ahead, flags=("nsw",)), extent)
        with b.if_then(within, likely=True):
            at = b.addrspacecast(b.gep(ptr, [ahead], source_etype=ll_mem_type(dtype)),
                                 ir.PointerType(addrspace=GLOBAL))
            fn = fl.mod.declare("llvm.nvvm.prefetch.global.L2", ir.VoidType(), [at.type])
            b.call(fn, [at])

    def bounds_check(self, fl, index, extent, at, dim, loc):
        """Record the first out-of-bounds index in ``kaiojit_fault`` (see gpu_faults.py);
        the access then uses element 0."""
        site = add_site(self.sites, loc, array=getattr(fl, "array_name", "?"), dim=dim,
                        type=str(at))
        return check_index(fl, index, extent, site)


# --- inline PTX and archs ------------------------------------------------------------------------


def inline_asm(fl, ret: ir.Type, text: str, constraints: str, args: list, convergent: bool):
    """Inline PTX with side effects. ``convergent`` (the intrinsic's property) tells LLVM not to
    hoist or sink it across branches: an activemask or bar.red moved out of a divergent branch
    would see other threads."""
    asm = ir.InlineAsm(ir.FunctionType(ret, [a.type for a in args]), text, constraints,
                    side_effect=True)
    return fl.builder.call(asm, args, attrs=("convergent",) if convergent else ())


def arch_has(arch: str, needed: str) -> bool:
    """Whether code for ``arch`` may use what ``needed`` introduced: 'sm_70' is there from
    sm_70 on; an arch-specific 'sm_90a' only on sm_90a itself."""
    if needed.endswith("a"):
        return arch.endswith("a") and parse_arch(arch) == parse_arch(needed)
    return parse_arch(arch) >= parse_arch(needed)


def _bytes(t: ir.Type) -> int:
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(t)]
