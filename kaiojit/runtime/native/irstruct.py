"""LLVM IR struct types derived from ``ctypes`` structures: each native layout has one source.

The builtins of this package read records that Python fills through ``ctypes`` (a reader's
spec and entries, a launch record). Their IR text names those records' types and fields
through placeholders that :func:`expand` fills in from the ``ctypes`` classes:

- ``$(types)``: a ``%Name = type {...}`` definition for each structure given (and each one
  nested in it), in dependency order;
- ``$(Name.field)``: the index of ``field`` in ``Name`` (for a ``getelementptr``);
- ``$(NAME)``: a constant the caller passes (``ALIGN_MASK``).

:func:`check_layout` compares the offsets LLVM computes for each derived type with the ones
``ctypes`` uses (the tests run it on every structure of the package).
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

_SCALARS: dict[Any, str] = {
    ctypes.c_void_p: "ptr", ctypes.c_char_p: "ptr",
    ctypes.c_int64: "i64", ctypes.c_uint64: "i64", ctypes.c_ssize_t: "i64", ctypes.c_size_t: "i64",
    ctypes.c_int32: "i32", ctypes.c_uint32: "i32", ctypes.c_int: "i32", ctypes.c_uint: "i32",
    ctypes.c_int16: "i16", ctypes.c_uint16: "i16", ctypes.c_int8: "i8", ctypes.c_uint8: "i8",
}
_PLACEHOLDER = re.compile(r"\$\((\w+)(?:\.(\w+))?\)")

Struct = type[ctypes.Structure]


def ir_name(struct: Struct) -> str:
    """The IR name of a structure's type: ``%`` and its class name without leading ``_``."""
    return "%" + struct.__name__.lstrip("_")


def field_type(ctype: Any) -> str:
    """The IR type of one field's ``ctypes`` type (a scalar, an array, a nested structure)."""
    if ctype in _SCALARS:
        return _SCALARS[ctype]
    if isinstance(ctype, type) and issubclass(ctype, ctypes._Pointer):
        return "ptr"
    if isinstance(ctype, type) and issubclass(ctype, ctypes.Array):
        return f"[{ctype._length_} x {field_type(ctype._type_)}]"
    if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure):
        return ir_name(ctype)
    raise TypeError(f"no IR type for the ctypes type {ctype.__name__}")


def _nested(struct: Struct) -> list[Struct]:
    """``struct`` and the structures its fields hold, each after those it holds."""
    out: list[Struct] = []

    def visit(ctype: Any) -> None:
        if isinstance(ctype, type) and issubclass(ctype, ctypes.Array):
            visit(ctype._type_)
        elif isinstance(ctype, type) and issubclass(ctype, ctypes.Structure):
            for _, member in ctype._fields_:
                visit(member)
            if ctype not in out:
                out.append(ctype)

    visit(struct)
    return out


def type_definitions(*structs: Struct) -> str:
    """``%Name = type { ... }`` for each structure and those nested in it, in order."""
    seen: list[Struct] = []
    for struct in structs:
        seen += [s for s in _nested(struct) if s not in seen]
    return "\n".join(f"{ir_name(s)} = type {{ {', '.join(field_type(t) for _, t in s._fields_)} }}"
                     for s in seen)


def field_index(struct: Struct, name: str) -> int:
    """The index of field ``name`` in ``struct`` (a ``KeyError`` naming both if absent)."""
    for index, (field, _) in enumerate(struct._fields_):
        if field == name:
            return index
    raise KeyError(f"{struct.__name__} has no field {name!r}")


def expand(text: str, structs: tuple[Struct, ...], **constants: object) -> str:
    """``text`` with its placeholders (see the module's docstring) filled in."""
    by_name = {s.__name__.lstrip("_"): s for struct in structs for s in _nested(struct)}

    def fill(m: re.Match) -> str:
        name, field = m.group(1), m.group(2)
        if field is not None:
            return str(field_index(by_name[name], field))
        if name == "types":
            return type_definitions(*structs)
        return str(constants[name])

    return _PLACEHOLDER.sub(fill, text)


def check_layout(struct: Struct) -> list[str]:
    """Where LLVM's layout of ``struct``'s derived type (on this process's target) differs
    from ``ctypes``': one line per field at another offset, and the size; empty if none."""
    from llvmlite import binding as llvm

    from kaiojit.target import host_target_machine

    module = llvm.parse_assembly(f"{type_definitions(struct)}\n"
                                 f"@probe = external global {ir_name(struct)}\n")
    target_data = host_target_machine().target_data
    ty = module.get_global_variable("probe").global_value_type
    problems = []
    for index, (name, _) in enumerate(struct._fields_):
        llvm_offset = target_data.get_element_offset(ty, index)
        ctypes_offset = getattr(struct, name).offset
        if llvm_offset != ctypes_offset:
            problems.append(f"{struct.__name__}.{name}: LLVM {llvm_offset}, ctypes {ctypes_offset}")
    if target_data.get_abi_size(ty) != ctypes.sizeof(struct):
        problems.append(f"{struct.__name__}: {target_data.get_abi_size(ty)} bytes in LLVM, "
                        f"{ctypes.sizeof(struct)} in ctypes")
    return problems


__all__ = ["check_layout", "expand", "field_index", "field_type", "ir_name", "type_definitions"]
