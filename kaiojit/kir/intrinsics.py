"""The registry of intrinsics: each operation a kernel reaches through a call or a special name
(``kj.syncthreads()``, ``math.sqrt``, ``kj.threadIdx.x``, ``kj.atomic.add``), declared once.

A declaration (:class:`Intrinsic`) holds everything every stage needs to know: its KIR name
and operand types (the verifier checks them), the Python objects users call or name (the
frontend finds it by identity, with its typing rule), its properties (the analyses and the
lowering read them, never its name), its lowering per target, the targets that lack it, the
lowest GPU arch that has it and the host symbols its host lowering calls.

The declarations live in ``kaiojit/intrinsics/`` (one file per family); that package is loaded
on the first lookup, so ``import kaiojit`` stays cheap and this module imports no stage above
the IR. Adding an intrinsic means adding a declaration there: nothing else is edited.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .. import types as T
from ..language import KernelBuiltin, Namespace
from .nodes import Expr, intrinsic_key

ANY_TARGET = "*"  # a lowering key: the lowering every target uses unless it has its own

Typing = Callable[[Any, Any], Expr]  # (typer, ast.Call) -> the typed expression
# (FunctionLowering, node) -> LLVM value or None. For a barrier or warp intrinsic the host's
# lowering is block-synchronous instead: (BlockLowering, target variable or None, node) -> None.
Lowering = Callable[..., Any]
OperandCheck = Callable[[Expr], "str | None"]  # None if the node's operands fit, else why not


# --- operand and result types ------------------------------------------------------------------
# (plain slotted classes, as the declaration below: creating dataclasses would cost ``import
# kaiojit`` a few milliseconds)

class Kind:
    """A class of types an operand may have, with the words a message uses for it."""

    __slots__ = ("words", "test")

    def __init__(self, words: str, test: Callable[[T.Type], bool]):
        self.words, self.test = words, test

    def __repr__(self) -> str:
        return f"<{self.words}>"


class Same:
    """The type of operand ``index`` (of the same node)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"Same({self.index})"


def _scalar_test(kinds: str) -> Callable[[T.Type], bool]:
    return lambda t: isinstance(t, T.ScalarType) and t.kind in kinds


INT = Kind("an integer", _scalar_test("iu"))
FLOAT = Kind("a float", _scalar_test("f"))
SCALAR = Kind("a number", _scalar_test("biuf"))
ARRAY = Kind("an array", lambda t: isinstance(t, T.ArrayType))
PRINTABLE = Kind("a number or a string",
                 lambda t: isinstance(t, (T.ScalarType, T.StringType)))

Spec = T.Type | Kind | Same


class Operands:
    """Operand and result types: ``Operands(T.uint32, SCALAR, T.int32, result=Same(1))``.

    Each entry is a type (exactly it), a :class:`Kind`, or :class:`Same` (the type of another
    operand); ``rest`` is what any further operands are (none allowed without it)."""

    __slots__ = ("args", "result", "rest")

    def __init__(self, *args: Spec, result: Spec, rest: Spec | None = None):
        self.args, self.result, self.rest = args, result, rest

    def __call__(self, e: Expr) -> str | None:
        types = [a.type for a in e.args]
        n = len(self.args)
        if len(types) < n or (self.rest is None and len(types) > n):
            want = f"{n}" if self.rest is None else f"at least {n}"
            return f"takes {want} operands, got {len(types)}"
        for i, t in enumerate(types):
            spec = self.args[i] if i < n else self.rest
            why = _mismatch(spec, t, types)
            if why:
                return f"operand {i} is {t}, expected {why}"
        why = _mismatch(self.result, e.type, types)
        return f"result is {e.type}, expected {why}" if why else None


def _mismatch(spec: Spec, t: T.Type, types: list[T.Type]) -> str | None:
    """None if ``t`` fits ``spec``, else the words for what was expected."""
    if isinstance(spec, Kind):
        return None if spec.test(t) else spec.words
    if isinstance(spec, Same):
        other = types[spec.index] if spec.index < len(types) else None
        return None if t == other else f"the type of operand {spec.index} ({other})"
    return None if t == spec else str(spec)


# --- the declaration ---------------------------------------------------------------------------

