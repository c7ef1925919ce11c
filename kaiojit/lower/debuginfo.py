"""Line tables for ``lineinfo=True`` (and ``debug=True``): DWARF metadata that makes NVPTX
write ``.file``/``.loc`` directives mapping PTX back to the kernel's source lines."""

from __future__ import annotations

import os

from llvmlite import ir

from .. import kir


class DebugInfo:
    """Line tables (``lineinfo=True``): each statement's instructions carry its source line,
    so PTX gets ``.loc`` directives that profilers and debuggers map back to the kernel."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.files: dict[str, object] = {}
        self.unit = None
        i32 = ir.IntType(32)
        module.add_named_metadata("llvm.module.flags", [i32(2), "Debug Info Version", i32(3)])
        module.add_named_metadata("llvm.module.flags", [i32(7), "Dwarf Version", i32(4)])

    def _file(self, filename: str):
        f = self.files.get(filename)
        if f is None:
            f = self.files[filename] = self.module.add_debug_info("DIFile", {
                "filename": os.path.basename(filename),
                "directory": os.path.dirname(os.path.abspath(filename)),
            })
            if self.unit is None:
                self.unit = self.module.add_debug_info("DICompileUnit", {
                    "language": ir.DIToken("DW_LANG_Python"), "file": f,
                    "producer": "kaiojit", "runtimeVersion": 0, "isOptimized": True,
                    "emissionKind": ir.DIToken("LineTablesOnly"),
                }, is_distinct=True)
                self.module.add_named_metadata("llvm.dbg.cu", self.unit)
        return f

    def subprogram(self, llfunc: ir.Function, kfunc: kir.KFunction):
        loc = kfunc.loc
        if loc is None:
            return None
        f = self._file(loc.filename)
        sp = self.module.add_debug_info("DISubprogram", {
            "name": kfunc.qualname, "linkageName": llfunc.name, "file": f, "line": loc.line,
            "type": self.module.add_debug_info(
                "DISubroutineType", {"types": self.module.add_metadata([])}),
            "scopeLine": loc.line, "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            "unit": self.unit,
        }, is_distinct=True)
        llfunc.set_metadata("dbg", sp)
        return sp

    def location(self, loc, subprogram):
        return self.module.add_debug_info("DILocation", {
            "line": loc.line, "column": loc.col + 1, "scope": subprogram,
        })
