"""The type system shared by every stage: scalars, arrays, tuples, tensor maps, signatures.

Types are immutable and hashable; ``str(t)`` is the numba-style spelling that signature
strings use (``float32[:, ::1]``). The scalar types, the facts each carries and their
promotion, and the array type, live in :mod:`kaiojit.scalars` and are re-exported here. This
module imports only that ground module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kaiojit import scalars as _scalars
from kaiojit.scalars import (  # noqa: F401 - re-exported: kaiojit.types is their public home
    ALIASES, ALIGN_BYTES, DL_BFLOAT, DL_BOOL, DL_COMPLEX, DL_FLOAT, DL_FLOAT8_E4M3FN,
    DL_FLOAT8_E5M2, DL_INT, DL_UINT, SCALARS, ArrayType, ScalarFacts, ScalarType, Type,
    _layout_from_steps, bfloat16, bfloat16_dtype, bool_, complex64, complex128, float8_e4m3fn,
    float8_e5m2, float16, float32, float64, from_dlpack_code, int8, int16, int32, int64,
    ml_dtypes_dtype, promote, promote_weak, uint8, uint16, uint32, uint64)


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
class SubarrayType(Type):
    """A record field that is a fixed-shape array of numbers (NumPy's ``('f4', (3, 2))``):
    ``r.h`` is a C-contiguous view of it, in the record's memory."""

    dtype: ScalarType
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"

    @property
    def align(self) -> int:
        return self.dtype.align

    @property
    def itemsize(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize

    @property
    def np_dtype(self):  # -> numpy.dtype
        import numpy as np

        return np.dtype((self.dtype.np_dtype, self.shape))


@dataclass(frozen=True, slots=True)
class RecordType(Type):
    """A NumPy structured dtype of numeric fields (no nesting), laid out as NumPy lays it out:
    ``fields`` are ``(name, scalar type, byte offset)`` in offset order. As an array's dtype it
    is the element type; as a value, ``a[i]`` refers to the element in memory (numba's record
    references: assigning ``r.x`` writes the array)."""

    fields: tuple[tuple[str, ScalarType | SubarrayType, int], ...]
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

    def field(self, name: str) -> tuple[ScalarType | SubarrayType, int] | None:
        for n, t, o in self.fields:
            if n == name:
                return t, o
        return None

    def __getitem__(self, spec) -> ArrayType:
        """``rec[:]``: the type of an array of these records, as numba spells it."""
        return ScalarType.__getitem__(self, spec)

    @property
    def name(self) -> str:
        return str(self)

    @property
    def np_dtype(self):  # -> numpy.dtype
        import numpy as np

        return np.dtype({"names": [n for n, _, _ in self.fields],
                         "formats": [t.np_dtype for _, t, _ in self.fields],
                         "offsets": [o for _, _, o in self.fields], "itemsize": self.itemsize},
                        align=self.aligned)


def record_from_dtype(dt) -> RecordType:
    """The RecordType of a structured NumPy dtype: fields of numbers and fixed-shape arrays
    of numbers (no nested records)."""
    fields = []
    for name, info in dt.fields.items():
        fdt, offset = info[0], info[1]
        shape = None
        if fdt.subdtype is not None:
            fdt, shape = fdt.subdtype
        if fdt.fields is not None or fdt.subdtype is not None:
            raise TypeError(f"kaiojit has no type for dtype {dt}: field {name!r} is a record "
                            "(records of numbers and arrays of numbers only)")
        try:
            ft = SCALARS[fdt.name]
        except KeyError:
            raise TypeError(f"kaiojit has no type for dtype {dt}: field {name!r} is {fdt}") \
                from None
        fields.append((name, ft if shape is None else SubarrayType(ft, tuple(shape)),
                       int(offset)))
    fields.sort(key=lambda f: f[2])
    return RecordType(tuple(fields), dt.itemsize, bool(dt.isalignedstruct))


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """A fixed-length, heterogeneous tuple (kernel-internal; also ``a.shape``)."""

    elements: tuple[Type, ...]

    def __str__(self) -> str:
        inner = ", ".join(str(e) for e in self.elements)
        return f"Tuple({inner})"


@dataclass(frozen=True, slots=True)
class NamedTupleType(TupleType):
    """A named tuple (``collections.namedtuple``) passed to a kernel: a tuple whose items are
    also read by name (``p.x``), as numba's NamedTuple. ``name`` is its class's name."""

    fields: tuple[str, ...] = ()
    name: str = "namedtuple"

    def __str__(self) -> str:
        inner = ", ".join(f"{f}: {e}" for f, e in zip(self.fields, self.elements))
        return f"{self.name}({inner})"


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
    then (layout 'A' only) one ``int64`` per dimension for the strides in bytes. Tuples:
    their items' parameters, in order (numba passes a tuple argument flat too).
    """
    if isinstance(t, TupleType):
        return tuple(part for e in t.elements for part in param_parts(e))
    if isinstance(t, ScalarType):
        return (t.component.name,) * 2 if t.kind == "c" else (t.name,)
    if isinstance(t, ArrayType):
        n = t.ndim * (2 if t.passes_strides else 1)
        return (PARAM_PTR,) + ("int64",) * n
    if isinstance(t, TensorMapType):
        return (PARAM_TENSORMAP,)
    if isinstance(t, (RecordType, CPointer)):  # a record scalar: the address of a copy
        return (PARAM_PTR,)
    raise TypeError(f"type {t} cannot be a kernel parameter")


def param_leaves(t: Type) -> tuple[tuple[str, Type], ...]:
    """The non-tuple values a parameter of type ``t`` is passed as, with the suffix of each
    one's path (``""`` for ``t`` itself, ``".1.0"`` for item 0 of item 1 of a tuple)."""
    if not isinstance(t, TupleType):
        return (("", t),)
    return tuple((f".{i}{suffix}", leaf) for i, e in enumerate(t.elements)
                 for suffix, leaf in param_leaves(e))


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
    if s.startswith("Record("):
        return _parse_record(s, text)
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
        return _parse_array(parse_type(m.group(1)), m.group(2), text)
    raise ValueError(f"unknown type {s!r}")


_RECORD_FIELD_RE = re.compile(r"^(\w+)\s*:\s*(\w+)\s*@\s*(\d+)$")


def _parse_record(s: str, text: str) -> Type:
    """``Record(x: float32@0, n: int16@4; 8, aligned)`` as :class:`RecordType` prints it,
    optionally followed by an array's dimensions (``...)[::1]``): the spelling a record
    array's signature has (in a manifest, a disk-cache entry or a user's ``--sig``)."""
    close = s.find(")")
    inner, rest = s[len("Record("):close], s[close + 1:].strip()
    fields_text, _, tail = inner.partition(";")
    size_text, _, flag = tail.partition(",")
    fields = []
    for part in filter(str.strip, fields_text.split(",")):
        m = _RECORD_FIELD_RE.match(part.strip())
        if m is None or m.group(2) not in SCALARS:
            raise ValueError(f"bad record field {part.strip()!r} in {text!r}: write "
                             "'name: scalar@offset'")
        fields.append((m.group(1), SCALARS[m.group(2)], int(m.group(3))))
    if close < 0 or not size_text.strip().isdigit() or flag.strip() not in ("", "aligned"):
        raise ValueError(f"bad record type {text!r}: write 'Record(name: scalar@offset, ...; "
                         "itemsize[, aligned])'")
    record = RecordType(tuple(fields), int(size_text), flag.strip() == "aligned")
    if not rest:
        return record
    if not (rest.startswith("[") and rest.endswith("]")):
        raise ValueError(f"bad record array {text!r}: dimensions go in [...] after the record")
    return _parse_array(record, rest[1:-1], text)


def _parse_array(base: Type, dims: str, text: str) -> ArrayType:
    """An array of ``base`` with ``dims`` (``:, ::1`` and an optional last ``align=N``)."""
    if not isinstance(base, (ScalarType, RecordType)):
        raise ValueError(f"array of non-scalar type in {text!r}")
    steps = []
    align = 0
    for dim in dims.split(","):
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

def signature_of(return_type: Type, args: tuple) -> Signature:
    """``return_type(*args)`` as numba spells a signature: every argument a type."""
    for a in args:
        if not isinstance(a, Type):
            raise TypeError(f"{return_type}(...) as a signature takes types, got {a!r}")
    return Signature(tuple(args), return_type)


_scalars.SIGNATURE_OF = signature_of  # ``kj.int32(kj.float32[:])`` (scalars cannot import us)


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
