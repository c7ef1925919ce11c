"""Rewrites of the PTX LLVM's NVPTX backend emits, each around a miscompile the differential
fuzzer found on the H200 (ptxas 13.0 and the driver's JIT of the same version, or LLVM 22's
NVPTX instruction selection). Each writes the same value in a spelling the faulty step keeps;
``respell`` applies them all to a module's PTX. docs/semantics.md lists them."""

from __future__ import annotations

import re


def respell(ptx: str) -> str:
    ptx = spell_negations_feeding_min_max(ptx)
    ptx = spell_integer_abs(ptx)
    ptx = spell_shift_left_by_31(ptx)
    ptx = spell_float_min_max_with_zero(ptx)
    return spell_half_min_max_with_zero(ptx)


_MIN_MAX_OPERANDS = re.compile(
    r"\t(?:min|max)\.[su](?:16|32) \t%rs?\d+, (%rs?\d+|-?\d+), (%rs?\d+|-?\d+);")
_NEGATION = re.compile(r"\tneg\.s(16|32) \t(%rs?\d+), (%rs?\d+);")


def spell_negations_feeding_min_max(ptx: str) -> str:
    """Write ``neg.s32 d, s`` as ``not.b32 d, s; add.s32 d, d, 1`` (the same value; 16-bit
    likewise) where ``d`` is an operand of an integer min or max.

    ptxas 13.0 fuses ``max(max(a, -b), c)`` into one three-input VIMNMX3 and drops the
    negation: the GPU computed ``max(a, b, c)`` (fuzzer seed 37203000301). It keeps a negation
    spelled this way."""
    if "\tneg.s" not in ptx:
        return ptx
    operands = {r for pair in _MIN_MAX_OPERANDS.findall(ptx) for r in pair}
    if not operands:
        return ptx

    def spelled(m: re.Match) -> str:
        bits, d, src = m.groups()
        if d not in operands:
            return m.group(0)
        return f"\tnot.b{bits} \t{d}, {src};\n\tadd.s{bits} \t{d}, {d}, 1;"

    return _NEGATION.sub(spelled, ptx)


_ABS = re.compile(r"\tabs\.s(16|32|64) \t(%r[sd]?\d+), (%r[sd]?\d+);")


def spell_integer_abs(ptx: str) -> str:
    """Write ``abs.s32 d, a`` as ``t = a >> 31; d = (a ^ t) - t`` (the same value, the most
    negative integer included, which stays itself; 16 and 64 bits likewise).

    ptxas 13.0 takes an ``abs.s32`` result as never negative, as C's ``abs`` of the most
    negative integer is undefined; PTX's, and kaiojit's (NumPy's) wraps. ``abs(x) < 0`` was
    folded to false and a floor division by ``abs(x)`` lost its negative-divisor fix-up
    (fuzzer seeds 38539905569, 38539907010, 38539913111). It keeps the spelled-out form's
    sign test."""
    if "\tabs.s" not in ptx:
        return ptx

    def spelled(m: re.Match) -> str:
        bits, d, a = m.groups()
        t = f"%abs{bits}"
        return (f"\t{{\n\t.reg .b{bits} {t};\n\tshr.s{bits} \t{t}, {a}, {int(bits) - 1};\n"
                f"\txor.b{bits} \t{d}, {a}, {t};\n\tsub.s{bits} \t{d}, {d}, {t};\n\t}}")

    return _ABS.sub(spelled, ptx)


_SHL_31 = re.compile(r"\tshl\.b64 \t(%rd\d+), (%rd\d+), 31;")


def spell_shift_left_by_31(ptx: str) -> str:
    """Write ``shl.b64 d, s, 31`` as two 32-bit shifts of ``s``'s halves: the high half a
    funnel shift of both (``shf.l.wrap.b32``), the low half ``shl.b32`` (the same value).

    ptxas 13.0, where ``s`` is uniform (a kernel parameter) in a kernel that uses the uniform
    datapath widely (a coarse entry), multiplies ``s``'s low half by ``0x80000000`` in one
    ``UIMAD.WIDE.U32`` and then subtracts the low half from the high word, as for a multiply
    by ``-2**31``: the GPU computed ``-(s << 31)`` (fuzzer seed 40884802674). ptxas keeps the
    halves' shifts as two ``USHF``."""
    if ", 31;" not in ptx:
        return ptx

    def spelled(m: re.Match) -> str:
        d, s = m.groups()
        return ("\t{\n\t.reg .b32 %shl_lo, %shl_hi;\n"
                f"\tmov.b64 \t{{%shl_lo, %shl_hi}}, {s};\n"
                "\tshf.l.wrap.b32 \t%shl_hi, %shl_lo, %shl_hi, 31;\n"
                "\tshl.b32 \t%shl_lo, %shl_lo, 31;\n"
                f"\tmov.b64 \t{d}, {{%shl_lo, %shl_hi}};\n\t}}")

    return _SHL_31.sub(spelled, ptx)


