"""Python AST -> typed kernel IR: name resolution, type inference, located errors.

One ``ast.NodeVisitor``. Variable types are inferred by running the visitor until the types
of all variables stop changing (loops can widen a type); the last run builds the IR with the
casts every assignment needs. Python literals are weak (NEP 50).
"""

from __future__ import annotations

import ast

from .. import language as L
from ..language import LiteralUnroll, StaticRange
from .. import types as T
from ..errors import CompileError, TypingError, UnsupportedError
from .. import kir
from ..kir import Expr
from ..kir.intrinsics import lookup
from ..kir.verify import verify
from . import iteration, raising, records
from .captured import captured_array, global_ndarray
from .deps import DependencyRecorder, RecordingNames
from .expressions import BINOPS, ExpressionTyping
from .source import FunctionSource
from .parameters import signature_problem
from .unbound import first_unbound_use, zero_trip_reads
from .ufunc_calls import ufunc_statement
from .unroll import literal_for, static_for
from .values import (
    INT_LITERAL_RANGE,
    STRING_ONLY_IN_PRINT,
    PyObj,
    const_expr,
    convert_const,
    describe,
    is_constant_value,
    is_ndarray,
    numpy_if_imported,
    result_scalar,
    type_words,
)

_MAX_PASSES = 8

_UNSUPPORTED = {
    ast.ListComp: "list comprehensions", ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions", ast.GeneratorExp: "generator expressions",
    ast.Lambda: "lambda", ast.With: "'with' statements", ast.Try: "'try' statements",
    ast.ClassDef: "class definitions", ast.Yield: "generators ('yield')",
    ast.YieldFrom: "generators ('yield from')", ast.FunctionDef: "nested functions",
    ast.Global: "'global'", ast.Nonlocal: "'nonlocal'",
    ast.Assert: "'assert'", ast.Delete: "'del'", ast.Import: "'import'",
    ast.ImportFrom: "'import'", ast.List: "lists", ast.Dict: "dicts", ast.Set: "sets",
    ast.JoinedStr: "f-strings", ast.Await: "'await'", ast.AsyncFunctionDef: "async functions",
    ast.Starred: "starred expressions", ast.Slice: "slices", ast.NamedExpr: "':='",
}


def _progression(idx: Expr, items: list, t: T.Type, loc) -> Expr | None:
    """``start + idx * step`` for a tuple of integer constants in arithmetic progression
    (``tuple(range(64))``), instead of a chain of selects as long as the tuple (two items
    keep their one select)."""
    if not (isinstance(t, T.ScalarType) and t.kind in "iu") or len(items) < 3 or any(
            i.op != "const" for i in items):
        return None
    values = [i.attr for i in items]
    step = values[1] - values[0]
    if any(b - a != step for a, b in zip(values, values[1:])):
        return None
    scaled = Expr("binop", T.int64, (idx, Expr("const", T.int64, attr=step)), attr="*", loc=loc)
    value = Expr("binop", T.int64, (scaled, Expr("const", T.int64, attr=values[0])), attr="+",
                 loc=loc)
    return value if t == T.int64 else Expr("cast", t, (value,), loc=loc)


