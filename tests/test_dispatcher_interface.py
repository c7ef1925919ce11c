"""Launchers (kaiojit/launch), the autotuner and the frontend read a ``@kj.jit`` object through
its public interface (issue 25 step 5): no module but dispatcher.py (and numba's subclass of it,
kaiojit/cuda/dispatcher.py) reads a private attribute of ``Dispatcher``."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import kaiojit as kj

PACKAGE = Path(__file__).resolve().parents[1] / "kaiojit"
OWNERS = {PACKAGE / "dispatcher.py", PACKAGE / "cuda" / "dispatcher.py"}


def private_members(tree: ast.Module) -> set[str]:
    """``_name`` methods and ``self._name`` attributes of the class ``Dispatcher``."""
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Dispatcher")
    found = set()
    for n in ast.walk(cls):
        if isinstance(n, ast.FunctionDef):
            found.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id == "self" and isinstance(n.ctx, ast.Store):
            found.add(n.attr)
    return {n for n in found if n.startswith("_") and not n.startswith("__")}


def foreign_reads(path: Path, private: set[str], root: Path = PACKAGE.parent) -> list[str]:
    """``file:line: expression`` for each read of one of ``private`` on another object than
    ``self``, in a module that does not define that name on its own classes."""
    tree = ast.parse(path.read_text(), str(path))
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    own |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
            and n.value.id == "self"}
    return [f"{path.relative_to(root)}:{n.lineno}: {ast.unparse(n)}"
            for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in private
            and n.attr not in own and not (isinstance(n.value, ast.Name) and n.value.id == "self")]


def test_no_module_reads_a_private_attribute_of_the_dispatcher():
    private = private_members(ast.parse((PACKAGE / "dispatcher.py").read_text()))
    assert {"_launch_cache", "_constexpr_at", "_prepare"} <= private  # the walk sees them
    problems = [line for path in sorted(PACKAGE.rglob("*.py")) if path not in OWNERS
                for line in foreign_reads(path, private)]
    assert not problems, "use Dispatcher's public interface:\n" + "\n".join(problems)


def test_a_foreign_private_read_is_found(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("class Own:\n"
                     "    def _launch(self):\n"
                     "        return self._prepare()\n"
                     "def launch(d, args):\n"
                     "    return d._prepare(args), d.loaded_kernel(args), d._launch()\n")
    found = foreign_reads(probe, {"_prepare", "_launch"}, tmp_path)
    assert found == ["probe.py:5: d._prepare"]  # _launch is the module's own name


def test_the_interface_answers_what_launchers_ask():
    @kj.jit
    def scale(out, x, FACTOR: kj.constexpr, n):
        i = kj.grid(1)
        if i < n:
            out[i] = x[i] * FACTOR

    rng = np.random.default_rng()
    n = int(rng.integers(50, 200))
    x_host = rng.standard_normal(n).astype(np.float32)
    x, out = kj.to_device(x_host), kj.to_device(np.full(n, np.nan, np.float32))
    args = (out, x, 3, n)
    assert scale.constexpr_positions == (2,)
    assert scale.passed_args(args) == (out, x, n)
    loaded = scale.loaded_kernel(args)
    assert scale.loaded_kernel(args) is loaded  # from the launch cache the second time
    block = scale.forall_block_size(loaded, 0)
    assert block == scale.forall_block_size(loaded, 0) and 0 < block <= 1024
    scale.forall(n)(*args)
    np.testing.assert_array_equal(out.copy_to_host(), x_host * np.float32(3))
    assert scale.declared_signatures == ()
    declared = kj.jit(["void(float32[:], float32[:], int64)", "void(float64[:], float64[:], int64)"]
                      )(copy)
    assert [s.args for s in declared.declared_signatures] == [
        (kj.float32[:], kj.float32[:], kj.int64), (kj.float64[:], kj.float64[:], kj.int64)]


def copy(out, x, n):
    i = kj.grid(1)
    if i < n:
        out[i] = x[i]
