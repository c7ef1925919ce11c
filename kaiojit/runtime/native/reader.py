"""The one builder of native array readers: the builtin ``read(*arrays) -> bool`` of a fast form.

A reader (:mod:`.dlpack_exchange` for classes that publish DLPack's C exchange API,
:mod:`.getset_reader` for classes whose attributes are C getters) is a ``METH_FASTCALL``
builtin whose ``self`` is ``(capsule of a Spec, owners...)``. Every reader shares what is
written here once, its *prologue* and *epilogue*:

- open the capsule (a missing one is an error return, NULL);
- test the argument count against ``Spec.count`` (another count is a miss);
- load every other ``Spec`` field into ``%spec.<field>`` (``%spec.entries`` is the array of
  ``Entry`` records, one per argument);
- per argument ``%i``: ``%entry`` (its record) and ``%obj``; test the object's class against
  ``Entry.cls`` (a reader is only valid for the class it was built for);
- the ends: ``written`` (next argument), ``error`` (clear the Python error, then a miss),
  ``hit`` (``True``), ``miss`` (``False``), ``fail`` (NULL).

A reader gives only its *body*: IR starting at the block ``read`` that tests and writes one
argument and branches to ``%written``, ``%miss`` or ``%error``. Record layouts come from the
reader's ``ctypes`` classes (:mod:`.irstruct`): ``$(Entry.offset)`` is a field's index.
"""

from __future__ import annotations

import ctypes

from kaiojit import types as kt
from kaiojit.runtime.native import cbuiltins
from kaiojit.runtime.native.irstruct import Struct, expand, field_type

PROLOGUE_SYMBOLS = (*cbuiltins.SELF_SYMBOLS, "PyObject_Type", "Py_DecRef", "PyErr_Clear",
                    "PyBool_FromLong")

_TEMPLATE = """
$(types)

SELF_DECLARATIONS
declare ptr @PyObject_Type(ptr)
declare void @Py_DecRef(ptr)
declare void @PyErr_Clear()
declare ptr @PyBool_FromLong(i64)
DECLARATIONS

; the C function of a METH_FASTCALL builtin read(*arrays): self is (capsule of a %Spec, owners)
define ptr @SYMBOL(ptr %self, ptr %args, i64 %nargs) {
start:
ALLOCAS
OPEN_SELF
count:
  %count.at = getelementptr %Spec, ptr %spec, i32 0, i32 $(Spec.count)
  %count.n = load i64, ptr %count.at
  %count.ok = icmp eq i64 %count.n, %nargs
  br i1 %count.ok, label %setup, label %miss
setup:
SPEC_LOADS
  br label %next.array
next.array:
  %i = phi i64 [ 0, %setup ], [ %i.next, %written ]
  %all.read = icmp eq i64 %i, %count.n
  br i1 %all.read, label %hit, label %class.test
class.test:
  %entry = getelementptr %Entry, ptr %spec.entries, i64 %i
  %obj.at = getelementptr ptr, ptr %args, i64 %i
  %obj = load ptr, ptr %obj.at
  %type = call ptr @PyObject_Type(ptr %obj)
  call void @Py_DecRef(ptr %type)
  %want.type.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.cls)
  %want.type = load ptr, ptr %want.type.at
  %type.ok = icmp eq ptr %type, %want.type
  br i1 %type.ok, label %read, label %miss
BODY
written:
  %i.next = add i64 %i, 1
  br label %next.array
error:
  call void @PyErr_Clear()
  br label %miss
hit:
  %yes = call ptr @PyBool_FromLong(i64 1)
  ret ptr %yes
miss:
  %no = call ptr @PyBool_FromLong(i64 0)
  ret ptr %no
fail:
  ret ptr null
}
"""


def alignment_test(then: str) -> str:
    """IR of the test that an array is as aligned as the kernel was specialized on: its
    pointer (``%pointer``), and a row's bytes (``%row.extent`` elements, 0 for no rows), against
    16 bytes; aligned where ``Entry.aligned`` says so, misaligned where not (as the general
    path picks the specialization). Branches to ``%<then>`` or ``%miss``."""
    return f"""  %itemsize.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.itemsize)
  %itemsize = load i64, ptr %itemsize.at
  %row = mul i64 %row.extent, %itemsize
  %both = or i64 %pointer, %row
  %low = and i64 %both, $(ALIGN_MASK)
  %misaligned = icmp ne i64 %low, 0
  %aligned.at = getelementptr %Entry, ptr %entry, i32 0, i32 $(Entry.aligned)
  %aligned.flag = load i64, ptr %aligned.at
  %wants.aligned = icmp ne i64 %aligned.flag, 0
  %alignment.ok = xor i1 %misaligned, %wants.aligned
  br i1 %alignment.ok, label %{then}, label %miss
"""


