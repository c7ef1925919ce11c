"""Scalar types and the facts each carries, the array type of them; NumPy 2's promotion.

A scalar type carries every fact the rest of kaiojit needs about it (:class:`ScalarFacts`):
its kernel-parameter slot format, DLPack code, LLVM type, NumPy / ml_dtypes dtype, and for
the floats computed in float32 (bfloat16, fp8) their conversions. Adding a dtype is one line
here (plus, for a new kind of float, its conversions in :mod:`kaiojit.floatbits` and
:mod:`kaiojit.lower.narrowfloat`). :mod:`kaiojit.types` re-exports everything public.
This module imports only :mod:`kaiojit.floatbits`.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass

from kaiojit.floatbits import E4M3FN, E5M2, MiniFloat, bf16_bits_to_float, float_to_bf16_bits


class Type:
    """Base of every kaiojit type."""

    __slots__ = ()

    def __init__(self, *args, name: str | None = None, **kwargs):
        """numba's ``types.Type(name=...)``: a type class of the user's own (a subclass that
        numba's extension API registers) names itself. kaiojit's types are made by their own
        ``__new__`` (tuples) or ``__init__`` (dataclasses): the arguments are theirs."""
        if name is not None:
            object.__setattr__(self, "name", name)

    @property
    def is_scalar(self) -> bool:
        return False

    @property
    def is_array(self) -> bool:
        return False


@dataclass(frozen=True, eq=False, slots=True)
class ScalarFacts:
    """What a scalar type is to each part of kaiojit, stated once.

    ``slot_format``: the ``struct`` format of the 8-byte kernel-parameter slot a value of the
    type fills (``kaiojit.abi``), the value in its low bytes: integers as a whole slot (a
    value wraps to the parameter's width as C's conversion does), ``"f4x"`` for float32;
    None for complex types, which fill two slots of their component. ``encode``: where
    ``struct`` has no format for the type (bfloat16, fp8), the function from a value to the
    bits the format packs; ``decode`` its inverse. ``dlpack_code``: DLPack's
    ``DLDataTypeCode`` (with ``bits`` and one lane, the ``DLDataType``). ``llvm``: the LLVM
    type of a value in registers. ``ml_dtypes``: NumPy's dtype of that name comes from
    ml_dtypes (else from NumPy). ``computes_in``: arithmetic widens to this type and rounds
    back (bfloat16, fp8). ``float_format``: an fp8 format's layout, for its conversions."""

    slot_format: str | None
    dlpack_code: int
    llvm: str
    encode: Callable[[float], int] | None = None
    decode: Callable[[int], float] | None = None
    ml_dtypes: bool = False
    computes_in: str | None = None
    float_format: MiniFloat | None = None


# ``kaiojit.types.signature_of`` (set there: Signature lives in kaiojit.types, which imports
# this module), what a scalar type called with types returns
SIGNATURE_OF: Callable | None = None


class ScalarType(namedtuple("_Scalar", "name kind bits facts"), Type):
    """A machine scalar: kind 'b' (bool), 'i' (signed), 'u' (unsigned), 'f' (float) or 'c'
    (complex: two floats, real then imaginary, of ``bits // 2`` bits each), and its
    :class:`ScalarFacts`.

    Scalar and array types are tuples underneath: launches hash argument types on every
    call, and a tuple's hash and equality run in C (the facts hash by identity).
    """

    __slots__ = ()

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"kj.{self.name}"

    def __reduce__(self):
        """Unpickled as the one type of its name (its facts compare by identity)."""
        return _scalar_named, (self.name,)

    @property
    def is_scalar(self) -> bool:
        return True

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind in "if"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def component(self) -> ScalarType:
        """The float type of a complex type's parts (the type itself for other scalars)."""
        return _COMPLEX_PART[self.bits] if self.kind == "c" else self

    @property
    def align(self) -> int:
        """The alignment NumPy gives the type (a complex one aligns as its parts)."""
        return self.itemsize // 2 if self.kind == "c" else self.itemsize

    @property
    def itemsize(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def slot_format(self) -> str | None:
        return self.facts.slot_format

    @property
    def dlpack_code(self) -> int:
        return self.facts.dlpack_code

    @property
    def computes_in(self) -> ScalarType | None:
        """The type arithmetic on this one runs in (float32 for bfloat16 and fp8), or None."""
        name = self.facts.computes_in
        return SCALARS[name] if name is not None else None

    @property
    def float_format(self) -> MiniFloat | None:
        return self.facts.float_format

    def round(self, value) -> float:
        """``value`` rounded as a conversion to this narrow float type rounds it."""
        return self.facts.decode(self.facts.encode(value))

    @property
    def np_dtype(self):  # -> numpy.dtype
        import numpy as np  # not needed to compile: imported when NumPy objects are involved

        if self.facts.ml_dtypes:
            return ml_dtypes_dtype(self.name, f"uint{self.bits}")
        return np.dtype(self.name)

    def __getitem__(self, spec) -> ArrayType:
        """``float32[:]``, ``float32[::1]``, ``float32[:, ::1]``: array types, as numba spells them."""
        if not isinstance(spec, tuple):
            spec = (spec,)
        if not spec or not all(isinstance(s, slice) for s in spec):
            raise TypeError(f"array type needs slices, as in {self.name}[:] or {self.name}[:, ::1]")
        steps = [s.step for s in spec]
        if any(s.start is not None or s.stop is not None for s in spec) or any(
            st not in (None, 1) for st in steps
        ):
            raise TypeError(f"array type slices are ':' or '::1', got {spec!r}")
        return ArrayType(self, len(spec), _layout_from_steps(steps))

    def __call__(self, *args):
        """Outside a kernel, ``kj.float32(x)`` behaves as NumPy's constructor; called with
        types, ``kj.int32(kj.float32[:])`` is a signature returning this type (numba's)."""
        if len(args) != 1 or isinstance(args[0], Type):
            return SIGNATURE_OF(self, args)
        return self.np_dtype.type(args[0])

    @property
    def bitwidth(self) -> int:
        """numba's name for the width in bits."""
        return self.bits

    @property
    def underlying_float(self) -> ScalarType:
        """numba's name for a complex type's part type."""
        return self.component


def _layout_from_steps(steps: list) -> str:
    if steps[-1] == 1 and all(st is None for st in steps[:-1]):
        return "C"
    if steps[0] == 1 and all(st is None for st in steps[1:]):
        return "F"
    if all(st is None for st in steps):
        return "A"
    raise TypeError("at most one '::1', on the first (F) or last (C) dimension")


# DLPack's DLDataTypeCode values
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_COMPLEX, DL_BOOL = 0, 1, 2, 4, 5, 6
DL_FLOAT8_E4M3FN, DL_FLOAT8_E5M2 = 10, 12


def _int(name: str, kind: str, bits: int) -> ScalarType:
    # a whole slot: a value of the parameter's range, or one that wraps into it, packs as
    # int64 (uint64 as unsigned), its low bytes the parameter's
    fmt = "Q" if (kind, bits) == ("u", 64) else "q"
    return ScalarType(name, kind, bits, ScalarFacts(fmt, DL_INT if kind == "i" else DL_UINT,
                                                    f"i{bits}"))


def _narrow(name: str, fmt: MiniFloat, code: int) -> ScalarType:
    """An fp8 type: an i8 in registers, computed in float32, converted as ``fmt`` says."""
    return ScalarType(name, "f", 8, ScalarFacts("B7x", code, "i8", fmt.encode, fmt.decode,
                                                ml_dtypes=True, computes_in="float32",
                                                float_format=fmt))


bool_ = ScalarType("bool", "b", 8, ScalarFacts("?7x", DL_BOOL, "i1"))
int8 = _int("int8", "i", 8)
int16 = _int("int16", "i", 16)
int32 = _int("int32", "i", 32)
int64 = _int("int64", "i", 64)
uint8 = _int("uint8", "u", 8)
uint16 = _int("uint16", "u", 16)
uint32 = _int("uint32", "u", 32)
uint64 = _int("uint64", "u", 64)
float16 = ScalarType("float16", "f", 16, ScalarFacts("e6x", DL_FLOAT, "half"))
float32 = ScalarType("float32", "f", 32, ScalarFacts("f4x", DL_FLOAT, "float"))
float64 = ScalarType("float64", "f", 64, ScalarFacts("d", DL_FLOAT, "double"))
# 8 exponent bits, as float32's; 7 mantissa bits
bfloat16 = ScalarType("bfloat16", "f", 16, ScalarFacts(
    "H6x", DL_BFLOAT, "bfloat", float_to_bf16_bits, bf16_bits_to_float, ml_dtypes=True,
    computes_in="float32"))
float8_e4m3fn = _narrow("float8_e4m3fn", E4M3FN, DL_FLOAT8_E4M3FN)  # finite only, max 448
float8_e5m2 = _narrow("float8_e5m2", E5M2, DL_FLOAT8_E5M2)  # IEEE-like, max 57344
complex64 = ScalarType("complex64", "c", 64, ScalarFacts(None, DL_COMPLEX, "{float, float}"))
complex128 = ScalarType("complex128", "c", 128,
                        ScalarFacts(None, DL_COMPLEX, "{double, double}"))
_COMPLEX_PART = {64: float32, 128: float64}

SCALARS: dict[str, ScalarType] = {
    t.name: t
    for t in (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float16, float32, float64, bfloat16, float8_e4m3fn, float8_e5m2, complex64,
              complex128)
}
ALIASES: dict[str, ScalarType] = {
    "b1": bool_, "boolean": bool_, "bool_": bool_,
    "i1": int8, "i2": int16, "i4": int32, "i8": int64,
    "u1": uint8, "u2": uint16, "u4": uint32, "u8": uint64,
    "f2": float16, "f4": float32, "f8": float64,
    "i32": int32, "i64": int64, "i16": int16, "u32": uint32, "u64": uint64, "u16": uint16,
    "f16": float16, "f32": float32, "f64": float64, "intp": int64, "uintp": uint64,
    "half": float16, "float": float32, "double": float64, "bf16": bfloat16,
    "c8": complex64, "c16": complex128, "c64": complex64, "c128": complex128,
}


def ml_dtypes_dtype(name: str, fallback: str):
    """NumPy's dtype ``ml_dtypes.<name>`` when ml_dtypes is installed, else ``fallback`` (an
    unsigned integer of the same bits, which kaiojit then cannot tell from integers)."""
    import numpy as np

    try:
        import ml_dtypes
    except ImportError:
        return np.dtype(fallback)
    return np.dtype(getattr(ml_dtypes, name))


def bfloat16_dtype():
    """NumPy's dtype for bfloat16 data (``ml_dtypes.bfloat16``, or ``uint16`` without it)."""
    return bfloat16.np_dtype


_DLPACK_TYPES: dict[tuple[int, int], ScalarType] = {}


def from_dlpack_code(code: int, bits: int) -> ScalarType | None:
    """The scalar type of a DLPack ``DLDataType`` of one lane, or None."""
    if not _DLPACK_TYPES:
        _DLPACK_TYPES.update({(t.dlpack_code, t.bits): t for t in SCALARS.values()})
    return _DLPACK_TYPES.get((code, bits))



ALIGN_BYTES = 16  # the alignment arrays are specialized on: one 128-bit access


class ArrayType(namedtuple("_Array", "dtype ndim layout align"), Type):
    """An N-d array view. Layout 'C' or 'F' means contiguous (strides follow from the shape);
    'A' means any strides, passed at launch (in bytes, as NumPy keeps them).

    ``align`` is 16 when the data pointer and every row stride (the strides of all but the
    contiguous dimension: the innermost for 'C' and 'A', the outermost for 'F') are multiples
    of 16 bytes, else 0 (nothing known). Kernels are specialized on it: an aligned array
    lets LLVM use 128-bit loads and stores. Spelled ``float32[:, ::1, align=16]``."""

    __slots__ = ()

    def __new__(cls, dtype: ScalarType, ndim: int, layout: str = "A", align: int = 0):
        if align not in (0, ALIGN_BYTES):
            raise TypeError(f"an array's alignment is 0 or {ALIGN_BYTES} bytes, got {align!r}")
        return super().__new__(cls, dtype, ndim, layout, align)

    def __str__(self) -> str:
        if self.ndim == 0:  # numba's spelling of a 0-d array (a[()] is its one element)
            align = f", align={self.align}" if self.align else ""
            return f"array({self.dtype}, 0d, {self.layout}{align})"
        dims = [":"] * self.ndim
        if self.layout == "C":
            dims[-1] = "::1"
        elif self.layout == "F":
            dims[0] = "::1"
        if self.align:
            dims.append(f"align={self.align}")
        return f"{self.dtype}[{', '.join(dims)}]"

    def __repr__(self) -> str:
        return f"kj.{self}"

    @property
    def is_array(self) -> bool:
        return True

    @property
    def passes_strides(self) -> bool:
        return self.layout == "A"

    def with_layout(self, layout: str) -> ArrayType:
        """The same array in another layout (alignment not kept: it depends on the layout)."""
        return ArrayType(self.dtype, self.ndim, layout)

    def with_align(self, align: int) -> ArrayType:
        return ArrayType(self.dtype, self.ndim, self.layout, align)


# --- promotion (NumPy 2, NEP 50) ----------------------------------------------------------------


def _np_result(a: ScalarType, b: ScalarType) -> ScalarType:
    """NumPy 2's promotion of two typed scalars, without importing NumPy (the tests check
    every pair against ``np.result_type``)."""
    if a == b or b.kind == "b":
        return a
    if a.kind == "b":
        return b
    floats = {16: float16, 32: float32, 64: float64}
    if a.kind == "c" or b.kind == "c":
        # complex: the complex type whose parts hold the other operand's float promotion
        part = _np_result(a.component, b.component)
        return complex128 if part.bits == 64 else complex64
    if a.facts.computes_in or b.facts.computes_in:
        return _narrow_result(a, b)
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        f, i = (a, b) if a.is_float else (b, a)
        exact = {8: 16, 16: 32, 32: 64, 64: 64}[i.bits]  # the float that holds every value of i
        return floats[max(f.bits, exact)]
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    if unsigned.bits == 64:
        return float64
    return {16: int16, 32: int32, 64: int64}[2 * unsigned.bits]


def _narrow_result(a: ScalarType, b: ScalarType) -> ScalarType:
    """ml_dtypes' promotion of a float computed in float32 (bfloat16, fp8) and another type
    (neither bool nor the same): 8-bit integers keep the narrow float; float16 or 16-bit
    integers meet it in float32, 32- and 64-bit integers in float64; two narrow floats meet
    in the wider one, or in float32 if they are as wide (e4m3fn and e5m2)."""
    narrow, other = (a, b) if a.facts.computes_in else (b, a)
    if other.facts.computes_in:
        return float32 if a.bits == b.bits else (a if a.bits > b.bits else b)
    if other.is_float:
        return other if other.bits > 16 else float32
    return {8: narrow, 16: float32}.get(other.bits, float64)


_PROMOTE_CACHE: dict[tuple[ScalarType, ScalarType], ScalarType] = {}


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """The result type of a binary operation on two strongly typed scalars, as NumPy 2 gives it."""
    key = (a, b)
    r = _PROMOTE_CACHE.get(key)
    if r is None:
        r = _PROMOTE_CACHE[key] = _np_result(a, b)
    return r


def promote_weak(strong: ScalarType, weak_kind: str) -> ScalarType:
    """NEP 50: a Python scalar of kind 'b', 'i' or 'f' meets a typed scalar.

    The typed side wins unless the Python value is of a higher kind: int meets bool gives
    int64, float meets an integer or bool gives float64.
    """
    order = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
    if order[weak_kind] <= order[strong.kind]:
        return strong
    if weak_kind == "c" and strong.is_float:
        return complex128 if strong.bits == 64 else complex64  # float32 + 1j is complex64
    return {"i": int64, "f": float64, "c": complex128}[weak_kind]


def _scalar_named(name: str) -> ScalarType:
    return SCALARS[name]