class Typer(RecordingNames, ExpressionTyping, ast.NodeVisitor):
    """Types one function for one tuple of argument types."""

    def __init__(self, pyfunc, src: FunctionSource, arg_types: tuple[T.Type, ...],
                 is_kernel: bool, specialize_device, options=None):
        self.pyfunc = pyfunc
        self.src = src
        self.is_kernel = is_kernel
        self.deps = DependencyRecorder(pyfunc)  # what typing reads (frontend/deps.py)
        self.specialize_device = self.deps.recording_callees(specialize_device)
        self.options = options
        self.namespace = dict(pyfunc.__globals__)
        if pyfunc.__closure__:
            for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
                try:
                    self.namespace[name] = cell.cell_contents
                except ValueError:
                    pass
        fdef = src.node
        self.param_names = [a.arg for a in fdef.args.args]
        self.arg_types = arg_types
        # constexpr parameters are names of constants, as globals are: folded, never passed
        self.constexprs = {name: t.value for name, t in zip(self.param_names, arg_types)
                           if isinstance(t, T.ConstexprType)}
        self.namespace.update(self.constexprs)
        self.var_types: dict[str, T.Type] = {}
        self.var_weak: dict[str, bool] = {}
        self.cur: ast.AST = fdef
        self.final = False
        self.changed = False
        self.loop_depth = 0
        # state an intrinsic family (or static_range) keeps for this compile, by family
        self.family_states: dict[str, object] = {}
        self.return_types: list[tuple[T.Type, bool]] = []
        self.callees: list[kir.KFunction] = []
        self._check_signature(fdef)

    # --- driver ---------------------------------------------------------------------------------

    def run(self) -> kir.KFunction:
        fdef = self.src.node
        unbound = first_unbound_use(fdef, self.param_names)
        if unbound is not None:
            raise TypingError(unbound.message(), self.loc(unbound.node))
        for _ in range(_MAX_PASSES):
            self._reset_pass()
            self.final = False
            self.changed = False
            self._block(fdef.body)
            if not self.changed:
                break
        # every return converts to the type all of them unify to, the later ones included
        self.final_return = self._return_type() if self.return_types else T.void
        self._reset_pass()
        self.final = True
        body = self._zero_trip_defaults() + self._block(fdef.body)
        ret = self._return_type()
        if self.is_kernel and ret != T.void:
            raise TypingError("a kernel cannot return a value", self._return_loc)
        locals_ = {n: self.var_types[n] for n in self.var_types}
        kfunc = kir.KFunction(
            name=self.pyfunc.__name__, qualname=self.pyfunc.__qualname__,
            params=tuple((n, t) for n, t in zip(self.param_names, self.arg_types)
                         if n not in self.constexprs), return_type=ret,
            locals=locals_, body=body, is_kernel=self.is_kernel, loc=self.src.loc(fdef),
            callees=self.callees,
        )
        kfunc.deps = self.deps.record(self.src.lines)
        return kfunc

    def _zero_trip_defaults(self) -> list:
        """``v = 0`` first for each scalar variable a read may reach unassigned only through
        a loop that ran no iteration (frontend/unbound.py): the read gives 0."""
        out = []
        for name in sorted(zero_trip_reads(self.src.node, self.param_names)):
            t = self.var_types.get(name)
            if isinstance(t, T.ScalarType):
                zero = Expr("const", t, attr=convert_const(0, t), loc=self.src.loc(self.src.node))
                out.append(kir.Assign(name, zero, zero.loc))
        return out

    def _reset_pass(self):
        for name, t in zip(self.param_names, self.arg_types):
            if name not in self.var_types and name not in self.constexprs:
                self.var_types[name] = t
                self.var_weak[name] = False
        self.return_types = []
        self._return_loc = None
        self.callees = []
        self.shared_names = 0

    def _check_signature(self, fdef: ast.FunctionDef):
        problem = signature_problem(fdef)
        if problem is not None:
            self.error(*problem, UnsupportedError)
        if len(self.param_names) != len(self.arg_types):
            raise TypeError(
                f"{self.pyfunc.__qualname__}() takes {len(self.param_names)} arguments, "
                f"the signature gives {len(self.arg_types)}"
            )

    def _return_type(self) -> T.Type:
        if not self.return_types:
            return T.void
        t, weak = self.return_types[0]
        for t2, w2 in self.return_types[1:]:
            t, weak = self.unify(t, weak, t2, w2, "the return value", self._return_loc)
        return t

    # --- helpers ----------------------------------------------------------------------------------

    def visit(self, node):
        """Type ``node``. The net under every typing rule (as Triton's ``CodeGenerator.visit``
        has one): an exception that is not a :class:`CompileError` (a bug of kaiojit or of an
        intrinsic's rule) leaves as one located at the innermost node being typed, so a user
        never sees a raw traceback out of kaiojit. RecursionError passes: it means a device
        function calls itself, which :func:`type_function` reports."""
        prev, self.cur = self.cur, node
        try:
            return super().visit(node)
        except (CompileError, RecursionError):
            raise
        except Exception as e:  # the net: anything else is an internal error
            raise CompileError(f"internal error while typing {_node_words(node)}: "
                               f"{type(e).__name__}: {e}", self.loc(node)) from e
        finally:
            self.cur = prev

    def loc(self, node=None):
        return self.src.loc(node if node is not None else self.cur)

    def error(self, message: str, node=None, cls=TypingError):
        raise cls(message, self.loc(node))

    def generic_visit(self, node):
        what = _UNSUPPORTED.get(type(node), f"'{type(node).__name__}'")
        self.error(f"{what} not supported in kernels", node, UnsupportedError)

    def expr(self, node) -> Expr:
        """Visit an expression that must be a kernel value."""
        r = self.visit(node)
        if isinstance(r, PyObj):
            r = self.pyobj_to_expr(r, node)
        return r

    def pyobj_to_expr(self, obj: PyObj, node) -> Expr:
        v = obj.value
        if is_constant_value(v):
            return self.constant(v, node)
        if isinstance(v, L.KernelBuiltin):
            from .builtins import value_builtin
            e = value_builtin(self, v, node)
            if e is not None:
                return e
            self.error(f"kj.{v.name} is a function: call it", node)
        if is_ndarray(v):
            return global_ndarray(self.pyfunc.__name__, v, self.loc(node))
        captured = captured_array(v, self.loc(node))
        if captured is not None:
            return captured
        self.error(f"{describe(v)} is not a value a kernel can use", node)

    def constant(self, v, node) -> Expr:
        if isinstance(v, tuple):
            elts = tuple(self.constant(x, node) for x in v)
            return Expr("tuple", T.TupleType(tuple(e.type for e in elts)), elts, loc=self.loc(node))
        if type(v) is int and not INT_LITERAL_RANGE[0] <= v < INT_LITERAL_RANGE[1]:
            self.error(f"the integer {v if abs(v) < 10**30 else 'constant'} is out of range: "
                       "kernels hold integers of 64 bits (int64, or uint64 past int64)", node)
        return const_expr(v, self.loc(node))

    def coerce(self, e: Expr, t: T.Type, node=None) -> Expr:
        """``e`` converted to ``t`` (constants folded)."""
        if e.type == t and not e.weak:
            return e
        if e.type == t:
            return Expr(e.op, e.type, e.args, e.attr, e.loc, weak=False, param=e.param)
        if isinstance(t, T.ScalarType) and isinstance(e.type, T.ScalarType):
            if e.type.is_complex and not t.is_complex:
                self.error(f"cannot convert {e.type} to {t} (it would drop the imaginary "
                           "part): take .real, .imag or abs()", node)
            if e.op == "const":
                return Expr("const", t, attr=convert_const(e.attr, t), loc=e.loc)
            return Expr("cast", t, (e,), loc=e.loc)
        if isinstance(t, T.ArrayType) and isinstance(e.type, T.ArrayType):
            if e.type.with_align(t.align) == t and e.type.align >= t.align:
                # the same array, promising less alignment: the same value
                return Expr(e.op, t, e.args, e.attr, e.loc, weak=e.weak, param=e.param)
            if e.type.dtype == t.dtype and e.type.ndim == t.ndim and t.layout == "A":
                return Expr("cast", t, (e,), loc=e.loc)
        if isinstance(t, T.TupleType) and isinstance(e.type, T.TupleType):
            if len(t.elements) == len(e.type.elements):
                items = tuple(
                    self.coerce(self.tuple_item(e, i), et, node) for i, et in enumerate(t.elements)
                )
                return Expr("tuple", t, items, loc=e.loc)
        self.error(f"cannot convert {e.type} to {t}", node)

    def tuple_item(self, e: Expr, i: int) -> Expr:
        if e.op == "tuple":
            return e.args[i]
        return Expr("getitem", e.type.elements[i], (e,), attr=i, loc=e.loc)

    def unify(self, t1, w1, t2, w2, what, loc) -> tuple[T.Type, bool]:
        """The type a variable takes when values of types t1 and t2 are both assigned to it."""
        if t1 == t2:
            return t1, w1 and w2
        if isinstance(t1, T.ScalarType) and isinstance(t2, T.ScalarType):
            return result_scalar(t1, w1, t2, w2), w1 and w2
        if isinstance(t1, T.ArrayType) and isinstance(t2, T.ArrayType):
            if t1.dtype == t2.dtype and t1.ndim == t2.ndim:
                if t1.layout == t2.layout:  # only the alignment differs: the lesser one
                    return t1.with_align(min(t1.align, t2.align)), False
                return t1.with_layout("A"), False
        if isinstance(t1, T.TupleType) and isinstance(t2, T.TupleType):
            if len(t1.elements) == len(t2.elements):
                elts = tuple(
                    self.unify(a, w1, b, w2, what, loc)[0] for a, b in zip(t1.elements, t2.elements)
                )
                return T.TupleType(elts), w1 and w2
        raise TypingError(
            f"{what} cannot be both {t1} and {t2}: give it one type (or convert, e.g. kj.float32(x))",
            loc,
        )

    def assign_var(self, name: str, value: Expr, node) -> kir.Assign:
        if name in self.constexprs:
            self.error(f"cannot assign to {name!r}: it is a kj.constexpr parameter, a "
                       "constant of this compile", node)
        if name in self.var_types:
            old_t, old_w = self.var_types[name], self.var_weak[name]
            new_t, new_w = self.unify(old_t, old_w, value.type, value.weak,
                                      f"variable {name!r}", self.loc(node))
            if (new_t, new_w) != (old_t, old_w):
                if self.final:
                    raise TypingError(f"the type of {name!r} did not settle", self.loc(node))
                self.changed = True
                self.var_types[name], self.var_weak[name] = new_t, new_w
        else:
            if self.final:
                raise TypingError(f"the type of {name!r} did not settle", self.loc(node))
            self.changed = True
            if isinstance(value.type, (T.StringType, T.VoidType)):
                self.error(f"cannot assign {type_words(value.type)} to a variable", node)
            self.var_types[name], self.var_weak[name] = value.type, value.weak
        target = self.var_types[name]
        if self.final:
            value = self.coerce(value, target, node)
        return kir.Assign(name, value, self.loc(node))

    def var_expr(self, name: str, node) -> Expr:
        return Expr("var", self.var_types[name], attr=name, loc=self.loc(node),
                    weak=self.var_weak[name])

    def intrinsic(self, name: str, t: T.Type, args=(), node=None, param=None) -> Expr:
        """An ``intrinsic`` node of a registered intrinsic, located at ``node``, with its
        static parameter ``param`` (of the class the declaration names)."""
        decl = lookup(name)  # an unregistered name is a bug of its typing rule: fail here
        if decl.param is None and param is not None or (
                decl.param is not None and not isinstance(param, decl.param)):
            raise TypeError(f"intrinsic {name}: static parameter {param!r}, declared "
                            f"{decl.param.__name__ if decl.param else 'none'}")
        return Expr("intrinsic", t, tuple(args), attr=name, loc=self.loc(node), param=param)

    # --- statements ------------------------------------------------------------------------------

    def _block(self, stmts) -> list:
        out = []
        for i, s in enumerate(stmts):
            if (i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                    and isinstance(s.value.value, str)):
                continue  # docstring
            r = self.visit(s)
            if r is None:
                continue
            if isinstance(r, list):
                out.extend(r)
            else:
                out.append(r)
        return out

    def visit_Pass(self, node):
        return None

    def visit_Raise(self, node):
        return raising.raise_statement(self, node)  # numba's debug-mode exceptions

    def visit_Assert(self, node):
        """Typed always; checked only under debug=True (kaiojit/intrinsics/assertion.py)."""
        cond = self.truth(self.expr(node.test), node.test)
        message = ""
        if node.msg is not None:
            msg = self.expr(node.msg)
            if msg.op != "const" or not isinstance(msg.type, T.StringType):
                self.error("the message of an assert in a kernel must be a string literal",
                           node.msg)
            message = msg.attr
        e = self.intrinsic("debug.assert", T.void, (cond,), node, param=message)
        return kir.ExprStmt(e, self.loc(node))

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a string used as a comment
        loop = ufunc_statement(self, node)  # np.sin(x, out): a loop over out (ufunc_calls.py)
        if loop is not None:
            return self._block(loop)
        e = self.expr(node.value)
        return kir.ExprStmt(e, self.loc(node))

    def visit_Assign(self, node):
        value = self.expr(node.value)
        if isinstance(value.type, T.StringType):
            self.error(STRING_ONLY_IN_PRINT, node.value)
        out = []
        for target in node.targets:
            out.extend(self._assign_to(target, value, node))
        return out

    def visit_AnnAssign(self, node):
        ann = self._resolve_type_annotation(node.annotation)
        if not isinstance(node.target, ast.Name):
            self.error("annotated assignment needs a plain name", node.target, UnsupportedError)
        name = node.target.id
        if name not in self.var_types:
            self.var_types[name], self.var_weak[name] = ann, False
            self.changed = True
        elif self.var_types[name] != ann:
            self.error(f"{name!r} is annotated {ann} but also holds {self.var_types[name]}", node)
        if node.value is None:
            return None
        return self._assign_to(node.target, self.expr(node.value), node)

    def _resolve_type_annotation(self, node):
        r = self.visit(node)
        if isinstance(r, PyObj) and isinstance(r.value, T.Type):
            return r.value
        np = numpy_if_imported()
        if (isinstance(r, PyObj) and isinstance(r.value, type) and np is not None
                and issubclass(r.value, np.generic)):
            return T.from_dtype(r.value)
        self.error("annotation is not a kaiojit type", node)

    def _assign_to(self, target, value: Expr, node) -> list:
        if isinstance(target, ast.Name):
            # shadowing a global name is allowed, as in Python
            return [self.assign_var(target.id, value, target)]
        field = records.field_target(self, target)  # r.x = v, a[i]['x'] = v
        if field is not None:
            return [records.set_field(self, field[0], field[1], value, node)]
        if isinstance(target, ast.Subscript):
            arr = self.expr(target.value)
            if not isinstance(arr.type, T.ArrayType):
                self.error(f"cannot assign into {type_words(arr.type)}", target.value)
            if arr.op == "constarray":
                self.error("a global NumPy array is a constant of the kernel (as numba freezes "
                           "it): it cannot be written; pass it as an argument instead",
                           target.value)
            indices = self.index_exprs(arr, target.slice, target)
            if len(indices) != arr.type.ndim:
                self.error(
                    f"assignment needs {arr.type.ndim} indices for a {arr.type.ndim}-d array, "
                    f"got {len(indices)}", target)
            if isinstance(value.type, T.RecordType) and value.type == arr.type.dtype:
                return [records.assign_record(self, arr, indices, value, node)]
            val = self._scalar_for_store(value, arr.type.dtype, node)
            return [kir.Store(arr, indices, val, self.loc(node))]
        if isinstance(target, ast.Tuple):
            if not isinstance(value.type, T.TupleType):
                self.error(f"cannot unpack {type_words(value.type)}", node)
            n = len(value.type.elements)
            if len(target.elts) != n:
                self.error(f"cannot unpack a tuple of {n} into {len(target.elts)} names", node)
            out = []
            if value.op == "tuple":
                tmp = value
            else:
                tmp_name = f"$tuple{target.lineno}_{target.col_offset}"
                out.append(self.assign_var(tmp_name, value, node))
                tmp = self.var_expr(tmp_name, node)
            items = [self.tuple_item(tmp, i) for i in range(n)]
            if value.op == "tuple" and len(items) > 1:
                # a, b = b, a: evaluate every item before assigning any
                tmps = []
                for i, item in enumerate(items):
                    tmp_name = f"$swap{target.lineno}_{target.col_offset}_{i}"
                    out.append(self.assign_var(tmp_name, item, node))
                    tmps.append(self.var_expr(tmp_name, node))
                items = tmps
            for elt, item in zip(target.elts, items):
                out.extend(self._assign_to(elt, item, node))
            return out
        self.error("cannot assign to this", target, UnsupportedError)

    def _scalar_for_store(self, value: Expr, dtype: T.ScalarType, node) -> Expr:
        if not isinstance(value.type, T.ScalarType):
            self.error(f"cannot store {type_words(value.type)} into an array of {dtype}", node)
        return self.coerce(value, dtype, node) if self.final else value

    def visit_AugAssign(self, node):
        op = BINOPS.get(type(node.op))
        if op is None:
            self.error("'@=' is not supported in kernels", node, UnsupportedError)
        target = node.target
        if isinstance(target, ast.Name):
            if target.id not in self.var_types:
                self.error(f"name {target.id!r} is used before it is assigned", target)
            cur = self.var_expr(target.id, target)
            new = self.binop(op, cur, self.expr(node.value), node)
            return self.assign_var(target.id, new, node)
        field = records.field_target(self, target)  # r.x += v
        if field is not None:
            rec, name = field
            cur = records.get_field(self, rec, name, target)
            return records.set_field(self, rec, name, self.binop(op, cur, self.expr(node.value),
                                                                 node), node)
        if isinstance(target, ast.Subscript):
            arr = self.expr(target.value)
            if not isinstance(arr.type, T.ArrayType):
                self.error(f"cannot assign into {type_words(arr.type)}", target.value)
            if arr.op == "constarray":
                self.error("a global NumPy array is a constant of the kernel (as numba freezes "
                           "it): it cannot be written; pass it as an argument instead",
                           target.value)
            indices = self.index_exprs(arr, target.slice, target)
            if len(indices) != arr.type.ndim:
                self.error(f"augmented assignment needs {arr.type.ndim} indices", target)
            cur = Expr("load", arr.type.dtype, (arr, *indices), loc=self.loc(target))
            new = self.binop(op, cur, self.expr(node.value), node)
            return kir.Store(arr, indices, self._scalar_for_store(new, arr.type.dtype, node),
                             self.loc(node))
        self.error("cannot assign to this", target, UnsupportedError)

    def visit_If(self, node):
        test = self.visit(node.test)
        if isinstance(test, PyObj) and test.value is None:  # `if flag:` of a None global
            test = Expr("const", T.bool_, attr=False, loc=self.loc(node.test))
        elif isinstance(test, PyObj):
            test = self.pyobj_to_expr(test, node.test)
        cond = self.truth(test, node.test)
        return kir.If(cond, self._block(node.body), self._block(node.orelse), self.loc(node))

    def visit_While(self, node):
        if node.orelse:
            return self._block(iteration.without_else(node))
        cond = self.truth(self.expr(node.test), node.test)
        self.loop_depth += 1
        body = self._block(node.body)
        self.loop_depth -= 1
        return kir.While(cond, body, self.loc(node))

    def visit_For(self, node):
        if node.orelse:
            return self._block(iteration.without_else(node))
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        if isinstance(fn, PyObj) and isinstance(fn.value, StaticRange):
            return static_for(self, node)  # unrolled here (kaiojit/frontend/unroll.py)
        if isinstance(fn, PyObj) and isinstance(fn.value, LiteralUnroll):
            return literal_for(self, node)
        if isinstance(fn, PyObj) and fn.value in (enumerate, zip):
            return self._block(iteration.indexed_loop(self, node))
        if not (isinstance(fn, PyObj) and fn.value is range):
            seq = self.visit(it)
            if isinstance(seq, Expr) and isinstance(seq.type, T.ArrayType):
                return self._block(iteration.indexed_loop(self, node))
            return self._for_over_tuple(node)
        if it.keywords or not 1 <= len(it.args) <= 3:
            self.error("range() takes 1 to 3 positional arguments", it)
        args = [self.expr(a) for a in it.args]
        for a, n in zip(args, it.args):
            if not (isinstance(a.type, T.ScalarType) and (a.type.is_int or a.type.is_bool)):
                self.error(f"range() needs integers, got {type_words(a.type)}", n)
        if len(args) == 3 and args[2].op == "const" and args[2].attr == 0:
            self.error("range() step must not be zero", it.args[2])  # Python's ValueError
        if len(args) == 1:
            args = [const_expr(0, self.loc(it)), args[0], const_expr(1, self.loc(it))]
        elif len(args) == 2:
            args.append(const_expr(1, self.loc(it)))
        t, weak = args[0].type, args[0].weak
        for a in args[1:]:
            t, weak = self.unify(t, weak, a.type, a.weak, "range()", self.loc(it))
        if not isinstance(node.target, ast.Name):
            self.error("the loop variable must be a plain name", node.target, UnsupportedError)
        name = node.target.id
        sample = Expr("var", t, attr=name, weak=weak)
        self.assign_var(name, sample, node.target)
        vt = self.var_types[name]
        if self.final:
            args = [self.coerce(a, vt, it) for a in args]
        self.loop_depth += 1
        body = self._block(node.body)
        self.loop_depth -= 1
        return kir.ForRange(name, args[0], args[1], args[2], body, self.loc(node))

    def _for_over_tuple(self, node):
        """``for v in (16, 8, 4):`` (any tuple of numbers): a loop over the tuple's indices
        whose body first picks the element, so break and continue keep their meaning; LLVM
        unrolls it and folds the picks when the tuple is constant."""
        it = node.iter
        seq = self.visit(it)
        if isinstance(seq, PyObj):
            if not isinstance(seq.value, tuple):
                self.error("kernels loop over range(...) or a tuple", it, UnsupportedError)
            seq = self.pyobj_to_expr(seq, it)
        if not isinstance(seq.type, T.TupleType):
            self.error(f"kernels loop over range(...) or a tuple, not {type_words(seq.type)}",
                       it, UnsupportedError)
        if not isinstance(node.target, ast.Name):
            self.error("the loop variable must be a plain name", node.target, UnsupportedError)
        items = [self.tuple_item(seq, i) for i in range(len(seq.type.elements))]
        if not items:
            return None
        for item in items:
            if not isinstance(item.type, T.ScalarType):
                self.error(f"a loop over a tuple needs numbers, got {type_words(item.type)}", it)
        t, weak = items[0].type, items[0].weak
        for item in items[1:]:
            t, weak = self.unify(t, weak, item.type, item.weak, "the tuple's elements",
                                 self.loc(it))
        where = f"{it.lineno}_{it.col_offset}"
        out = []
        if seq.op != "tuple" or not all(self_contained(i) for i in items):
            out.append(self.assign_var(f"$seq{where}", seq, it))  # evaluated once
            held = self.var_expr(f"$seq{where}", it)
            items = [self.tuple_item(held, i) for i in range(len(items))]
        index = f"$index{where}"
        self.assign_var(index, Expr("var", T.int64, attr=index), it)
        idx = self.var_expr(index, it)
        pick = items[-1]
        if self.final:
            items = [self.coerce(i, t, it) for i in items]
            pick = _progression(idx, items, t, self.loc(it)) or items[-1]
            for k in range(len(items) - 2, -1, -1) if pick is items[-1] else ():
                hit = Expr("cmp", T.bool_, (idx, Expr("const", T.int64, attr=k)), attr="==")
                pick = Expr("select", t, (hit, items[k], pick), loc=self.loc(it))
        first = self.assign_var(node.target.id, Expr(pick.op, t, pick.args, pick.attr,
                                                     pick.loc, weak), node.target)
        self.loop_depth += 1
        body = [first] + self._block(node.body)
        self.loop_depth -= 1
        bounds = [Expr("const", T.int64, attr=v) for v in (0, len(items), 1)]
        out.append(kir.ForRange(index, *bounds, body, self.loc(node), unrolled=True))
        return out

    def visit_PyValue(self, node):
        return PyObj(node.value)  # a Python object the loop rewrites put in (iteration.py)

    def visit_Break(self, node):
        if not self.loop_depth:
            self.error("'break' outside a loop", node)
        return kir.Break(self.loc(node))

    def visit_Continue(self, node):
        if not self.loop_depth:
            self.error("'continue' outside a loop", node)
        return kir.Continue(self.loc(node))

    def visit_Return(self, node):
        if self._return_loc is None:
            self._return_loc = self.loc(node)
        if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
            self.return_types.append((T.void, False))
            return kir.Return(None, self.loc(node))
        value = self.expr(node.value)
        if isinstance(value.type, (T.StringType, T.VoidType)):
            self.error(f"cannot return {type_words(value.type)}", node.value)
        self.return_types.append((value.type, value.weak))
        if self.final:
            ret = self.final_return
            if ret == T.void or any(t == T.void for t, _ in self.return_types):
                self.error("this function returns both a value and nothing", node)
            value = self.coerce(value, ret, node)
        return kir.Return(value, self.loc(node))


def _node_words(node: ast.AST) -> str:
    """``'a + b'`` (an expression, shortened) or ``a 'For' statement``, for the net's message."""
    if isinstance(node, ast.expr):
        text = " ".join(ast.unparse(node).split())
        return repr(text if len(text) <= 60 else text[:57] + "...")
    return f"a {type(node).__name__!r} statement"


def self_contained(e: Expr) -> bool:
    """A constant, or a tuple element that is one: picking it twice costs nothing."""
    return e.op == "const"


def type_function(pyfunc, src: FunctionSource, arg_types, is_kernel: bool, specialize_device,
                  options=None) -> kir.KFunction:
    """Type ``pyfunc`` for ``arg_types``: the typed IR, or a located CompileError. The IR is
    verified (``kir.verify``: under 1% of a compile), so a typing bug fails here, named."""
    try:
        kfunc = Typer(pyfunc, src, arg_types, is_kernel, specialize_device, options).run()
    except CompileError:
        raise
    except RecursionError:
        raise CompileError(f"{pyfunc.__qualname__}: recursion is not supported in kernels",
                           src.loc(src.node)) from None
    verify(kfunc)
    return kfunc