def spec_fields(*own: tuple[str, object]) -> list[tuple[str, object]]:
    """The ``_fields_`` of a reader's ``Spec``: the argument count, the parameter buffer and the
    entries, which the prologue reads, around the reader's ``own`` fields (each loaded into
    ``%spec.<name>``)."""
    return [("count", ctypes.c_int64), ("buffer", ctypes.c_void_p), *own,
            ("entries", ctypes.c_void_p)]


def entry_fields(*own: tuple[str, object]) -> list[tuple[str, object]]:
    """The ``_fields_`` of a reader's ``Entry`` (one per argument): the class the prologue
    tests, the reader's ``own`` fields, then where the array's pointer and extents go in the
    buffer (a byte offset), its element size and whether the kernel was specialized as
    16-byte aligned (0 or 1), which every reader's alignment test reads."""
    return [("cls", ctypes.c_void_p), *own, ("offset", ctypes.c_int64),
            ("itemsize", ctypes.c_int64), ("aligned", ctypes.c_int64)]


def reader_ir(symbol: str, spec: Struct, entry: Struct, body: str, *,
              declarations: str = "", allocas: str = "", structs: tuple[Struct, ...] = ()) -> str:
    """The IR of a reader ``@symbol`` over records ``spec`` (with ``count`` and ``entries``
    fields) and ``entry`` (with a ``cls`` field): the shared prologue and epilogue around
    ``body``. ``declarations`` adds functions, ``allocas`` entry-block allocas, ``structs``
    other record types the body names; ``$(ALIGN_MASK)`` is the alignment test's mask."""
    loads = []
    for name, ctype in spec._fields_:
        if name == "count":
            continue
        loads.append(f"  %spec.{name}.at = getelementptr %Spec, ptr %spec, i32 0, "
                     f"i32 $(Spec.{name})\n"
                     f"  %spec.{name} = load {field_type(ctype)}, ptr %spec.{name}.at")
    text = (_TEMPLATE.replace("SELF_DECLARATIONS", cbuiltins.SELF_DECLARATIONS)
            .replace("OPEN_SELF", cbuiltins.open_self("spec", "count"))
            .replace("SYMBOL", symbol).replace("DECLARATIONS", declarations)
            .replace("ALLOCAS", allocas).replace("SPEC_LOADS", "\n".join(loads))
            .replace("BODY", body.strip("\n")))
    return expand(text, (spec, entry, *structs), ALIGN_MASK=kt.ALIGN_BYTES - 1)


class Reader:
    """One reader: its IR (:func:`reader_ir`) compiled once per process on first use, and the
    builtins made from it, each over a ``Spec`` of its own."""

    def __init__(self, symbol: str, doc: str, spec: Struct, entry: Struct, body: str, *,
                 symbols: tuple[str, ...] = (), declarations: str = "", allocas: str = "",
                 structs: tuple[Struct, ...] = ()):
        self.spec, self.entry = spec, entry
        text = reader_ir(symbol, spec, entry, body, declarations=declarations, allocas=allocas,
                         structs=structs)
        self._method = cbuiltins.CompiledMethod(text, PROLOGUE_SYMBOLS + symbols, symbol, doc)

    def entries(self, count: int) -> ctypes.Array:
        """Zeroed entries for ``count`` arguments, to fill in."""
        return (self.entry * count)()

    def builtin(self, entries: ctypes.Array, buffer_address: int, *owners: object,
                **spec_values: object) -> object:
        """``read(*arrays) -> bool`` over ``entries``, writing into the buffer at
        ``buffer_address``, with the reader's own ``Spec`` fields from ``spec_values``; kept
        alive with ``owners`` (what the entries point to and the buffer)."""
        spec = self.spec(count=len(entries), buffer=buffer_address,
                         entries=ctypes.addressof(entries), **spec_values)
        return cbuiltins.make_builtin(self._method.method(), ctypes.addressof(spec), spec,
                                      entries, *owners)


__all__ = ["PROLOGUE_SYMBOLS", "Reader", "alignment_test", "entry_fields", "reader_ir",
           "spec_fields"]
