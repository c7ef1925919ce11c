"""Scalar operations with Python's semantics, for every target: arithmetic, comparisons,
conversions and the math functions they need.

Integer division and modulo floor (Python's ``//`` and ``%``), division by zero gives 0 (as
NumPy does, without a trap on either target), shifts past the width give 0 (or the sign),
float-to-int casts saturate: the GPU and the host then compute the same thing.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from . import complexops
from .llvmtypes import I1, I32, ll_type
from .narrowfloat import float_to_bf16, narrow, widen


def icmp_for(t: T.ScalarType, op: str):
    if t.kind == "i":
        return lambda b, x, y: b.icmp_signed(op, x, y)
    return lambda b, x, y: b.icmp_unsigned(op, x, y)


def compare(fl, op: str, t: T.ScalarType, a, b_):
    b = fl.builder
    if t.is_complex:
        return complexops.compare(fl, op, a, b_)
    if t.computes_in is not None:
        a, b_, t = widen(fl, a, t), widen(fl, b_, t), t.computes_in
    if t.is_float:
        # Python: NaN compares unequal to everything, so != is unordered
        if op == "!=":
            return b.fcmp_unordered("!=", a, b_)
        return b.fcmp_ordered(op, a, b_)
    return icmp_for(t, op)(b, a, b_)


def convert(fl, v, src: T.ScalarType, dst: T.ScalarType):
    b = fl.builder
    if src == dst:
        return v
    if src.is_complex or dst.is_complex:
        return complexops.convert(fl, v, src, dst)
    if src.computes_in is not None:  # widening is exact (bfloat16: a float32's top half)
        v, src = widen(fl, v, src), src.computes_in
        if dst == src:
            return v
    if dst.computes_in is not None:
        return narrow(fl, convert(fl, v, src, dst.computes_in), dst)
    if dst.is_bool:
        if src.is_float:
            return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    lt = ll_type(dst)
    if src.is_bool:
        return b.uitofp(v, lt) if dst.is_float else b.zext(v, lt)
    if src.is_float and dst.is_float:
        if dst == T.float16 and src == T.float64 and fl.target.name != "nvptx":
            return b.fptrunc(_round_to_odd_f32(fl, v), lt)
        return b.fpext(v, lt) if dst.bits > src.bits else b.fptrunc(v, lt)
    if src.is_float:
        if src == T.float16:
            # widened first (exact): LLVM 22 on x86 with AVX512-FP16 converts half to i16 with
            # vcvttsh2si and drops the NaN test, giving -32768 for NaN; PTX converts through
            # f32 anyway
            v = b.fpext(v, ir.FloatType())
        name = "llvm.fptosi.sat" if dst.kind == "i" else "llvm.fptoui.sat"
        fn = fl.mod.declare(f"{name}.{_suffix(lt)}.{_suffix(v.type)}", lt, [v.type])
        return b.call(fn, [v])
    if dst == T.float16:
        # through float32: exact below 2**24, and every larger integer overflows float16 to
        # inf either way, as NumPy's conversion does (nothing relies on how the GPU's direct
        # integer-to-f16 cvt treats values past 65504)
        wide = b.sitofp(v, ir.FloatType()) if src.kind == "i" else b.uitofp(v, ir.FloatType())
        return b.fptrunc(wide, lt)
    if dst.is_float:
        return b.sitofp(v, lt) if src.kind == "i" else b.uitofp(v, lt)
    if dst.bits < src.bits:
        return b.trunc(v, lt)
    if dst.bits > src.bits:
        return b.sext(v, lt) if src.kind == "i" else b.zext(v, lt)
    return v  # same width, other signedness: the bits stay


def _round_to_odd_f32(fl, v):
    """A float64 narrowed to float32 rounding to odd: rounding that on to float16 then rounds
    once, as a direct conversion does. The host has no float64-to-float16 instruction, and
    LLVM's call for it (``__truncdfhf2``) is not in the process to link."""
    b = fl.builder
    f32 = ir.FloatType()
    y = b.fptrunc(v, f32)
    inexact = b.fcmp_ordered("!=", b.fpext(y, v.type), v)  # NaN: unordered, kept as it is
    bits = b.bitcast(y, I32)
    even = b.icmp_unsigned("==", b.and_(bits, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    # the odd neighbour is one unit further from zero when |y| < |v|, nearer when |y| > |v|
    too_big = b.fcmp_ordered(">", b.fpext(math_call(fl, "fabs", T.float32, [y]), v.type),
                             math_call(fl, "fabs", T.float64, [v]))
    step = b.select(too_big, ir.Constant(I32, -1), ir.Constant(I32, 1))
    odd = b.bitcast(b.add(bits, step), f32)
    return b.select(b.and_(inexact, even), odd, y)


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


def binop(fl, op: str, operand_t: T.ScalarType, a, b_, rt: T.ScalarType):
    b = fl.builder
    t = operand_t
    if t.is_complex:
        return complexops.binop(fl, op, t, a, b_)
    wide_t = t.computes_in
    if wide_t is not None:  # computed in float32, then rounded once (exact for + - * /)
        wide = binop(fl, op, wide_t, widen(fl, a, t), widen(fl, b_, t), wide_t)
        return narrow(fl, wide, rt) if rt.computes_in is not None else wide
    if t.is_float:
        fm = fl.fastmath
        if op == "+":
            return b.fadd(a, b_, flags=fm)
        if op == "-":
            return b.fsub(a, b_, flags=fm)
        if op == "*":
            return b.fmul(a, b_, flags=fm)
        if op == "/":
            return b.fdiv(a, b_, flags=fm)
        if op in ("//", "%"):
            return float_divmod(fl, t, a, b_)[0 if op == "//" else 1]
        if op == "**":
            return _float_pow(fl, t, a, b_)
    else:
        signed = t.kind == "i"
        if op == "+":
            return b.add(a, b_)
        if op == "-":
            return b.sub(a, b_)
        if op == "*":
            return b.mul(a, b_)
        if op in ("//", "%"):
            return _int_divmod(fl, op, signed, a, b_)
        if op == "**":
            return _int_pow(fl, t, a, b_)
        if op == "&":
            return b.and_(a, b_)
        if op == "|":
            return b.or_(a, b_)
        if op == "^":
            return b.xor(a, b_)
        if op in ("<<", ">>"):
            return _shift(fl, op, signed, a, b_)
    raise AssertionError(f"binop {op} on {t}")


def _int_divmod(fl, op: str, signed: bool, a, b_):
    b = fl.builder
    ty = a.type
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    is_zero = b.icmp_unsigned("==", b_, zero)
    if not signed:
        safe = b.select(is_zero, one, b_)
        r = b.udiv(a, safe) if op == "//" else b.urem(a, safe)
        return b.select(is_zero, zero, r)
    minus_one = ir.Constant(ty, -1)
    is_m1 = b.icmp_signed("==", b_, minus_one)
    safe = b.select(b.or_(is_zero, is_m1), one, b_)
    q = b.sdiv(a, safe)
    r = b.srem(a, safe)
    # floor: when the remainder's sign differs from the divisor's, step down
    adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, b_), zero))
    if op == "//":
        q = b.select(adjust, b.sub(q, one), q)
        q = b.select(is_m1, b.neg(a), q)
        return b.select(is_zero, zero, q)
    r = b.select(adjust, b.add(r, b_), r)
    return b.select(b.or_(is_zero, is_m1), zero, r)


