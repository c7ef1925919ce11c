"""The type system shared by every stage: scalars, arrays, tuples, tensor maps, signatures.

Types are immutable and hashable; ``str(t)`` is the numba-style spelling that signature
strings use (``float32[:, ::1]``). This module imports no other part of kaiojit.
"""

from __future__ import annotations

import re
from collections import namedtuple
from dataclasses import dataclass


class Type:
    """Base of every kaiojit type."""

    __slots__ = ()

    @property
    def is_scalar(self) -> bool:
        return False

    @property
    def is_array(self) -> bool:
        return False


class ScalarType(namedtuple("_Scalar", "name kind bits"), Type):
    """A machine scalar: kind 'b' (bool), 'i' (signed), 'u' (unsigned), 'f' (float) or 'c'
    (complex: two floats, real then imaginary, of ``bits // 2`` bits each).

    Scalar and array types are tuples underneath: launches hash argument types on every
    call, and a tuple's hash and equality run in C.
    """

    __slots__ = ()

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"kj.{self.name}"

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
    def np_dtype(self):  # -> numpy.dtype
        import numpy as np  # not needed to compile: imported when NumPy objects are involved

        if self.name == "bfloat16":
            return bfloat16_dtype()
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
            return signature_of(self, args)
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


bool_ = ScalarType("bool", "b", 8)
int8 = ScalarType("int8", "i", 8)
int16 = ScalarType("int16", "i", 16)
int32 = ScalarType("int32", "i", 32)
int64 = ScalarType("int64", "i", 64)
uint8 = ScalarType("uint8", "u", 8)
uint16 = ScalarType("uint16", "u", 16)
uint32 = ScalarType("uint32", "u", 32)
uint64 = ScalarType("uint64", "u", 64)
float16 = ScalarType("float16", "f", 16)
float32 = ScalarType("float32", "f", 32)
float64 = ScalarType("float64", "f", 64)
bfloat16 = ScalarType("bfloat16", "f", 16)  # 8 exponent bits, as float32's; 7 mantissa bits
complex64 = ScalarType("complex64", "c", 64)
complex128 = ScalarType("complex128", "c", 128)
_COMPLEX_PART = {64: float32, 128: float64}