class Intrinsic:
    """One intrinsic, declared once; treat it as immutable.

    * ``name``: the KIR name (an ``intrinsic`` node's ``attr``, without a static parameter);
    * ``operands``: checks a node's operand and result types (an :class:`Operands`, or any
      callable giving None when they fit, else why not); the verifier runs it;
    * ``lowering``: target name (or ``ANY_TARGET``) -> lowering;
    * ``calls``: the objects users call -> their typing rule. An object itself, or a
      ``"module.attr"`` string resolved once that module is imported (``"numpy.floor"``:
      compiling never imports NumPy), or ``"kj.<name>"``: a new kernel function the registry
      creates and ``kaiojit`` exports as ``kj.<name>``;
    * ``values``: objects that, used as a value, read the intrinsic (no operands; its
      ``operands`` are then an :class:`Operands` whose result is a type);
    * properties: ``pure`` (no side effects: may be evaluated twice, early, or not at all),
      ``barrier`` (a block-level synchronization: a split point of the cpu backend),
      ``warp`` (a warp-level collective: a split point too), ``convergent`` (must not be moved
      across control flow threads diverge at), ``nonnegative`` (its result never is),
      ``writes`` (the operands whose array it writes through), ``view`` (its result is a view
      of operand 0), ``elementwise`` (pure, and a function of its operands' values alone: no
      thread, block or memory state, so the coarsener may repeat it per virtual block);
    * ``param``: the class of the node's static parameter (``Expr.param``), or None where it
      takes none; the verifier checks a node's parameter is of it;
    * ``min_arch``: the lowest GPU arch that has it ('sm_70'; 'sm_90a' means exactly that);
    * ``absent``: target name -> why that target lacks it (what users are told);
    * ``host_symbols``: C functions (libc, libm) its host lowering calls.
    """

    __slots__ = ("name", "operands", "lowering", "calls", "values", "pure", "barrier", "warp",
                 "convergent", "nonnegative", "writes", "view", "elementwise", "param",
                 "min_arch", "absent", "host_symbols")

    def __init__(self, name: str, operands: OperandCheck, lowering: Mapping[str, Lowering], *,
                 calls: Mapping[object, Typing] | None = None, values: tuple = (),
                 pure: bool = False, barrier: bool = False, warp: bool = False,
                 convergent: bool = False, nonnegative: bool = False,
                 writes: tuple[int, ...] = (), view: bool = False, elementwise: bool = False,
                 param: type | None = None, min_arch: str | None = None,
                 absent: Mapping[str, str] | None = None, host_symbols: tuple[str, ...] = ()):
        self.name, self.operands, self.lowering = name, operands, dict(lowering)
        self.calls, self.values = dict(calls or {}), tuple(values)
        self.pure, self.barrier, self.warp, self.convergent = pure, barrier, warp, convergent
        self.nonnegative, self.writes, self.view = nonnegative, tuple(writes), view
        self.elementwise, self.param = elementwise, param
        self.min_arch, self.absent = min_arch, dict(absent or {})
        self.host_symbols = tuple(host_symbols)
        if pure and (barrier or warp or convergent or writes):
            raise ValueError(f"intrinsic {name}: a pure intrinsic cannot synchronize, be "
                             "convergent or write memory")
        if elementwise and not pure:
            raise ValueError(f"intrinsic {name}: an elementwise intrinsic is pure")
        if (barrier or warp) and not convergent:
            raise ValueError(f"intrinsic {name}: barriers and warp collectives are convergent")
        both = set(self.absent) & set(self.lowering)
        if both:
            raise ValueError(f"intrinsic {name}: both lowered and absent on {sorted(both)}")

    def __repr__(self) -> str:
        return f"<intrinsic {self.name}>"

    @property
    def user_name(self) -> str:
        """How users spell it (``kj.nanosleep``, ``math.sqrt``), for messages."""
        for key in self.calls:
            if isinstance(key, str):
                return key
            if isinstance(key, KernelBuiltin):
                return f"kj.{key.name}"
            module, name = getattr(key, "__module__", None), getattr(key, "__name__", None)
            if module and name:
                return f"{module}.{name}"
        return self.name

    @property
    def split_point(self) -> bool:
        """Whether the cpu backend's block-synchronous lowering splits the block here."""
        return self.barrier or self.warp

    @property
    def targets(self) -> frozenset[str]:
        """The target names with a lowering (``ANY_TARGET`` stands for all but ``absent``)."""
        return frozenset(self.lowering)

    def lowering_for(self, target: str) -> Lowering | None:
        """The lowering for a target name, or None where the target lacks it."""
        if target in self.absent:
            return None
        return self.lowering.get(target) or self.lowering.get(ANY_TARGET)


# --- the registry ------------------------------------------------------------------------------

class _Registry:
    """The declarations by KIR name, and the tables the frontend finds them in."""

    def __init__(self) -> None:
        self.by_name: dict[str, Intrinsic] = {}
        self.by_object: dict[object, tuple[Intrinsic, Typing]] = {}
        self.by_value: dict[object, Intrinsic] = {}
        self.public: dict[str, object] = {}
        self.pending: dict[str, tuple[Intrinsic, Typing]] = {}  # "module.attr" not yet imported
        self.loaded = False
        self.loading = False
        self.lock = threading.RLock()


_REG = _Registry()


def register(decl: Intrinsic) -> Intrinsic:
    """Add a declaration; its name and the objects it claims must be new."""
    with _REG.lock:
        if decl.name in _REG.by_name:
            raise ValueError(f"intrinsic {decl.name!r} is already registered")
        for key in list(decl.calls) + list(decl.values):
            if _claimed(key):
                raise ValueError(f"intrinsic {decl.name!r}: {key!r} is already claimed")
        _REG.by_name[decl.name] = decl
        for key, typing in decl.calls.items():
            if isinstance(key, str) and key.startswith("kj."):
                _REG.by_object[_public_stub(key[3:])] = (decl, typing)
            elif isinstance(key, str):
                _REG.pending[key] = (decl, typing)
            else:
                _REG.by_object[key] = (decl, typing)
        for obj in decl.values:
            _REG.by_value[obj] = decl
    return decl