# a float min with +0.0, or max with -0.0, as an immediate operand
_FREG = r"%(?:rd?|fd?)\d+"
_ZERO_MIN_MAX = re.compile(
    rf"\t(min|max)\.(f32|f64) \t({_FREG}), ({_FREG}|0[fd][0-9A-F]+), ({_FREG}|0[fd][0-9A-F]+);")
_PLUS_ZERO = {"f32": "0f00000000", "f64": "0d0000000000000000"}
_MINUS_ZERO = {"f32": "0f80000000", "f64": "0d8000000000000000"}


def spell_float_min_max_with_zero(ptx: str) -> str:
    """Write ``min.f64 d, a, +0.0`` as ``d = a < +0.0 ? a : +0.0`` (``max`` with -0.0 as
    ``a > -0.0 ? a : -0.0``; float32 likewise).

    LLVM 22's NVPTX instruction selection turns ``select(fcmp olt a, C), a, C)`` into
    ``min.f64 a, C`` for any constant ``C``; for ``C = +0.0`` and ``a = -0.0`` the select gives
    +0.0 (Python's ``min(0.0, -0.0)``) and ``min.f64`` gives -0.0 (fuzzer seed 38539905713;
    ``max`` with -0.0 and ``a = +0.0`` likewise). A ``setp`` and ``selp`` give the select's
    value; for C's ``fmin`` either zero is right, so the rewrite holds there too."""
    if "\tmin.f" not in ptx and "\tmax.f" not in ptx:
        return ptx

    def spelled(m: re.Match) -> str:
        op, ty, d, x, y = m.groups()
        zero = (_PLUS_ZERO if op == "min" else _MINUS_ZERO)[ty]
        if zero not in (x, y):
            return m.group(0)
        a = y if x == zero else x
        if a == zero:
            return f"\tmov.{ty} \t{d}, {zero};"
        cmp = "lt" if op == "min" else "gt"
        return (f"\t{{\n\t.reg .pred %pz;\n\tsetp.{cmp}.{ty} \t%pz, {a}, {zero};\n"
                f"\tselp.{ty} \t{d}, {a}, {zero}, %pz;\n\t}}")

    return _ZERO_MIN_MAX.sub(spelled, ptx)


_HALF_MIN_MAX = re.compile(r"\t(min|max)\.(f16|bf16) \t(%rs\d+), (%rs\d+), (%rs\d+);")
_HALF_ZERO = re.compile(r"\tmov\.b16 \t(%rs\d+), (0x0000|0x8000);")
_HALF_PLUS_ZERO, _HALF_MINUS_ZERO = "0x0000", "0x8000"


def spell_half_min_max_with_zero(ptx: str) -> str:
    """``spell_float_min_max_with_zero`` for float16 and bfloat16, whose constants the PTX
    holds in registers: ``min.f16 d, a, z`` with ``z`` set once to +0.0 (``mov.b16 z,
    0x0000``) becomes ``setp.lt.f16`` and ``selp.b16`` (``max`` with -0.0 likewise; fuzzer
    seed 40884802958, ``min(kj.float16(0.0), -0.0)`` gave -0.0). A register written anywhere
    else in the module is left alone."""
    if "\tmin.f16" not in ptx and "\tmax.f16" not in ptx and ".bf16 \t" not in ptx:
        return ptx
    zeros = {r: z for r, z in _HALF_ZERO.findall(ptx)}
    if not zeros:
        return ptx
    written = {}
    for r in re.findall(r"[a-z][\w.]* \t(%rs\d+),", ptx):  # destinations, predicated too
        written[r] = written.get(r, 0) + 1
    for r in re.findall(r"\{([^}]*)\}, ", ptx):  # unpacking moves: mov.b32 {%rs1, %rs2}, %r1
        for reg in re.findall(r"%rs\d+", r):
            written[reg] = written.get(reg, 0) + 2
    zeros = {r: z for r, z in zeros.items() if written.get(r) == 1}

    def spelled(m: re.Match) -> str:
        op, ty, d, x, y = m.groups()
        zero = _HALF_PLUS_ZERO if op == "min" else _HALF_MINUS_ZERO
        z = x if zeros.get(x) == zero else y if zeros.get(y) == zero else None
        if z is None:
            return m.group(0)
        a = y if z == x else x
        cmp = "lt" if op == "min" else "gt"
        return (f"\t{{\n\t.reg .pred %pz;\n\tsetp.{cmp}.{ty} \t%pz, {a}, {z};\n"
                f"\tselp.b16 \t{d}, {a}, {z}, %pz;\n\t}}")

    return _HALF_MIN_MAX.sub(spelled, ptx)