SCALARS: dict[str, ScalarType] = {
    t.name: t
    for t in (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float16, float32, float64, bfloat16, complex64, complex128)
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


def bfloat16_dtype():
    """NumPy's dtype for bfloat16 data: ``ml_dtypes.bfloat16`` when ml_dtypes is installed,
    else ``uint16`` (the same 16 bits, which kaiojit then cannot tell from integers)."""
    import numpy as np

    try:
        import ml_dtypes
    except ImportError:
        return np.dtype(np.uint16)
    return np.dtype(ml_dtypes.bfloat16)


def from_dtype(dtype) -> ScalarType:
    """The scalar type of a NumPy dtype (or anything ``np.dtype`` accepts)."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.fields is not None:
        return record_from_dtype(dt)
    try:
        return SCALARS[dt.name]
    except KeyError:
        raise TypeError(f"kaiojit has no scalar type for dtype {dt}") from None


@dataclass(frozen=True, slots=True)
class RecordType(Type):
    """A NumPy structured dtype of numeric fields (no nesting), laid out as NumPy lays it out:
    ``fields`` are ``(name, scalar type, byte offset)`` in offset order. As an array's dtype it
    is the element type; as a value, ``a[i]`` refers to the element in memory (numba's record
    references: assigning ``r.x`` writes the array)."""

    fields: tuple[tuple[str, ScalarType, int], ...]
    itemsize: int
    aligned: bool

    def __str__(self) -> str:
        inner = ", ".join(f"{n}: {t}@{o}" for n, t, o in self.fields)
        return f"Record({inner}; {self.itemsize}{', aligned' if self.aligned else ''})"

    def __repr__(self) -> str:
        return f"kj.{self}"

    @property
    def align(self) -> int:
        """The alignment of an element: its widest field's if aligned, else 1 (packed)."""
        return max((t.align for _, t, _ in self.fields), default=1) if self.aligned else 1

    def field(self, name: str) -> tuple[ScalarType, int] | None:
        for n, t, o in self.fields:
            if n == name:
                return t, o
        return None

    @property
    def np_dtype(self):  # -> numpy.dtype
        import numpy as np

        return np.dtype({"names": [n for n, _, _ in self.fields],
                         "formats": [t.np_dtype for _, t, _ in self.fields],
                         "offsets": [o for _, _, o in self.fields], "itemsize": self.itemsize},
                        align=self.aligned)


def record_from_dtype(dt) -> RecordType:
    """The RecordType of a structured NumPy dtype (numeric fields only, no nesting)."""
    fields = []
    for name, info in dt.fields.items():
        fdt, offset = info[0], info[1]
        if fdt.fields is not None or fdt.subdtype is not None:
            raise TypeError(f"kaiojit has no type for dtype {dt}: field {name!r} is "
                            f"{'a record' if fdt.fields is not None else 'a subarray'} (records "
                            "of numbers only)")
        try:
            ft = SCALARS[fdt.name]
        except KeyError:
            raise TypeError(f"kaiojit has no type for dtype {dt}: field {name!r} is {fdt}") \
                from None
        fields.append((name, ft, int(offset)))
    fields.sort(key=lambda f: f[2])
    return RecordType(tuple(fields), dt.itemsize, bool(dt.isalignedstruct))


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


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """A fixed-length, heterogeneous tuple (kernel-internal; also ``a.shape``)."""

    elements: tuple[Type, ...]

    def __str__(self) -> str:
        inner = ", ".join(str(e) for e in self.elements)
        return f"Tuple({inner})"


@dataclass(frozen=True, slots=True)
class TensorMapType(Type):
    """A 128-byte CUtensorMap passed by value as a ``__grid_constant__`` parameter.

    ``tensormap(float32, 2)`` says which element type and rank the map copies; a bare
    ``tensormap`` (``dtype`` and ``ndim`` None) accepts any map.
    """

    dtype: ScalarType | None = None
    ndim: int | None = None

    def __post_init__(self) -> None:
        if (self.dtype is None) != (self.ndim is None):
            raise TypeError("a tensormap type gives both dtype and ndim, or neither")
        if self.dtype is not None and (not isinstance(self.dtype, ScalarType)
                                       or self.dtype.kind == "c"):
            raise TypeError(f"a tensormap's dtype must be a real scalar type, got {self.dtype!r}")
        if self.ndim is not None and (not isinstance(self.ndim, int) or not 1 <= self.ndim <= 5):
            raise TypeError(f"a tensormap has 1 to 5 dimensions, got {self.ndim!r}")

    def __str__(self) -> str:
        if self.dtype is None:
            return "tensormap"
        return f"tensormap({self.dtype}, {self.ndim})"

    def __repr__(self) -> str:
        return f"kj.{self}"

    def __call__(self, dtype: ScalarType, ndim: int) -> TensorMapType:
        """``kj.tensormap(kj.float32, 2)``: the type of a map of 2-D float32 boxes."""
        return TensorMapType(dtype, ndim)

    def accepts(self, other: Type) -> bool:
        """Whether a map of type ``other`` may be passed where this type is expected."""
        if not isinstance(other, TensorMapType):
            return False
        return self.dtype is None or other.dtype is None or self == other


@dataclass(frozen=True, slots=True)
class VoidType(Type):
    def __str__(self) -> str:
        return "void"

    def __call__(self, *args) -> Signature:
        """``void(float32[:], int32)``: a kernel's signature, spelled numba's way."""
        return signature_of(self, args)


@dataclass(frozen=True, slots=True)
class StringType(Type):
    """A string literal; legal only as an argument of ``print``."""

    def __str__(self) -> str:
        return "str"


@dataclass(frozen=True, slots=True)
class GridGroupType(Type):
    """What ``kj.cg.this_grid()`` gives: the whole grid, whose ``.sync()`` is a grid barrier."""

    def __str__(self) -> str:
        return "grid_group"


void = VoidType()
grid_group = GridGroupType()
tensormap = TensorMapType()
string = StringType()


# --- kernel parameters --------------------------------------------------------------------------
# A user argument becomes one or more kernel parameters. The runtime writes one 8-byte slot for
# each, except a tensor map, which takes 16 slots (128 bytes, 64-byte aligned) as one parameter.

PARAM_PTR = "ptr"
PARAM_TENSORMAP = "tensormap"


def param_parts(t: Type) -> tuple[str, ...]:
    """The kernel parameters one argument of type ``t`` becomes, in order.

    Scalars: their own name (a complex one: its two float parts, real first). Arrays: ``ptr``, then one ``int64`` per dimension for the shape,
    then (layout 'A' only) one ``int64`` per dimension for the strides in bytes.
    """
    if isinstance(t, ScalarType):
        return (t.component.name,) * 2 if t.kind == "c" else (t.name,)
    if isinstance(t, ArrayType):
        n = t.ndim * (2 if t.passes_strides else 1)
        return (PARAM_PTR,) + ("int64",) * n
    if isinstance(t, TensorMapType):
        return (PARAM_TENSORMAP,)
    raise TypeError(f"type {t} cannot be a kernel parameter")


class ConstexprType(Type):
    """The type of a compile-time constant parameter: one value, folded into the kernel.

    ``BLOCK: kj.constexpr`` (the class) marks a parameter; ``kj.constexpr(32)`` (an
    instance) is its type in a signature, spelled ``constexpr(32)``. Two values are the same
    type only if they are of the same Python type and print the same (``1``, ``True`` and
    ``1.0`` are three specializations)."""

    __slots__ = ("value",)

    def __init__(self, value):
        if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a NumPy scalar
            value = value.item()
        if not isinstance(value, (bool, int, float, ScalarType)):
            raise TypeError("a kj.constexpr value is a Python bool, int or float, or a kaiojit "
                            f"scalar type, got {type(value).__name__}")
        object.__setattr__(self, "value", value)

    def __setattr__(self, name, value):
        raise AttributeError("ConstexprType is immutable")

    def _key(self) -> tuple:
        return type(self.value).__name__, repr(self.value)

    def __eq__(self, other) -> bool:
        return isinstance(other, ConstexprType) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(("constexpr", *self._key()))

    def __str__(self) -> str:
        return f"constexpr({self.value})"

    def __repr__(self) -> str:
        return f"kj.{self}"


constexpr = ConstexprType  # ``BLOCK: kj.constexpr`` marks a parameter, kj.constexpr(32) types it


class BoundObjectType(ConstexprType):
    """A Python object passed to a device function where no kernel value can be: a dtype, a
    function (device function or intrinsic), a tuple of them. Folded into the callee as a
    constexpr is (its parameter names the object, as a global would); two are the same type
    only if they are the same object (numba's ``Function`` and ``NumberClass`` arguments)."""

    __slots__ = ()

    def __init__(self, value):
        object.__setattr__(self, "value", value)

    def _key(self) -> tuple:
        v = self.value
        if isinstance(v, tuple) and all(type(x) in (bool, int, float) for x in v):
            return "tuple", repr(v)  # a literal shape: the same for equal values
        return "object", id(v)

    def __str__(self) -> str:
        return f"bound({getattr(self.value, '__qualname__', self.value)!s})"


def runtime_signature(sig: Signature) -> Signature:
    """``sig`` without its constexpr parameters: what a launch passes to the kernel."""
    if not any(isinstance(a, ConstexprType) for a in sig.args):
        return sig
    return Signature(tuple(a for a in sig.args if not isinstance(a, ConstexprType)),
                     sig.return_type)


# --- signatures ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Signature:
    args: tuple[Type, ...]
    return_type: Type = void

    def __str__(self) -> str:
        return f"{self.return_type}({', '.join(str(a) for a in self.args)})"


_ARRAY_RE = re.compile(r"^(\w+)\s*\[(.*)\]$")
_TENSORMAP_RE = re.compile(r"^tensormap\s*\(\s*(\w+)\s*,\s*(\d+)\s*\)$")
_CONSTEXPR_RE = re.compile(r"^constexpr\s*\((.*)\)$")


def parse_type(text: str) -> Type:
    """Parse one numba-style type spelling: ``float32``, ``f4``, ``int32[:, ::1]``, ``tensormap``,
    ``tensormap(float32, 2)``."""
    s = text.strip()
    if s in SCALARS:
        return SCALARS[s]
    if s in ALIASES:
        return ALIASES[s]
    if s == "void" or s == "none":
        return void
    if s == "tensormap":
        return tensormap
    m = _CONSTEXPR_RE.match(s)
    if m:
        return ConstexprType(_constexpr_literal(m.group(1), text))
    m = _TENSORMAP_RE.match(s)
    if m:
        dtype = parse_type(m.group(1))
        if not isinstance(dtype, ScalarType):
            raise ValueError(f"a tensormap's dtype must be a scalar type in {text!r}")
        try:
            return TensorMapType(dtype, int(m.group(2)))
        except TypeError as e:
            raise ValueError(f"{e} in {text!r}") from None
    m = _ARRAY_RE.match(s)
    if m:
        base = parse_type(m.group(1))
        if not isinstance(base, ScalarType):
            raise ValueError(f"array of non-scalar type in {text!r}")
        steps = []
        align = 0
        for dim in m.group(2).split(","):
            d = dim.replace(" ", "")
            if align:
                raise ValueError(f"'align={ALIGN_BYTES}' comes last in {text!r}")
            if d == ":":
                steps.append(None)
            elif d == "::1":
                steps.append(1)
            elif d == f"align={ALIGN_BYTES}" and steps and not align:
                align = ALIGN_BYTES
            else:
                raise ValueError(f"bad array dimension {dim.strip()!r} in {text!r}: use ':' or "
                                 f"'::1' (and a last 'align={ALIGN_BYTES}')")
        try:
            return ArrayType(base, len(steps), _layout_from_steps(steps), align)
        except TypeError as e:
            raise ValueError(f"{e} in {text!r}") from None
    raise ValueError(f"unknown type {s!r}")


def _constexpr_literal(literal: str, text: str):
    """The value of ``constexpr(<literal>)``: a bool, int, float or scalar type name."""
    lit = literal.strip()
    if lit in ("True", "False"):
        return lit == "True"
    if lit in SCALARS or lit in ALIASES:
        return SCALARS.get(lit) or ALIASES[lit]
    for convert in (int, float):
        try:
            return convert(lit)
        except ValueError:
            pass
    raise ValueError(f"bad constexpr value {lit!r} in {text!r}: a bool, int, float or scalar "
                     "type")


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def parse_signature(text: str) -> Signature:
    """Parse ``"void(float32[:], int32)"`` (or an argument list alone, ``"(float32[:], int32)"``)."""
    s = text.strip()
    open_at = s.find("(")
    if open_at < 0 or not s.endswith(")"):
        raise ValueError(f"signature {text!r} is not of the form 'void(type, ...)'")
    ret_text = s[:open_at].strip() or "void"
    ret = parse_type(ret_text)
    args = tuple(parse_type(p) for p in _split_top_level(s[open_at + 1 : -1]))
    return Signature(args, ret)


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
    if a == bfloat16 or b == bfloat16:
        return _bfloat16_result(a, b)
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


def _bfloat16_result(a: ScalarType, b: ScalarType) -> ScalarType:
    """ml_dtypes' promotion: bfloat16 holds 8-bit integers exactly; float16 or 16-bit integers
    meet it in float32, 32- and 64-bit integers in float64."""
    other = b if a == bfloat16 else a
    if other.is_float:
        return other if other.bits > 16 else float32
    return {8: bfloat16, 16: float32}.get(other.bits, float64)


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


def signature_of(return_type: Type, args: tuple) -> Signature:
    """``return_type(*args)`` as numba spells a signature: every argument a type."""
    for a in args:
        if not isinstance(a, Type):
            raise TypeError(f"{return_type}(...) as a signature takes types, got {a!r}")
    return Signature(tuple(args), return_type)


# --- numba's names for these types (kaiojit.cuda.types) -----------------------------------------

b1 = bool_
i1, i2, i4, i8 = int8, int16, int32, int64
u1, u2, u4, u8 = uint8, uint16, uint32, uint64
f2, f4, f8 = float16, float32, float64
c8, c16 = complex64, complex128
intp, uintp = int64, uint64
bf16 = bfloat16

none = void
boolean = bool_
byte = uint8
char = int8
short, ushort = int16, uint16
intc, uintc = int32, uint32
long_, ulong = int64, uint64
longlong, ulonglong = int64, uint64
float_ = float32
double = float64
int_ = int64
uint = uint64
Record = RecordType
NoneType = VoidType


@dataclass(frozen=True, slots=True)
class CPointer(Type):
    """numba's ``types.CPointer(dtype)``: a pointer to ``dtype`` values (foreign functions'
    parameters)."""

    dtype: Type

    def __str__(self) -> str:
        return f"CPointer({self.dtype})"


class _Family(type):
    """numba's type classes: ``isinstance(t, types.Integer)`` asks about a kaiojit type."""

    def __instancecheck__(cls, obj) -> bool:
        return cls._test(obj)


def _scalar_kinds(kinds: str):
    return staticmethod(lambda t: isinstance(t, ScalarType) and t.kind in kinds)


class Number(metaclass=_Family):
    _test = _scalar_kinds("iufc")


class Boolean(metaclass=_Family):
    _test = _scalar_kinds("b")


class Integer(metaclass=_Family):
    _test = _scalar_kinds("iu")


class Float(metaclass=_Family):
    _test = _scalar_kinds("f")


class Complex(metaclass=_Family):
    _test = _scalar_kinds("c")


class Array(metaclass=_Family):
    """numba's ``types.Array(dtype, ndim, layout)``: an array type (an :class:`ArrayType`)."""

    _test = staticmethod(lambda t: isinstance(t, ArrayType))

    def __new__(cls, dtype, ndim: int, layout: str = "A") -> ArrayType:
        if isinstance(dtype, str):
            dtype = parse_type(dtype)
        if layout not in ("C", "F", "A"):
            raise ValueError(f"an array's layout is 'C', 'F' or 'A', got {layout!r}")
        return ArrayType(dtype, int(ndim), layout)


class UniTuple(metaclass=_Family):
    """numba's ``types.UniTuple(dtype, count)``: ``count`` values of one type."""

    _test = staticmethod(lambda t: isinstance(t, TupleType) and len(set(t.elements)) <= 1)

    def __new__(cls, dtype: Type, count: int) -> TupleType:
        return TupleType((dtype,) * int(count))


class Tuple(metaclass=_Family):
    """numba's ``types.Tuple((t1, t2, ...))``."""

    _test = staticmethod(lambda t: isinstance(t, TupleType))

    def __new__(cls, elements) -> TupleType:
        return TupleType(tuple(elements))


# numba's sets of types (``ty in types.signed_domain``), with numba's members
signed_domain = frozenset([int8, int16, int32, int64])
unsigned_domain = frozenset([uint8, uint16, uint32, uint64])
integer_domain = signed_domain | unsigned_domain
real_domain = frozenset([float32, float64])
complex_domain = frozenset([complex64, complex128])
number_domain = real_domain | integer_domain | complex_domain

NUMBA_NAMES = [  # kaiojit.cuda.types exports these too
    "Array", "Boolean", "CPointer", "Complex", "Float", "Integer", "NoneType", "Number", "Record",
    "Tuple", "UniTuple", "b1", "bf16", "boolean", "byte", "c8", "c16", "char", "double", "f2",
    "f4", "f8", "float_", "i1", "i2", "i4", "i8", "int_", "intc", "intp", "long_", "longlong",
    "none", "short", "u1", "u2", "u4", "u8", "uint", "uintc", "uintp", "ulong", "ulonglong",
    "ushort", "signed_domain", "unsigned_domain", "integer_domain", "real_domain",
    "complex_domain", "number_domain",
]
