"""Imports run one way and never in a circle, across the whole kaiojit package.

Every module's imports are read from its AST: the ones at module level and the ones inside
functions (a function-level import still runs, and used to hide a circle). ``from pkg import
name`` counts as an import of ``pkg.name`` when that is a module, else of ``pkg``. The parent
packages that Python initializes on the way to a module are not counted: a package's
``__init__`` importing its submodules would otherwise close a circle with each of them.

Stages, earliest first: base (types, scalars, floatbits, abi, errors, options, target,
language) < kir < frontend < lower < intrinsics < compiler < dispatcher, launch/, tools' sass
and display < lib/. A module imports its own stage or earlier ones. The runtime imports the base
and itself only, and only the last stage imports it. ``kaiojit/__init__.py``, ``__main__.py``,
``testing.py`` and ``diskcache.py`` are entry points: free of the order (what they import and
who imports them), not of circles.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kaiojit"

BASE = 0
LAST = 6
LIBRARY = 7  # kernel libraries written on the public API (kj.random, kj.vectorize, ...)
_STAGES: dict[str, int] = {  # by top-level name; a package of mixed stages, by its modules
    "types": BASE, "errors": BASE, "options": BASE, "env": BASE, "target": BASE, "language": BASE,
    "tma_host": BASE, "mbarrier_host": BASE, "linking": BASE, "cachefiles": BASE,
    "cache": BASE, "hostsyms": BASE,
    "scalars": BASE, "floatbits": BASE, "abi": BASE,  # what a dtype and a parameter are
    "highlight": BASE, "logs": BASE, "overloads": BASE, "sanitizer_shadow": BASE,
    "execsource": BASE,  # the text of exec()-built functions, for the frontend
    "hostcu": BASE,  # foreign CUDA C compiled for the host (the cpu backend's declare_device)
    "serialize": BASE,  # pickling the functions kernels are made of
    "kir": 1, "frontend": 2, "lower": 3, "intrinsics": 4, "compiler": 5,
    "dispatcher": LAST, "runtime": LAST,
    "launch": LAST,  # kernel[grid, block](...), forall, autotuned launches, occupancy
    "torch": LAST,  # kaiojit.torch imports no other stage; the launcher imports it lazily
    # what a user runs on a compiled kernel
    "tools": BASE, "tools.binutils": BASE, "tools.occupancy_calc": BASE, "tools.resources": 5,
    "tools.sass": LAST, "tools.display": LAST,
    "lib": LIBRARY, "bench": LIBRARY, "aot": LIBRARY, "cuda": LIBRARY,
}
# an intrinsic family imports kaiojit.intrinsics.api and the ground (the BASE stage) only
INTRINSIC_API = "kaiojit.intrinsics.api"
ENTRY_POINTS = frozenset({"kaiojit", "kaiojit.__main__", "kaiojit.testing", "kaiojit.diskcache"})

# Circles and imports against the order outside the runtime, which other parts of the
# refactor (issue 9) are removing in parallel. Each is reported as a warning while it exists;
# once it is gone the test asks for its entry here to be deleted. None may involve the runtime.
PENDING_CYCLES: frozenset[frozenset[str]] = frozenset({
})
PENDING_ORDER: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name a ``from ... import`` reads from (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".")
    if path.name != "__init__.py":
        package.pop()
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, except what sits under ``if TYPE_CHECKING:`` (imports for type hints only,
    which never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """``(imported kaiojit module, line)`` for every import anywhere in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kaiojit":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            if source.split(".")[0] != "kaiojit":
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                yield (target if target in known else source), node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {imported module: first line of such an import}."""
    found = modules()
    known = set(found)
    graph: dict[str, dict[str, int]] = {}
    for module, path in found.items():
        edges = graph.setdefault(module, {})
        for target, line in imports_of(module, path, known):
            if target != module:
                edges.setdefault(target, line)
    return graph


def stage(module: str) -> int | None:
    """The stage of a kaiojit module, None for an entry point."""
    if module in ENTRY_POINTS:
        return None
    parts = module.split(".")
    for key in (".".join(parts[1:3]), parts[1]):
        if key in _STAGES:
            return _STAGES[key]
    raise AssertionError(f"{module} has no stage: add its top-level name to _STAGES in "
                         f"{Path(__file__).name}")


def is_runtime(module: str) -> bool:
    return module.split(".")[:2] == ["kaiojit", "runtime"]


def order_violations(graph: dict[str, dict[str, int]]) -> dict[tuple[str, str], str]:
    """``(module, imported module) -> what is wrong`` for each import against the order."""
    problems = {}
    for module, edges in sorted(graph.items()):
        here = stage(module)
        if here is None:
            continue
        for target, line in sorted(edges.items()):
            there = stage(target)
            where = f"{module}:{line} imports {target}"
            if there is None:
                continue
            if is_runtime(module) and not is_runtime(target) and there != BASE:
                problems[module, target] = (f"{where}: the runtime imports kaiojit's base "
                                            "modules and itself only")
            elif is_runtime(target) and not is_runtime(module) and here < LAST:
                problems[module, target] = (f"{where}: only the last stage (dispatcher, "
                                            "launch/, tools' sass and display) and the kernel "
                                            "libraries import the runtime")
            elif there > here:
                problems[module, target] = f"{where}, a later stage"
    return problems


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    """A circle's modules and the import lines that close it."""
    members = set(component)
    lines = [f"  {m}:{line} -> {t}" for m in component
             for t, line in sorted(graph[m].items()) if t in members]
    return "\n".join([" <-> ".join(component), *lines])


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return import_graph()