def float_divmod(fl, t: T.ScalarType, a, b_):
    """Python's (and NumPy's) ``(a // b, a % b)`` of floats, NumPy's ``npy_divmod`` step by
    step: from the exact ``fmod``, the quotient ``(a - mod) / b`` stepped down when the
    remainder's sign differs from the divisor's, then rounded to the nearest integer (not
    ``floor(a / b)``, whose rounded quotient can be one too large: ``1 // 0.1`` is 9.0); a zero
    remainder takes the divisor's sign; ``x // 0`` is ``x / 0`` and ``x % 0`` NaN; an infinite
    ``a`` gives NaN. float16 computes in float32, as NumPy's half loops do."""
    b = fl.builder
    if t == T.float16:
        f32 = ir.FloatType()
        div, mod = float_divmod(fl, T.float32, b.fpext(a, f32), b.fpext(b_, f32))
        return b.fptrunc(div, a.type), b.fptrunc(mod, a.type)
    fm = fl.fastmath
    zero, one, half = (ir.Constant(a.type, v) for v in (0.0, 1.0, 0.5))
    mod = raw_mod = math_call(fl, "fmod", t, [a, b_])
    quotient = b.fdiv(a, b_, flags=fm)
    div = b.fdiv(b.fsub(a, mod, flags=fm), b_, flags=fm)
    mod_nonzero = b.fcmp_unordered("!=", mod, zero)  # C's `if (mod)`: NaN is true
    signs_differ = b.xor(b.fcmp_ordered("<", b_, zero), b.fcmp_ordered("<", mod, zero))
    adjust = b.and_(mod_nonzero, signs_differ)
    signed_zero = math_call(fl, "copysign", t, [zero, b_])
    mod = b.select(adjust, b.fadd(mod, b_, flags=fm), b.select(mod_nonzero, mod, signed_zero))
    div = b.select(adjust, b.fsub(div, one, flags=fm), div)
    floor = math_call(fl, "floor", t, [div])
    up = b.fcmp_ordered(">", b.fsub(div, floor, flags=fm), half)
    floor = b.select(up, b.fadd(floor, one, flags=fm), floor)
    floordiv = b.select(b.fcmp_unordered("!=", div, zero), floor,
                        math_call(fl, "copysign", t, [zero, quotient]))
    b_zero = b.fcmp_ordered("==", b_, zero)
    return b.select(b_zero, quotient, floordiv), b.select(b_zero, raw_mod, mod)


