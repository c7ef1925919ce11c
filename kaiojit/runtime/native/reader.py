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

PROLOGUE_SYMBOLS = ("PyTuple_GetItem", "PyCapsule_GetPointer", "PyObject_Type", "Py_DecRef",
                    "PyErr_Clear", "PyBool_FromLong")

_TEMPLATE = """
$(types)

declare ptr @PyTuple_GetItem(ptr, i64)
declare ptr @PyCapsule_GetPointer(ptr, ptr)
declare ptr @PyObject_Type(ptr)
declare void @Py_DecRef(ptr)
declare void @PyErr_Clear()
declare ptr @PyBool_FromLong(i64)
DECLARATIONS

; the C function of a METH_FASTCALL builtin read(*arrays): self is (capsule of a %Spec, owners)
define ptr @SYMBOL(ptr %self, ptr %args, i64 %nargs) {
start:
ALLOCAS
  %capsule = call ptr @PyTuple_GetItem(ptr %self, i64 0)
  %no.capsule = icmp eq ptr %capsule, null
  br i1 %no.capsule, label %fail, label %open
open:
  %spec = call ptr @PyCapsule_GetPointer(ptr %capsule, ptr null)
  %no.spec = icmp eq ptr %spec, null
  br i1 %no.spec, label %fail, label %count
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
    text = (_TEMPLATE.replace("SYMBOL", symbol).replace("DECLARATIONS", declarations)
            .replace("ALLOCAS", allocas).replace("SPEC_LOADS", "\n".join(loads))
            .replace("BODY", body.strip("\n")))
    return expand(text, (spec, entry, *structs), ALIGN_MASK=kt.ALIGN_BYTES - 1)


class Reader:
    """A reader's compiled C function (once per process, on first use) and the builtins made
    from it, each over its own ``Spec``."""

    def __init__(self, ir_text: str, symbols: tuple[str, ...], symbol: str, doc: str):
        self._method = cbuiltins.CompiledMethod(ir_text, PROLOGUE_SYMBOLS + symbols, symbol, doc)

    def builtin(self, spec: ctypes.Structure, *owners: object) -> object:
        """``read(*arrays) -> bool`` over ``spec``, kept alive with ``owners`` (what ``spec``
        points into)."""
        return cbuiltins.make_builtin(self._method.method(), ctypes.addressof(spec), spec,
                                      *owners)


__all__ = ["PROLOGUE_SYMBOLS", "Reader", "reader_ir"]