def _public_stub(name: str) -> KernelBuiltin:
    """The kernel function ``kj.<name>``; a dotted name (``mbarrier.init``) is an attribute of
    the namespace ``kj.mbarrier``, created with its first member."""
    stub = KernelBuiltin(name)
    space, dot, attr = name.partition(".")
    if not dot:
        _REG.public[name] = stub
        return stub
    namespace = _REG.public.get(space)
    if namespace is None:
        namespace = _REG.public[space] = Namespace(space, "")
    setattr(namespace, attr, stub)
    return stub


def unregister(name: str) -> None:
    """Withdraw a declaration and the objects it claimed (tests register their own)."""
    with _REG.lock:
        decl = _REG.by_name.pop(name)
        for table in (_REG.by_object, _REG.by_value):
            for key in [k for k, v in table.items() if v is decl or
                        (isinstance(v, tuple) and v[0] is decl)]:
                del table[key]
        for key in [k for k, v in _REG.pending.items() if v[0] is decl]:
            del _REG.pending[key]
        for key in [k for k in decl.calls if isinstance(k, str) and k.startswith("kj.")]:
            space, dot, attr = key[3:].partition(".")
            if not dot:
                del _REG.public[space]
                continue
            namespace = _REG.public[space]
            delattr(namespace, attr)
            if not any(isinstance(v, KernelBuiltin) for v in vars(namespace).values()):
                del _REG.public[space]


def _claimed(key: object) -> bool:
    """Whether another declaration (or, for ``"kj.<name>"``, kaiojit itself) has ``key``."""
    if isinstance(key, str):
        if not key.startswith("kj."):
            return key in _REG.pending
        package = sys.modules.get("kaiojit")
        space, dot, attr = key[3:].partition(".")
        if dot:  # a member of a namespace the registry made (kj.mbarrier.init)
            namespace = _REG.public.get(space)
            if namespace is None:
                return package is not None and space in vars(package)
            return hasattr(namespace, attr)
        return key[3:] in _REG.public or (package is not None and key[3:] in vars(package))
    return key in _REG.by_object or key in _REG.by_value


def _load() -> None:
    """Import the declarations (``kaiojit.intrinsics``) once, on the first lookup."""
    if _REG.loaded:
        return
    with _REG.lock:
        if _REG.loaded or _REG.loading:
            return
        _REG.loading = True
        try:
            importlib.import_module("kaiojit.intrinsics")
        finally:
            _REG.loading = False
        _REG.loaded = True


def _resolve_pending() -> None:
    """Bind ``"module.attr"`` keys whose module the program has imported since."""
    for key in [k for k in _REG.pending if k.partition(".")[0] in sys.modules]:
        module, _, attr = key.partition(".")
        obj = getattr(sys.modules[module], attr, None)
        entry = _REG.pending.pop(key)
        if obj is not None:
            _REG.by_object.setdefault(obj, entry)


def lookup(name: str) -> Intrinsic:
    """The declaration of an intrinsic node's name (its static parameter ignored)."""
    _load()
    decl = _REG.by_name.get(intrinsic_key(name))
    if decl is None:
        raise KeyError(f"no intrinsic {intrinsic_key(name)!r} is registered")
    return decl


def find(name: str) -> Intrinsic | None:
    """Like :func:`lookup`, None for an unknown name."""
    _load()
    return _REG.by_name.get(intrinsic_key(name))


def call_typing(obj: object) -> tuple[Intrinsic, Typing] | None:
    """The intrinsic a call of ``obj`` types to, and its typing rule (None if no intrinsic)."""
    _load()
    if _REG.pending:
        _resolve_pending()
    try:
        return _REG.by_object.get(obj)
    except TypeError:  # an unhashable object is no intrinsic
        return None


def value_intrinsic(obj: object) -> Intrinsic | None:
    """The intrinsic that ``obj`` used as a value reads (``kj.threadIdx.x``), or None."""
    _load()
    try:
        return _REG.by_value.get(obj)
    except TypeError:
        return None


def public_object(name: str) -> object | None:
    """The kernel function the registry exports as ``kj.<name>``, or None."""
    _load()
    return _REG.public.get(name)


def public_names() -> frozenset[str]:
    """The names of the kernel functions the registry exports as ``kj.<name>``."""
    _load()
    return frozenset(_REG.public)


def all_intrinsics() -> list[Intrinsic]:
    """Every registered declaration, in the order registered."""
    _load()
    return list(_REG.by_name.values())


__all__ = [
    "ANY_TARGET", "ARRAY", "FLOAT", "INT", "PRINTABLE", "SCALAR", "Intrinsic", "Kind",
    "Operands", "Same", "all_intrinsics", "call_typing", "find", "lookup", "public_names",
    "public_object", "register", "unregister", "value_intrinsic",
]