def test_the_walk_sees_function_level_imports(graph):
    # runtime/__init__ imports its modules at module level; the dispatcher reaches the runtime
    # only from inside functions
    assert "kaiojit.runtime.backend" in graph["kaiojit.runtime"]
    assert "kaiojit.runtime" in graph["kaiojit.dispatcher"]


def test_function_level_and_relative_imports_are_edges(tmp_path):
    source = tmp_path / "memory.py"
    source.write_text("from . import backend\n"
                      "def f():\n"
                      "    from .args import typeof\n"
                      "    import kaiojit.lower.codegen\n"
                      "    from ..frontend import typer\n")
    known = {"kaiojit.runtime.backend", "kaiojit.runtime.args", "kaiojit.frontend.typer"}
    found = dict(imports_of("kaiojit.runtime.memory", source, known))
    assert found == {"kaiojit.runtime.backend": 1, "kaiojit.runtime.args": 3,
                     "kaiojit.lower.codegen": 4, "kaiojit.frontend.typer": 5}


def test_cycles_and_order_on_a_made_up_graph():
    graph = {
        "kaiojit.kir.nodes": {"kaiojit.types": 1},
        "kaiojit.frontend.typer": {"kaiojit.kir.nodes": 2},
        "kaiojit.lower.codegen": {"kaiojit.intrinsics.math": 3},
        "kaiojit.intrinsics.math": {"kaiojit.lower.codegen": 4},
        "kaiojit.launch.launcher": {"kaiojit.runtime.backend": 5, "kaiojit.compiler": 6},
        "kaiojit.runtime.backend": {"kaiojit.target": 7, "kaiojit.kir.nodes": 8},
        "kaiojit.compiler": {"kaiojit.runtime.backend": 9},
        "kaiojit.types": {}, "kaiojit.target": {},
    }
    assert cycles(graph) == [["kaiojit.intrinsics.math", "kaiojit.lower.codegen"]]
    assert sorted(order_violations(graph)) == [
        ("kaiojit.compiler", "kaiojit.runtime.backend"),
        ("kaiojit.lower.codegen", "kaiojit.intrinsics.math"),
        ("kaiojit.runtime.backend", "kaiojit.kir.nodes"),
    ]