def _shift(fl, op: str, signed: bool, a, b_):
    b = fl.builder
    ty = a.type
    width = ir.Constant(ty, ty.width)
    too_far = b.icmp_unsigned(">=", b_, width)
    amount = b.select(too_far, ir.Constant(ty, ty.width - 1), b_)
    if op == "<<":
        return b.select(too_far, ir.Constant(ty, 0), b.shl(a, amount))
    if signed:
        return b.ashr(a, amount)  # past the width: all sign bits, as the clamp gives
    return b.select(too_far, ir.Constant(ty, 0), b.lshr(a, amount))


def _float_pow(fl, t: T.ScalarType, a, b_):
    if isinstance(b_, ir.Constant):
        c = b_.constant
        if c == 2.0:
            return fl.builder.fmul(a, a, flags=fl.fastmath)
        if c == 1.0:
            return a
        if c == 0.5:  # NumPy's power does the same: (-0.0) ** 0.5 is -0.0, (-inf) ** 0.5 NaN
            return math_call(fl, "sqrt", t, [a])
    return math_call(fl, "pow", t, [a, b_])


def _int_pow(fl, t: T.ScalarType, a, b_):
    """Exponentiation by squaring, in a small internal function (a negative exponent gives 0)."""
    mod = fl.mod
    ty = a.type
    name = f"kaiojit.ipow.{'s' if t.kind == 'i' else 'u'}{ty.width}"
    fn = mod.module.globals.get(name)
    if fn is None:
        fn = ir.Function(mod.module, ir.FunctionType(ty, [ty, ty]), name=name)
        fn.linkage = "internal"
        base, exp = fn.args
        entry = fn.append_basic_block("entry")
        loop = fn.append_basic_block("loop")
        done = fn.append_basic_block("done")
        bb = ir.IRBuilder(entry)
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        bb.branch(loop)
        bb.position_at_end(loop)
        acc = bb.phi(ty)
        bsq = bb.phi(ty)
        e = bb.phi(ty)
        acc.add_incoming(one, entry)
        bsq.add_incoming(base, entry)
        e.add_incoming(exp, entry)
        odd = bb.trunc(e, I1)
        acc2 = bb.select(odd, bb.mul(acc, bsq), acc)
        bsq2 = bb.mul(bsq, bsq)
        e2 = bb.lshr(e, one)
        acc.add_incoming(acc2, loop)
        bsq.add_incoming(bsq2, loop)
        e.add_incoming(e2, loop)
        cont = bb.icmp_unsigned("!=", e2, zero)
        if t.kind == "i":
            cont = bb.and_(cont, bb.icmp_signed(">", exp, zero))
        bb.cbranch(cont, loop, done)
        bb.position_at_end(done)
        result = acc2
        if t.kind == "i":
            result = bb.select(bb.icmp_signed("<", exp, zero), zero, acc2)
        bb.ret(result)
    return fl.builder.call(fn, [a, b_])


# --- math ------------------------------------------------------------------------------------------

# functions every LLVM target lowers from its own intrinsics
LLVM_MATH = {"sqrt", "fabs", "floor", "ceil", "trunc", "rint", "fma", "copysign"}


def math_call(fl, name: str, t: T.ScalarType, args: list):
    """``name`` (a function of Python's math module, or rint/fma) on floats of type ``t``:
    an LLVM intrinsic where every target has one, else the target's math library; float16
    computes in float32."""
    b = fl.builder
    if t == T.float16 and name == "fma":
        if fl.target.name == "nvptx":  # the GPU's fma.rn.f16: one rounding, in hardware
            fn = fl.mod.declare("llvm.fma.f16", ir.HalfType(), [ir.HalfType()] * 3)
            return b.call(fn, args, fastmath=fl.fastmath)
        # in float64, where a product of float16s and its sum with one are exact for every
        # finite float16 result: one rounding (float32 would round twice)
        wide = [b.fpext(a, ir.DoubleType()) for a in args]
        return convert(fl, math_call(fl, name, T.float64, wide), T.float64, T.float16)
    if t == T.float16 and name not in ("fabs", "copysign"):
        wide = [b.fpext(a, ir.FloatType()) for a in args]
        return b.fptrunc(math_call(fl, name, T.float32, wide), ir.HalfType())
    if t.computes_in is not None:
        wide = [widen(fl, a, t) for a in args]
        return narrow(fl, math_call(fl, name, t.computes_in, wide), t)
    if name in LLVM_MATH:
        lt = ll_type(t)
        fn = fl.mod.declare(f"llvm.{name}.{_suffix(lt)}", lt, [lt] * len(args))
        return b.call(fn, args, fastmath=fl.fastmath)
    return fl.target.math(fl, name, t, args)


complexops.use_real_operations(math_call, convert)

__all__ = ["binop", "compare", "convert", "float_to_bf16", "icmp_for", "math_call"]
