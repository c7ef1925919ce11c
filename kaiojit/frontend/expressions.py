"""Typing of expressions: the visit methods of :class:`kaiojit.frontend.typer.Typer` for
names, constants, operators, comparisons, subscripts and calls, kept apart from statements."""

from __future__ import annotations

import ast
import builtins as py_builtins
import enum

from .. import types as T
from ..errors import UnsupportedError
from ..kir import Expr
from ..kir.analysis import is_pure
from . import records
from .raising import checked_divisor, checked_tuple_index
from .recursion import self_reference
from .values import (
    INT_LITERAL_RANGE,
    PyObj,
    const_expr,
    convert_const,
    describe,
    exact_int_result,
    fold_binop,
    is_constant_value,
    result_scalar,
    type_words,
)

BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^",
}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class ExpressionTyping:
    """Mixin of :class:`Typer`: each ``visit_<Expr>`` returns a typed IR expression (or a
    :class:`PyObj` for names that resolve to Python objects)."""

    def visit_Constant(self, node):
        v = node.value
        if isinstance(v, str):
            return Expr("const", T.string, attr=v, loc=self.loc(node))
        if v is None:
            self.error("None is not a value in kernels", node, UnsupportedError)
        if not isinstance(v, (bool, int, float, complex)):
            self.error(f"{v!r} is not a value in kernels", node, UnsupportedError)
        if type(v) is int and not INT_LITERAL_RANGE[0] <= v < INT_LITERAL_RANGE[1]:
            self.error("integer literal out of range: kernels hold integers of 64 bits (int64, "
                       "or uint64 for those past int64)", node)
        return const_expr(v, self.loc(node))

    def visit_Name(self, node):
        name = node.id
        if name in self.var_types:
            return self.var_expr(name, node)
        if name in self.namespace:
            return PyObj(self.namespace[name])
        if hasattr(py_builtins, name):
            return PyObj(getattr(py_builtins, name))
        if name in _assigned_names(self.src.node):
            self.error(f"name {name!r} is used before it is assigned", node)
        itself = self_reference(self.pyfunc, name)  # typed at decoration, before it is bound
        if itself is not None:
            return PyObj(itself)
        self.error(f"name {name!r} is not defined", node)

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        if isinstance(base, PyObj):
            try:
                return PyObj(getattr(base.value, node.attr))
            except AttributeError:
                self.error(f"{describe(base.value)} has no attribute {node.attr!r}", node)
        from .builtins import value_attribute
        return value_attribute(self, base, node.attr, node)

    def visit_Tuple(self, node):
        elts = tuple(self.expr(e) for e in node.elts)
        for e, n in zip(elts, node.elts):
            if isinstance(e.type, (T.StringType, T.VoidType)):
                self.error(f"a tuple cannot hold {type_words(e.type)}", n)
        return Expr("tuple", T.TupleType(tuple(e.type for e in elts)), elts, loc=self.loc(node),
                    weak=all(e.weak for e in elts))

    def visit_BinOp(self, node):
        op = BINOPS.get(type(node.op))
        if op is None:
            self.error("'@' is not supported in kernels", node, UnsupportedError)
        return self.binop(op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: str, a: Expr, b: Expr, node) -> Expr:
        for e, side in ((a, node.left if hasattr(node, "left") else node),
                        (b, node.right if hasattr(node, "right") else node)):
            if not isinstance(e.type, T.ScalarType):
                if op == "+" and isinstance(a.type, T.TupleType) and isinstance(b.type, T.TupleType):
                    items = tuple(self.tuple_item(a, i) for i in range(len(a.type.elements)))
                    items += tuple(self.tuple_item(b, i) for i in range(len(b.type.elements)))
                    return Expr("tuple", T.TupleType(tuple(i.type for i in items)), items,
                                loc=self.loc(node))
                self.error(
                    f"unsupported operand types for {op}: {type_words(a.type)} and "
                    f"{type_words(b.type)}", node)
        rt = result_scalar(a.type, a.weak, b.type, b.weak)
        weak = a.weak and b.weak
        if rt.is_complex and op in ("//", "%", "<<", ">>", "&", "|", "^"):
            self.error(f"{op} is not defined for complex numbers ({a.type} and {b.type})", node)
        if op in ("<<", ">>", "&", "|", "^"):
            if rt.is_float:
                self.error(f"{op} needs integers, got {a.type} and {b.type}", node)
            if a.type.is_bool and b.type.is_bool and op in "&|^":
                rt = T.bool_
        elif rt.is_bool:
            rt = T.int64  # arithmetic on bools counts in integers, as Python does
        operand_t = rt
        if op == "/" and not (rt.is_float or rt.is_complex):
            operand_t, rt = T.float64, T.float64
        if op == "**" and rt.is_int and b.op == "const" and b.attr < 0:
            self.error("an integer to a negative integer power is not an integer", node)
        if op in ("<<", ">>"):
            operand_t = rt
        if weak and rt.is_int and a.op == b.op == "const" and isinstance(a.attr, int) \
                and isinstance(b.attr, int):
            exact = exact_int_result(op, a.attr, b.attr)
            if exact is not None and not INT_LITERAL_RANGE[0] <= exact < INT_LITERAL_RANGE[1]:
                self.error(f"the integer constant {op} gives a value out of range: kernels hold "
                           "integers of 64 bits (int64, or uint64 for those past int64)", node)
        a2, b2 = self.coerce(a, operand_t, node), self.coerce(b, operand_t, node)
        if op in ("/", "//", "%"):  # under debug=True a zero divisor raises
            b2 = checked_divisor(self, b2, op, node)
        folded = fold_binop(op, a2, b2, rt)
        if folded is not None:
            folded.weak = weak
            folded.loc = self.loc(node)
            return folded
        return Expr("binop", rt, (a2, b2), attr=op, loc=self.loc(node), weak=weak)

    def visit_UnaryOp(self, node):
        e = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return Expr("not", T.bool_, (self.truth(e, node.operand),), loc=self.loc(node))
        if not isinstance(e.type, T.ScalarType):
            self.error(f"bad operand type for unary operator: {type_words(e.type)}", node)
        if isinstance(node.op, ast.UAdd):
            return e
        op = "-" if isinstance(node.op, ast.USub) else "~"
        t = e.type
        if op == "~" and (t.is_float or t.is_complex):
            self.error(f"~ needs an integer, got {t}", node)
        if t.is_bool and op == "-":
            t = T.int64
            e = self.coerce(e, t, node)
        if e.op == "const" and op == "-":
            return Expr("const", t, attr=convert_const(-e.attr, t), loc=self.loc(node), weak=e.weak)
        return Expr("unop", t, (e,), attr=op, loc=self.loc(node), weak=e.weak)

    def truth(self, e: Expr, node) -> Expr:
        """A value as a condition (Python truthiness of scalars)."""
        if e.type == T.bool_:
            return e
        if isinstance(e.type, T.ScalarType):
            zero = Expr("const", e.type, attr=convert_const(0, e.type))
            return Expr("cmp", T.bool_, (e, zero), attr="!=", loc=e.loc)
        self.error(f"{type_words(e.type)} cannot be used as a condition", node)

    def visit_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.truth(self.expr(v), v) for v in node.values]
        out = values[0]
        for v in values[1:]:
            out = Expr(op, T.bool_, (out, v), loc=self.loc(node))
        return out

    def visit_Compare(self, node):
        """``a < b``; a chain ``a < b <= c`` is ``a < b and (b <= c)``, nested to the right, so
        each middle operand (a ``reuse`` node when it is not pure: evaluated once, as Python
        does) is first evaluated in the comparison on its left, which dominates the rest of
        the chain; a false comparison skips the operands after it (Python's short circuit)."""
        folded = _enum_comparison(self, node)
        if folded is not None:
            return folded
        left = self.expr(node.left)
        left_node = node.left
        chained = len(node.ops) > 1
        cmps = []
        for op_node, right_node in zip(node.ops, node.comparators):
            op = CMPOPS.get(type(op_node))
            if op is None:
                what = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
                self.error(f"'{what.get(type(op_node), '?')}' is not supported in kernels: "
                           "compare numbers with ==, !=, <, <=, >, >=", node, UnsupportedError)
            right = self.expr(right_node)
            if chained and right_node is not node.comparators[-1] and not is_pure(right):
                right = Expr("reuse", right.type, (right,), loc=right.loc, weak=right.weak)
            for e, n in ((left, left_node), (right, right_node)):
                if not isinstance(e.type, T.ScalarType):
                    self.error(f"cannot compare {type_words(e.type)}", n)
            cmps.append(self.compare_pair(op, left, right, node))
            left, left_node = right, right_node
        out = cmps[-1]
        for cmp in reversed(cmps[:-1]):
            out = Expr("and", T.bool_, (cmp, out), loc=self.loc(node))
        return out

    def compare_pair(self, op: str, left: Expr, right: Expr, node) -> Expr:
        """One comparison of a (possibly chained) comparison, in the operands' common type."""
        if _mixed_sign_64(left, right):
            return self.exact_mixed_compare(op, left, right, node)
        t = result_scalar(left.type, left.weak, right.type, right.weak)
        if t.is_complex and op not in ("==", "!="):
            self.error(f"complex numbers have no order: {op} of {left.type} and "
                       f"{right.type}", node)
        return Expr("cmp", T.bool_, (self.coerce(left, t, node), self.coerce(right, t, node)),
                    attr=op, loc=self.loc(node))

    def exact_mixed_compare(self, op: str, left: Expr, right: Expr, node) -> Expr:
        """uint64 against a signed integer, by value as NumPy 2 compares them (their common
        type, float64, would round both): a negative signed side is the smaller, otherwise
        both compare as uint64."""
        loc = self.loc(node)
        signed_left = left.type.kind == "i"
        if signed_left:
            left = Expr("reuse", left.type, (left,), loc=left.loc)
        else:
            right = Expr("reuse", right.type, (right,), loc=right.loc)
        signed = left if signed_left else right
        negative = Expr("cmp", T.bool_, (self.coerce(signed, T.int64, node),
                                         Expr("const", T.int64, attr=0, loc=loc)), attr="<",
                        loc=loc)
        unsigned = Expr("cmp", T.bool_, (self.coerce(left, T.uint64, node),
                                         self.coerce(right, T.uint64, node)), attr=op, loc=loc)
        less = {"<": True, "<=": True, ">": False, ">=": False}
        if op in less:
            when_negative = less[op] if signed_left else not less[op]
        else:
            when_negative = op == "!="
        # straight-line (no select or and/or: a branch would leave a reused operand computed
        # where a later comparison of a chain cannot see it); the unsigned comparison first,
        # so the operands are evaluated left to right (either may have effects)
        if when_negative:
            return Expr("binop", T.bool_, (unsigned, negative), attr="|", loc=loc)
        return Expr("binop", T.bool_, (unsigned, Expr("not", T.bool_, (negative,), loc=loc)),
                    attr="&", loc=loc)

    def visit_IfExp(self, node):
        cond = self.truth(self.expr(node.test), node.test)
        a, b = self.expr(node.body), self.expr(node.orelse)
        t, weak = self.unify(a.type, a.weak, b.type, b.weak, "the two branches of 'x if c else y'",
                             self.loc(node))
        return Expr("select", t, (cond, self.coerce(a, t, node), self.coerce(b, t, node)),
                    loc=self.loc(node), weak=weak)

    def visit_Subscript(self, node):
        held = self.visit(node.value)
        if isinstance(held, PyObj) and isinstance(held.value, enum.EnumMeta):  # Color["red"]
            key = self.expr(node.slice)
            if key.op != "const" or key.attr not in held.value.__members__:
                self.error(f"{held.value.__name__}[...] takes the name of one of its members, "
                           "a string literal", node.slice)
            return PyObj(held.value[key.attr])
        if isinstance(held, PyObj) and isinstance(held.value, tuple) \
                and not is_constant_value(held.value):  # a global tuple of arrays (or more)
            return PyObj(held.value[self.const_tuple_index(held.value, node.slice)])
        base = self.pyobj_to_expr(held, node.value) if isinstance(held, PyObj) else held
        if isinstance(base.type, T.TupleType):
            idx = self.visit(node.slice)
            if isinstance(idx, PyObj):
                idx = self.pyobj_to_expr(idx, node.slice)
            if idx.op != "const" or not isinstance(idx.attr, int):
                return self.tuple_at(base, idx, node)
            n = len(base.type.elements)
            i = idx.attr
            if not -n <= i < n:
                self.error(f"tuple index {i} out of range for a tuple of {n}", node.slice)
            return self.tuple_item(base, i % n)
        if isinstance(base.type, T.RecordType):  # r['x']
            return records.get_field(self, base, records.field_name(self, base.type, node.slice),
                                     node)
        if not isinstance(base.type, T.ArrayType):
            self.error(f"{type_words(base.type)} cannot be indexed", node.value)
        if _has_slice(node.slice):
            return self.array_slice(base, node)
        indices = self.index_exprs(base, node.slice, node)
        at = base.type
        if len(indices) > at.ndim:
            self.error(f"too many indices for a {at.ndim}-d array: {len(indices)}", node)
        if len(indices) == at.ndim and isinstance(at.dtype, T.RecordType):
            return records.element_ref(self, base, indices, node)
        if len(indices) == at.ndim:
            return Expr("load", at.dtype, (base, *indices), loc=self.loc(node))
        # a[i] of a 2-d array: a view of the remaining dimensions
        layout = "C" if at.layout == "C" else "A"
        vt = T.ArrayType(at.dtype, at.ndim - len(indices), layout)
        return self.intrinsic("array.view", vt, (base, *indices), node)

    def const_tuple_index(self, items: tuple, node) -> int:
        """The constant index ``node`` of a Python tuple of ``items`` (its items need not be
        kernel values: they are picked while typing)."""
        idx = self.expr(node)
        n = len(items)
        if idx.op != "const" or type(idx.attr) is not int:
            self.error("a tuple of arrays (or of other objects) is indexed by a constant",
                       node)
        if not -n <= idx.attr < n:
            self.error(f"tuple index {idx.attr} out of range for a tuple of {n}", node)
        return idx.attr % n

    def tuple_at(self, base: Expr, idx: Expr, node) -> Expr:
        """``t[i]`` at a run-time index ``i`` (numba's UniTuple indexing): the items, of one
        type once unified, picked by a chain of selects (``i`` from ``-n``, as Python; an
        index out of range gives the last item, as numba's, or under debug=True raises
        numba's IndexError)."""
        if not (isinstance(idx.type, T.ScalarType) and idx.type.kind in "iu"):
            self.error(f"a tuple index must be an integer, got {type_words(idx.type)}",
                       node.slice)
        n = len(base.type.elements)
        if n == 0:
            self.error("index of an empty tuple", node)
        if base.op not in ("tuple", "var"):
            self.error("a tuple indexed at a run-time index must be a name or a tuple "
                       "display", node.value)
        items = [self.tuple_item(base, i) for i in range(n)]
        t, weak = items[0].type, items[0].weak
        for item in items[1:]:
            if not isinstance(item.type, T.ScalarType) or not isinstance(t, T.ScalarType):
                if item.type != t:
                    self.error("a tuple indexed at a run-time index must hold items of one "
                               f"type, not {type_words(base.type)}", node.value)
                continue
            t, weak = self.unify(t, weak, item.type, item.weak, "the tuple's items",
                                 self.loc(node))
        loc = self.loc(node)
        i = self.coerce(idx, T.int64, node) if idx.type != T.int64 else idx
        i = checked_tuple_index(self, i, n, node)  # under debug=True: IndexError
        pick = self.coerce(items[-1], t, node)
        for k in range(n - 2, -1, -1):
            hit = Expr("binop", T.bool_, (
                Expr("cmp", T.bool_, (i, Expr("const", T.int64, attr=k)), attr="=="),
                Expr("cmp", T.bool_, (i, Expr("const", T.int64, attr=k - n)), attr="==")),
                attr="|", loc=loc)
            pick = Expr("select", t, (hit, self.coerce(items[k], t, node), pick), loc=loc)
        if n == 1 and i.op == "intrinsic":  # the debug check is evaluated though no pick needs i
            hit = Expr("cmp", T.bool_, (i, Expr("const", T.int64, attr=0)), attr="==")
            pick = Expr("select", t, (hit, pick, pick), loc=loc)
        pick.weak = weak
        return pick

    def array_slice(self, base: Expr, node) -> Expr:
        """``a[i, 1:n:2]``, ``a[:, j]``: a view (integers drop a dimension, slices keep one).

        The intrinsic's name carries the pattern, one entry per given index: ``i`` for an
        integer, ``s`` and three flags for a slice's start, stop and step (``s101``); its
        operands are the given integers and slice parts, in order."""
        at = base.type
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(elts) > at.ndim:
            self.error(f"too many indices for a {at.ndim}-d array: {len(elts)}", node)
        pattern, operands = [], []
        for el in elts:
            parts = (el.lower, el.upper, el.step) if isinstance(el, ast.Slice) else (el,)
            flags = ""
            for part in parts:
                if part is None:
                    flags += "0"
                    continue
                e = self.expr(part)
                if not (isinstance(e.type, T.ScalarType) and e.type.is_int):
                    self.error(f"array indices and slice bounds must be integers, got "
                               f"{type_words(e.type)}", part)
                if part is getattr(el, "step", None) and e.op == "const" and e.attr == 0:
                    self.error("slice step cannot be zero", part)
                operands.append(self.coerce(e, T.int64, part))
                flags += "1"
            pattern.append("s" + flags if isinstance(el, ast.Slice) else "i")
        kept = sum(p.startswith("s") for p in pattern) + at.ndim - len(elts)
        # a C array stays C when leading integers are followed by whole dimensions only
        first_slice = next(k for k, p in enumerate(pattern) if p != "i")
        c_view = at.layout == "C" and all(p == "s000" for p in pattern[first_slice:])
        vt = T.ArrayType(at.dtype, kept, "C" if c_view else "A")
        return self.intrinsic("array.slice:" + ",".join(pattern), vt, (base, *operands), node)

    def index_exprs(self, arr: Expr, slice_node, node) -> tuple[Expr, ...]:
        if _has_slice(slice_node):
            self.error("cannot assign to a slice in kernels; assign elements (a[i] = v)",
                       slice_node, UnsupportedError)
        idx = self.expr(slice_node)
        items = [self.tuple_item(idx, i) for i in range(len(idx.type.elements))] \
            if isinstance(idx.type, T.TupleType) else [idx]
        out = []
        for it in items:
            if not (isinstance(it.type, T.ScalarType) and it.type.is_int):
                self.error(f"array index must be an integer, got {type_words(it.type)}", slice_node)
            out.append(self.coerce(it, T.int64 if it.weak else it.type, node))
        return tuple(out)

    def visit_Call(self, node):
        fn = self.visit(node.func)
        if not isinstance(fn, PyObj):
            self.error(f"{type_words(fn.type)} is not callable", node.func)
        from .builtins import call_builtin
        return call_builtin(self, fn.value, node)