def test_every_module_has_a_stage(graph):
    unstaged = [m for m in graph if m not in ENTRY_POINTS
                and not {".".join(m.split(".")[1:3]), m.split(".")[1]} & _STAGES.keys()]
    assert not unstaged, f"add these to _STAGES in {Path(__file__).name}: {unstaged}"


def test_runtime_has_no_import_cycles(graph):
    runtime = [c for c in cycles(graph) if any(is_runtime(m) for m in c)]
    assert not runtime, "import circles through the runtime:\n" + "\n".join(
        describe(c, graph) for c in runtime)


def test_runtime_imports_only_the_base_and_itself(graph):
    problems = [p for (module, target), p in order_violations(graph).items()
                if is_runtime(module) or is_runtime(target)]
    assert not problems, "\n".join(problems)


def test_pending_entries_are_outside_the_runtime():
    assert not any(is_runtime(m) for c in PENDING_CYCLES for m in c)
    assert not any(is_runtime(m) for pair in PENDING_ORDER for m in pair)


def test_package_has_no_import_cycles(graph):
    found = {frozenset(c): c for c in cycles(graph)}
    for key in found.keys() & PENDING_CYCLES:
        warnings.warn(f"import circle still pending elsewhere:\n{describe(found[key], graph)}",
                      stacklevel=1)
    new = [describe(c, graph) for key, c in found.items() if key not in PENDING_CYCLES]
    assert not new, "import circles:\n" + "\n".join(new)
    gone = [sorted(key) for key in PENDING_CYCLES - found.keys()]
    assert not gone, f"these circles are gone: delete them from PENDING_CYCLES: {gone}"


def test_package_imports_run_one_way(graph):
    problems = order_violations(graph)
    for key in problems.keys() & PENDING_ORDER:
        warnings.warn(f"import against the order still pending elsewhere: {problems[key]}",
                      stacklevel=1)
    new = [p for key, p in problems.items() if key not in PENDING_ORDER]
    assert not new, "imports against the stage order:\n" + "\n".join(new)
    gone = sorted(PENDING_ORDER - problems.keys())
    assert not gone, f"these imports are gone: delete them from PENDING_ORDER: {gone}"


def test_intrinsic_families_import_only_the_api_and_the_ground(graph):
    """A family (kaiojit/intrinsics/*.py) writes against one module, kaiojit.intrinsics.api,
    and the ground modules: where a helper lives is the api's business."""
    families = [m for m in graph if m.startswith("kaiojit.intrinsics.") and m != INTRINSIC_API]
    assert len(families) > 10
    problems = [f"{m}:{line} imports {t}" for m in sorted(families)
                for t, line in sorted(graph[m].items())
                if t != INTRINSIC_API and stage(t) != BASE]
    assert not problems, "\n".join(problems)


NATIVE = "kaiojit.runtime.native"
# what the rest of kaiojit uses of the native helpers: the fast form, the launch record, and
# compile_ir (the cpu backend's thread runner is host code compiled the same way)
NATIVE_ENTRY_POINTS = frozenset({"fastlaunch", "launchrecord", "cbuiltins"})
# the helpers that read a layout of the interpreter's (a builtin's method table, a getset
# descriptor) or of a foreign library's (DLPack's API table): each asks the guard first
NATIVE_LAYOUT_READERS = ("dlpack_exchange", "getset_reader", "launchrecord")


def test_native_helpers_are_one_package_behind_one_guard(graph):
    outside = [f"{m}:{line} imports {t}" for m in sorted(graph) if not m.startswith(NATIVE)
               for t, line in sorted(graph[m].items())
               if t.startswith(NATIVE + ".") and t.rpartition(".")[2] not in NATIVE_ENTRY_POINTS]
    assert not outside, "the native package's internals, used outside it:\n" + "\n".join(outside)
    unguarded = [name for name in NATIVE_LAYOUT_READERS
                 if f"{NATIVE}.guard" not in graph[f"{NATIVE}.{name}"]]
    assert not unguarded, f"native helpers that never ask the guard: {unguarded}"
    assert set(graph[NATIVE]) == {f"{NATIVE}.guard"}


