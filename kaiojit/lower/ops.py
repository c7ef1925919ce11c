"""Scalar operations and intrinsics with Python's semantics, for every target.

Integer division and modulo floor (Python's ``//`` and ``%``), division by zero gives 0 (as
NumPy does, without a trap on either target), shifts past the width give 0 (or the sign),
float-to-int casts saturate: the GPU and the host then compute the same thing.
"""

from __future__ import annotations

from llvmlite import ir

from .. import types as T
from ..frontend.kir import Expr
from .llvmtypes import I1, I32, I64, ll_type

_ICMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}


def icmp_for(t: T.ScalarType, op: str):
    if t.kind == "i":
        return lambda b, x, y: b.icmp_signed(op, x, y)
    return lambda b, x, y: b.icmp_unsigned(op, x, y)


def compare(fl, op: str, t: T.ScalarType, a, b_):
    b = fl.builder
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
    if dst.is_bool:
        if src.is_float:
            return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    lt = ll_type(dst)
    if src.is_bool:
        return b.uitofp(v, lt) if dst.is_float else b.zext(v, lt)
    if src.is_float and dst.is_float:
        return b.fpext(v, lt) if dst.bits > src.bits else b.fptrunc(v, lt)
    if src.is_float:
        name = "llvm.fptosi.sat" if dst.kind == "i" else "llvm.fptoui.sat"
        fn = fl.mod.declare(f"{name}.{_suffix(lt)}.{_suffix(v.type)}", lt, [v.type])
        return b.call(fn, [v])
    if dst.is_float:
        return b.sitofp(v, lt) if src.kind == "i" else b.uitofp(v, lt)
    if dst.bits < src.bits:
        return b.trunc(v, lt)
    if dst.bits > src.bits:
        return b.sext(v, lt) if src.kind == "i" else b.zext(v, lt)
    return v  # same width, other signedness: the bits stay


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


def binop(fl, op: str, operand_t: T.ScalarType, a, b_, rt: T.ScalarType):
    b = fl.builder
    t = operand_t
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
        if op == "//":
            return math_call(fl, "floor", t, [b.fdiv(a, b_, flags=fm)])
        if op == "%":
            return _float_mod(fl, a, b_)
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