def _assigned_names(fdef: ast.FunctionDef) -> frozenset:
    """The names ``fdef`` assigns, kept on the node (an id-keyed table would hand a new tree
    at a freed tree's address the old tree's names)."""
    names = getattr(fdef, "_kaiojit_assigned", None)
    if names is None:
        names = frozenset(n.id for n in ast.walk(fdef)
                          if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        fdef._kaiojit_assigned = names
    return names


def _has_slice(node) -> bool:
    return isinstance(node, ast.Slice) or (
        isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts))


def _mixed_sign_64(a: Expr, b: Expr) -> bool:
    """uint64 meeting a signed integer (both typed): NumPy 2 compares those exactly."""
    if a.weak or b.weak or not all(isinstance(e.type, T.ScalarType) and e.type.is_int
                                   for e in (a, b)):
        return False
    kinds = {a.type.kind, b.type.kind}
    return kinds == {"i", "u"} and T.uint64 in (a.type, b.type)


_ENUM_FOLDS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
               ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}


def _enum_comparison(typer, node: ast.Compare) -> Expr | None:
    """``Color.red == Color.green``, ``a is Color.red``: members of plain Enum classes are
    constants of the kernel (numba's enum members), compared when the kernel is typed."""
    if len(node.ops) != 1 or type(node.ops[0]) not in _ENUM_FOLDS:
        return None
    sides = [typer.visit(n) for n in (node.left, node.comparators[0])]
    if not all(isinstance(r, PyObj) and isinstance(r.value, enum.Enum) for r in sides):
        return None
    value = _ENUM_FOLDS[type(node.ops[0])](sides[0].value, sides[1].value)
    return Expr("const", T.bool_, attr=bool(value), loc=typer.loc(node))