def test_the_packages_list_of_runtime_names_is_the_runtimes():
    """``kaiojit`` resolves runtime names without importing the runtime first, so that a
    kernel function of the intrinsic registry (``kj.nanosleep``) loads neither it nor NumPy,
    and a runtime name (``kj.to_device``) loads no registry (nor LLVM)."""
    import kaiojit
    import kaiojit.runtime

    assert kaiojit._RUNTIME_NAMES == frozenset(kaiojit.runtime.__all__)


def test_a_registry_kernel_function_loads_neither_the_runtime_nor_numpy():
    import subprocess
    import sys

    code = ("import sys, kaiojit as kj; kj.nanosleep; "
            "print('numpy' in sys.modules, 'kaiojit.runtime' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=str(Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


# --- the layering of issue 25 (DESIGN.md's Layout) -------------------------------------------

# the ground: what a dtype, an error, an option, a target, the kernel language and a parameter
# are; they import one another and the leaf helpers they are made of, never a stage
GROUND = frozenset({"kaiojit.types", "kaiojit.errors", "kaiojit.options", "kaiojit.target",
                    "kaiojit.language", "kaiojit.abi", "kaiojit.scalars"})
GROUND_HELPERS = frozenset({"kaiojit.floatbits", "kaiojit.env", "kaiojit.hostsyms"})
# modules that moved into launch/, tools/ and lib/ (issue 25 step 5): no import names them;
# only the documented kaiojit.random (README, docs/semantics.md) is still found, by a finder
# in kaiojit/__init__, and only user-facing code (examples/) spells it
OLD_PATHS = frozenset({"kaiojit.launcher", "kaiojit.autotune_launch", "kaiojit.occupancy_api",
                       "kaiojit.sass", "kaiojit.resources", "kaiojit.occupancy_calc",
                       "kaiojit.display", "kaiojit.random", "kaiojit.ufunc", "kaiojit.autotuner",
                       # into kaiojit/runtime/native/ (issue 25 step 4)
                       "kaiojit.runtime.fastlaunch", "kaiojit.runtime.launchrecord",
                       "kaiojit.runtime.cbuiltins", "kaiojit.runtime.dlpack_exchange",
                       "kaiojit.runtime.getset_reader"})
DOCUMENTED_OLD_PATHS = frozenset({"kaiojit.random"})
# what a kernel library (kaiojit/lib/) may import: kaiojit's public modules, their public names
PUBLIC_MODULES = frozenset({"kaiojit", "kaiojit.types", "kaiojit.errors", "kaiojit.runtime",
                            "kaiojit.bench", "kaiojit.logs", "kaiojit.env", "kaiojit.cache",
                            "kaiojit.launch"})
# the autotuner's reads of kaiojit's internals, each to become public API (issue 25 step 2
# and after); reported as a warning while it exists, and to be deleted here once gone
PENDING_LIB_IMPORTS: frozenset[tuple[str, str]] = frozenset()
REPO = PACKAGE.parent


def closure(graph: dict[str, dict[str, int]], starts: list[str]) -> dict[str, str]:
    """Every module ``starts`` reach through imports -> the module whose import reached it."""
    reached: dict[str, str] = {}
    todo = list(starts)
    while todo:
        module = todo.pop()
        for target in graph.get(module, {}):
            if target not in reached:
                reached[target] = module
                todo.append(target)
    return reached


def test_frontend_and_lower_never_reach_the_runtime(graph):
    starts = [m for m in graph if m.split(".")[1:2] in (["frontend"], ["lower"])]
    assert len(starts) > 20
    found = {t: by for t, by in closure(graph, starts).items() if is_runtime(t)}
    assert not found, "\n".join(f"{by} imports {t}" for t, by in sorted(found.items()))


def test_the_runtime_never_reaches_the_frontend(graph):
    starts = [m for m in graph if is_runtime(m)]
    reached = closure(graph, starts)
    assert "kaiojit.runtime.backend" in reached  # the walk sees the runtime's own imports
    compiler = ("frontend", "lower", "intrinsics", "kir")
    found = {t: by for t, by in reached.items() if t.split(".")[1] in compiler}
    assert not found, "\n".join(f"{by} imports {t}" for t, by in sorted(found.items()))


def test_the_ground_imports_no_stage(graph):
    assert GROUND <= graph.keys() and GROUND_HELPERS <= graph.keys()
    assert "kaiojit.scalars" in graph["kaiojit.types"]  # the walk sees the ground's imports
    allowed = GROUND | GROUND_HELPERS
    problems = [f"{m}:{line} imports {t}" for m in sorted(allowed)
                for t, line in sorted(graph[m].items()) if t not in allowed]
    assert not problems, "the ground imports the ground only:\n" + "\n".join(problems)


def _public_names(module: str) -> set[str]:
    import importlib

    loaded = importlib.import_module(module)
    names = set(getattr(loaded, "__all__", ()))
    return names | set(dir(loaded)) if module == "kaiojit" else names or set(dir(loaded))


def lib_violations(module: str, path: Path, known: set[str]) -> Iterator[tuple[str, str]]:
    """``(imported module, what is wrong)`` for each import of a kernel library that is not
    kaiojit's public API: a private module, a private name, ``kj._anything``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "kj" and node.attr.startswith("_"):
            yield "kaiojit", f"{module}:{node.lineno} reads kj.{node.attr}"
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        pairs = ([(a.name, None) for a in node.names] if isinstance(node, ast.Import)
                 else [(_absolute(module, path, node), a.name) for a in node.names])
        for source, name in pairs:
            if source.split(".")[0] != "kaiojit" or source.startswith("kaiojit.lib"):
                continue
            target = f"{source}.{name}" if name and f"{source}.{name}" in known else source
            where = f"{module}:{node.lineno} imports {target}"
            if target not in PUBLIC_MODULES:
                yield target, f"{where}: not one of kaiojit's public modules"
            elif name and target == source and name not in _public_names(source) \
                    and not (name.startswith("__") and name.endswith("__")):
                yield target, f"{where}: {name} is not one of its public names"


def test_kernel_libraries_use_only_the_public_api():
    found = modules()
    known = set(found)
    libs = {m: p for m, p in found.items() if m.startswith("kaiojit.lib.")}
    assert {"kaiojit.lib.random", "kaiojit.lib.autotuner", "kaiojit.lib.ufunc.vectorize"} \
        <= libs.keys()
    problems = {}
    for module, path in sorted(libs.items()):
        for target, what in lib_violations(module, path, known):
            problems.setdefault((module, target), what)
    for key in problems.keys() & PENDING_LIB_IMPORTS:
        warnings.warn(f"a kernel library still reads kaiojit's internals: {problems[key]}",
                      stacklevel=1)
    new = [p for key, p in sorted(problems.items()) if key not in PENDING_LIB_IMPORTS]
    assert not new, "kernel libraries use kaiojit's public API only:\n" + "\n".join(new)
    gone = sorted(PENDING_LIB_IMPORTS - problems.keys())
    assert not gone, f"these imports are gone: delete them from PENDING_LIB_IMPORTS: {gone}"


def test_a_private_read_in_a_library_is_found(tmp_path):
    source = tmp_path / "lib.py"
    source.write_text("import kaiojit as kj\n"
                      "from kaiojit import float32, _CompileOptions\n"
                      "from ..runtime.graph import forbid_in_capture\n"
                      "def f():\n"
                      "    return kj._RUNTIME_NAMES\n")
    known = {"kaiojit.runtime", "kaiojit.runtime.graph"}
    found = sorted(what for _, what in lib_violations("kaiojit.lib.made_up", source, known))
    assert found == [
        "kaiojit.lib.made_up:2 imports kaiojit: _CompileOptions is not one of its public names",
        "kaiojit.lib.made_up:3 imports kaiojit.runtime.graph: not one of kaiojit's public "
        "modules",
        "kaiojit.lib.made_up:5 reads kj._RUNTIME_NAMES",
    ]


def _stale_references(path: Path, allowed: frozenset[str], root: Path = REPO) -> Iterator[str]:
    """Imports of (and dotted strings naming) a module at its old path, in one file."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                     if f"{node.module}.{a.name}" in OLD_PATHS]
            if node.module == "kaiojit.tools":  # tools.py's find_tool is tools/binutils.py's
                names += [f"kaiojit.tools.{a.name}" for a in node.names
                          if not (PACKAGE / "tools" / f"{a.name}.py").exists()]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("kaiojit."):
            names = [node.value]
        for name in names:
            old = next((p for p in OLD_PATHS | {"kaiojit.tools.find_tool"}
                        if name == p or name.startswith(p + ".")), None)
            if old and old not in allowed:
                yield f"{path.relative_to(root)}:{node.lineno}: {name}"


def test_nothing_names_a_moved_module_by_its_old_path():
    problems = []
    for folder in ("kaiojit", "tests", "benchmarks", "tools", "examples"):
        for path in sorted((REPO / folder).rglob("*.py")):
            # examples are user code, and kaiojit/__init__ holds the finder of the documented path
            user = folder == "examples" or path == PACKAGE / "__init__.py"
            if path.resolve() != Path(__file__).resolve():
                problems.extend(_stale_references(path, DOCUMENTED_OLD_PATHS if user
                                                  else frozenset()))
    assert not problems, "old paths (see DESIGN.md's Layout for the new ones):\n" + "\n".join(
        problems)
    stubs = [p for p in OLD_PATHS if PACKAGE.joinpath(*p.split(".")[1:]).with_suffix(".py").exists()
             or PACKAGE.joinpath(*p.split(".")[1:], "__init__.py").exists()]
    assert not stubs and not (PACKAGE / "tools.py").exists(), f"stub modules left: {stubs}"


def test_a_stale_reference_is_found(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("from kaiojit.launcher import Launcher\n"
                      "from kaiojit import sass, types\n"
                      "from kaiojit.tools import find_tool\n"
                      "from kaiojit.tools import resources\n"
                      "patched = 'kaiojit.autotuner.event_timer'\n"
                      "from kaiojit.random import xoroshiro128p_next\n"
                      "from kaiojit.runtime import fastlaunch, memory\n")
    found = sorted(_stale_references(source, DOCUMENTED_OLD_PATHS, tmp_path))
    assert found == ["probe.py:1: kaiojit.launcher", "probe.py:2: kaiojit.sass",
                     "probe.py:3: kaiojit.tools.find_tool",
                     "probe.py:5: kaiojit.autotuner.event_timer",
                     "probe.py:7: kaiojit.runtime.fastlaunch"]
    assert "probe.py:6: kaiojit.random" in _stale_references(source, frozenset(), tmp_path)


def test_the_documented_random_path_is_the_library_module():
    """``from kaiojit.random import ...`` (README, docs/semantics.md) finds kaiojit/lib/random.py:
    one module object under both names, its functions the same objects."""
    import importlib

    import kaiojit as kj
    import kaiojit.lib.random as lib_random

    old = importlib.import_module("kaiojit.random")
    assert old is lib_random and kj.random is lib_random
    from kaiojit.random import xoroshiro128p_uniform_float32  # noqa: PLC0415

    assert xoroshiro128p_uniform_float32 is lib_random.xoroshiro128p_uniform_float32
    assert lib_random.__spec__.name == "kaiojit.lib.random"