def _float_mod(fl, a, b_):
    b = fl.builder
    r = b.frem(a, b_)
    zero = ir.Constant(a.type, 0.0)
    # Python: the result takes the divisor's sign
    differ = b.xor(b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", b_, zero))
    adjust = b.and_(b.fcmp_ordered("!=", r, zero), differ)
    return b.select(adjust, b.fadd(r, b_), r)


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
        if c == 0.5:
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
    b = fl.builder
    if t == T.float16 and name not in ("fabs", "copysign"):
        wide = [b.fpext(a, ir.FloatType()) for a in args]
        return b.fptrunc(math_call(fl, name, T.float32, wide), ir.HalfType())
    if name in LLVM_MATH:
        lt = ll_type(t)
        fn = fl.mod.declare(f"llvm.{name}.{_suffix(lt)}", lt, [lt] * len(args))
        return b.call(fn, args, fastmath=fl.fastmath)
    return fl.target.math(fl, name, t, args)


def _math_intrinsic(fl, e: Expr):
    name = e.attr[5:]
    b = fl.builder
    args = [fl.expr(a) for a in e.args]
    t = e.args[0].type
    if name in ("min", "max"):
        # Python: min(a, b) is b if b < a else a (the first of equals, NaN as it comes)
        op = "<" if name == "min" else ">"
        return b.select(compare(fl, op, t, args[1], args[0]), args[1], args[0])
    if name == "iabs":
        neg = b.icmp_signed("<", args[0], ir.Constant(args[0].type, 0))
        return b.select(neg, b.neg(args[0]), args[0])
    if name == "isnan":
        return b.fcmp_unordered("uno", args[0], args[0])
    if name in ("isinf", "isfinite"):
        absval = math_call(fl, "fabs", t, args)
        inf = ir.Constant(args[0].type, float("inf"))
        if name == "isinf":
            return b.fcmp_ordered("==", absval, inf)
        return b.fcmp_ordered("<", absval, inf)
    return math_call(fl, name, e.type, args)


def _bits_intrinsic(fl, e: Expr):
    name = e.attr[5:]
    b = fl.builder
    v = fl.expr(e.args[0])
    ty = v.type
    if name == "popc":
        r = b.call(fl.mod.declare(f"llvm.ctpop.i{ty.width}", ty, [ty]), [v])
    elif name == "clz":
        r = b.call(fl.mod.declare(f"llvm.ctlz.i{ty.width}", ty, [ty, I1]), [v, ir.Constant(I1, 0)])
    elif name == "ffs":
        tz = b.call(fl.mod.declare(f"llvm.cttz.i{ty.width}", ty, [ty, I1]), [v, ir.Constant(I1, 0)])
        is_zero = b.icmp_unsigned("==", v, ir.Constant(ty, 0))
        r = b.select(is_zero, ir.Constant(ty, 0), b.add(tz, ir.Constant(ty, 1)))
    else:  # brev
        return b.call(fl.mod.declare(f"llvm.bitreverse.i{ty.width}", ty, [ty]), [v])
    if ty.width > 32:
        return b.trunc(r, I32)
    if ty.width < 32:
        return b.zext(r, I32)
    return r


def _grid_intrinsic(fl, e: Expr):
    """kj.grid / kj.gridsize: 64-bit, from 32-bit special registers that are never negative."""
    kind, axis = e.attr.split(".")
    b = fl.builder
    target = fl.target
    ntid = b.zext(target.sreg(fl, f"ntid.{axis}"), I64)
    if kind == "grid":
        ctaid = b.zext(target.sreg(fl, f"ctaid.{axis}"), I64)
        tid = b.zext(target.sreg(fl, f"tid.{axis}"), I64)
        return b.add(b.mul(ctaid, ntid, flags=("nuw", "nsw")), tid, flags=("nuw", "nsw"))
    nctaid = b.zext(target.sreg(fl, f"nctaid.{axis}"), I64)
    return b.mul(ntid, nctaid, flags=("nuw", "nsw"))


def _array_view(fl, e: Expr):
    """a[i] of an n-d array: the (n-1)-d view at that leading index."""
    b = fl.builder
    at = e.args[0].type
    arr = fl.expr(e.args[0])
    indices = [fl.expr(i) for i in e.args[1:]]
    k = len(indices)
    full = indices + [ir.Constant(I64, 0)] * (at.ndim - k)
    zero_exprs = [Expr("const", T.int64, attr=0)] * (at.ndim - k)
    ptr = fl.element_pointer(arr, at, full, list(e.args[1:]) + zero_exprs, e.loc)
    shape = [b.extract_value(arr, [1, d]) for d in range(k, at.ndim)]
    if at.layout in ("C", "F"):
        all_shape = [b.extract_value(arr, [1, d]) for d in range(at.ndim)]
        from .codegen import contiguous_strides
        strides = contiguous_strides(b, all_shape, at.dtype.itemsize, at.layout)[k:]
    else:
        strides = [b.extract_value(arr, [2, d]) for d in range(k, at.ndim)]
    return fl.make_array(ptr, shape, at.dtype, e.type.layout, strides)


def _array_slice(fl, e: Expr):
    """A view by integers and Python slices (see ``ExpressionTyping.array_slice``): bounds
    normalized as Python does (negative ones count from the end, then clamped), the new
    shape the slice's length, the new stride the old one times the step."""
    b = fl.builder
    at = e.args[0].type
    arr = fl.expr(e.args[0])
    pattern = e.attr.split(":", 1)[1].split(",")
    operands = iter(e.args[1:])
    shape = [b.extract_value(arr, [1, d]) for d in range(at.ndim)]
    if at.layout in ("C", "F"):
        from .codegen import contiguous_strides
        strides = contiguous_strides(b, shape, at.dtype.itemsize, at.layout)
    else:
        strides = [b.extract_value(arr, [2, d]) for d in range(at.ndim)]
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    offset = zero
    new_shape, new_strides = [], []
    for d in range(at.ndim):
        spec = pattern[d] if d < len(pattern) else "s000"
        n, stride = shape[d], strides[d]
        if spec == "i":
            ie = next(operands)
            v = fl.expr(ie)
            if not fl.nonnegative(ie):
                v = b.select(b.icmp_signed("<", v, zero), b.add(v, n), v)
            offset = b.add(offset, b.mul(v, stride))
            continue
        start_e = next(operands) if spec[1] == "1" else None
        stop_e = next(operands) if spec[2] == "1" else None
        step_e = next(operands) if spec[3] == "1" else None
        step = fl.expr(step_e) if step_e is not None else one
        start, length = _slice_bounds(fl, n, step,
                                      fl.expr(start_e) if start_e is not None else None,
                                      fl.expr(stop_e) if stop_e is not None else None)
        offset = b.add(offset, b.mul(start, stride))
        new_shape.append(length)
        new_strides.append(b.mul(stride, step))
    base = b.gep(b.extract_value(arr, 0), [offset], source_etype=ir.IntType(8))
    return fl.make_array(base, new_shape, at.dtype, e.type.layout, new_strides)


def _slice_bounds(fl, n, step, start, stop):
    """Python's ``slice(start, stop, step).indices(n)``: the first index and the length
    (a zero step gives an empty view instead of Python's ValueError)."""
    b = fl.builder
    zero, one, minus_one = ir.Constant(I64, 0), ir.Constant(I64, 1), ir.Constant(I64, -1)
    neg = b.icmp_signed("<", step, zero)
    lower = b.select(neg, minus_one, zero)
    upper = b.select(neg, b.sub(n, one), n)

    def clamp(v, default):
        if v is None:
            return default
        counted = b.select(b.icmp_signed("<", v, zero), b.add(v, n), v)
        low = b.select(b.icmp_signed("<", counted, lower), lower, counted)
        return b.select(b.icmp_signed(">", low, upper), upper, low)

    first = clamp(start, b.select(neg, upper, lower))
    last = clamp(stop, b.select(neg, lower, upper))
    safe_step = b.select(b.icmp_signed("==", step, zero), one, step)
    span_up = b.sub(last, first)        # step > 0: elements in [first, last)
    span_down = b.sub(first, last)      # step < 0: elements in (last, first]
    span = b.select(neg, span_down, span_up)
    magnitude = b.select(neg, b.neg(safe_step), safe_step)
    count = b.sdiv(b.add(span, b.sub(magnitude, one)), magnitude)
    empty = b.or_(b.icmp_signed("<=", span, zero), b.icmp_signed("==", step, zero))
    return first, b.select(empty, zero, count)


def _atomic_intrinsic(fl, e: Expr):
    op = e.attr[7:]
    at = e.args[0].type
    n = at.ndim
    arr = fl.expr(e.args[0])
    idx_exprs = e.args[1:1 + n]
    indices = [fl.expr(i) for i in idx_exprs]
    vals = [fl.expr(v) for v in e.args[1 + n:]]
    ptr = fl.element_pointer(arr, at, indices, idx_exprs, e.loc)
    return fl.target.atomic(fl, op, at.dtype, ptr, vals)


def _print_intrinsic(fl, e: Expr):
    parts, values = [], []
    for a in e.args:
        if isinstance(a.type, T.StringType):
            parts.append(a.attr.replace("%", "%%"))
            continue
        v = fl.expr(a)
        t = a.type
        if t.is_float:
            parts.append("%f")
            if t.bits < 64:
                v = fl.builder.fpext(v, ir.DoubleType())
        elif t.is_bool:
            parts.append("%d")
            v = fl.builder.zext(v, I32)
        elif t.kind == "i":
            parts.append("%lld")
            v = convert(fl, v, t, T.int64)
        else:
            parts.append("%llu")
            v = convert(fl, v, t, T.uint64)
        values.append(v)
    fmt = " ".join(parts) + "\n"
    fl.target.print(fl, fmt, values)
    return None


def intrinsic(fl, e: Expr):
    name: str = e.attr
    if name.startswith("sreg."):
        return fl.target.sreg(fl, name[5:])
    if name.startswith("math."):
        return _math_intrinsic(fl, e)
    if name.startswith(("grid.", "gridsize.")):
        return _grid_intrinsic(fl, e)
    if name.startswith("bits."):
        return _bits_intrinsic(fl, e)
    if name.startswith("atomic."):
        return _atomic_intrinsic(fl, e)
    if name == "array.view":
        return _array_view(fl, e)
    if name.startswith("array.slice:"):
        return _array_slice(fl, e)
    if name == "print":
        return _print_intrinsic(fl, e)
    if name.startswith(("sync.", "fence.", "warp.")):
        args = [fl.expr(a) for a in e.args]
        return fl.target.sync(fl, name, args, e)
    raise AssertionError(f"no lowering for intrinsic {name}")


__all__ = ["binop", "compare", "convert", "intrinsic", "math_call", "icmp_for"]
