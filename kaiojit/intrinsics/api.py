"""What an intrinsic family is written against: the one module ``kaiojit/intrinsics/*.py``
import from (besides the ground modules: types, errors, language, target, tma_host, linking).

A family declares its intrinsics (:class:`Intrinsic`, :func:`register`) with, for each, a
typing rule, lowerings and, where the cpu backend runs it block-synchronously, a block
lowering. Those receive the three contexts declared here as protocols, which say what a family
may use of the compiler's classes (the typer, a function lowering, the host's block lowering)
and nothing more:

* :class:`TypingContext` (``typer``): type operands, coerce them, make the intrinsic node,
  report located errors, keep per-family state for one compile (:func:`family_state`);
* :class:`LoweringContext` (``fl``): the LLVM builder, module and target, operand values;
* :class:`BlockContext` (``bl``): the cpu backend's block lowering of barriers and warp
  collectives (a loop over the block's threads around each split point).

The helpers families share (argument checks, LLVM types, conversions, inline PTX, the host's
context words and error records) are re-exported here, so a family's imports name one module
and a change of where a helper lives is one line here. ``tests/test_imports.py`` keeps it so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from llvmlite import ir

from ..errors import SourceLocation
from ..frontend.arguments import (
    call_args,
    const_int,
    const_shape,
    dtype_arg,
    float_type,
    scalar_arg,
)
from ..frontend.builtins import call_builtin, scalar_attribute
from ..frontend.values import PyObj, result_scalar, type_words
from ..kir import Expr
from ..kir.intrinsics import (
    ANY_TARGET,
    ARRAY,
    FLOAT,
    INT,
    PRINTABLE,
    SCALAR,
    Intrinsic,
    Kind,
    Operands,
    Same,
    register,
)
from ..lower import (cluster_host, cluster_ptx, complexinv, complexops, narrowfloat, tma_ptx,
                     wgmma_host)
from ..lower.arrays import array_slice, array_view, byte_strides, make_array
from ..lower.gpu_faults import add_site, fail_assert, record_fault
from ..lower.host import block_linear, counted_loop, ctx_word, ctx_word_ptr, record_error
from ..lower.host_warp import warp_exchange, warp_word
from ..lower.llvmtypes import BFLOAT, I1, I8, I16, I32, I64, PTR, ll_mem_type, ll_type
from ..lower.nvptx import SHARED, inline_asm
from ..lower.ops import compare, convert, math_call
from ..types import Type


class TypingContext(Protocol):
    """The typer, as a typing rule sees it (``kaiojit.frontend.typer.Typer``)."""

    pyfunc: Any  # the Python function being compiled
    family_states: dict[str, Any]  # per-family compile state: use :func:`family_state`

    def expr(self, node: Any) -> Expr: ...
    def coerce(self, e: Expr, t: Type, node: Any) -> Expr: ...
    def truth(self, e: Expr, node: Any) -> Expr: ...
    def intrinsic(self, name: str, t: Type, args: Any = (), node: Any = None) -> Expr: ...
    def loc(self, node: Any) -> SourceLocation | None: ...
    def error(self, msg: str, node: Any, cls: type | None = None) -> Any: ...
    def visit(self, node: Any) -> Any: ...
    def index_exprs(self, node: Any) -> Any: ...
    def tuple_item(self, e: Expr, i: int, node: Any) -> Expr: ...


class LoweringContext(Protocol):
    """A function lowering, as an intrinsic's lowering sees it
    (``kaiojit.lower.codegen.FunctionLowering`` and the host's subclass)."""

    builder: ir.IRBuilder
    mod: Any  # the module lowering: ``declare``, ``add_site``, globals
    target: Any  # the target: ``name``, ``arch`` (GPU), its hooks
    llfunc: ir.Function
    options: Any

    def expr(self, e: Expr) -> ir.Value: ...
    def element_pointer(self, array: Expr, indices: Any, at: Any = None) -> ir.Value: ...
    def alloca(self, ty: ir.Type, count: Any = None, name: str = "") -> ir.Value: ...
    def thread_linear(self) -> ir.Value: ...
    def array_name(self, e: Expr) -> str | None: ...


class BlockContext(Protocol):
    """The cpu backend's block-synchronous lowering (``kaiojit.lower.host_block``), as a
    barrier's or warp collective's block lowering sees it."""

    builder: ir.IRBuilder
    mod: Any
    llfunc: ir.Function
    ctx: ir.Value  # the launch context words
    n: ir.Value  # threads in the block
    vars: dict
    exit_bb: ir.Block

    def expr(self, e: Expr) -> ir.Value: ...
    def barrier(self, target: Any, e: Expr) -> None: ...
    def thread_loop(self, *args: Any, **kwargs: Any) -> Any: ...
    def per_thread(self, *args: Any, **kwargs: Any) -> Any: ...
    def assign_each(self, *args: Any, **kwargs: Any) -> Any: ...
    def vote(self, *args: Any, **kwargs: Any) -> Any: ...
    def shuffle(self, *args: Any, **kwargs: Any) -> Any: ...
    def active(self, *args: Any, **kwargs: Any) -> Any: ...
    def alloca(self, ty: ir.Type, count: Any = None, name: str = "") -> ir.Value: ...


S = TypeVar("S")


def family_state(typer: TypingContext, family: str, make: Callable[[], S]) -> S:
    """The state ``family`` keeps for one compile (one typer): made by ``make`` on first use.
    A family's state lives here, never in attributes it sets on the typer."""
    states = typer.family_states
    state = states.get(family)
    if state is None:
        state = states[family] = make()
    return state


__all__ = [
    "ANY_TARGET", "ARRAY", "BFLOAT", "FLOAT", "I1", "I8", "I16", "I32", "I64", "INT", "PRINTABLE",
    "PTR", "SCALAR", "SHARED", "BlockContext", "Expr", "Intrinsic", "Kind", "LoweringContext",
    "Operands", "PyObj", "Same", "TypingContext", "add_site", "array_slice", "array_view",
    "byte_strides", "make_array",
    "block_linear", "call_args", "call_builtin", "cluster_host", "cluster_ptx", "compare",
    "complexinv", "complexops", "const_int",
    "const_shape", "convert", "counted_loop", "ctx_word", "ctx_word_ptr", "dtype_arg",
    "fail_assert", "family_state", "float_type", "inline_asm", "ll_mem_type", "ll_type",
    "math_call", "narrowfloat", "record_error", "record_fault", "register", "result_scalar", "scalar_arg",
    "scalar_attribute", "tma_ptx", "type_words", "warp_exchange", "warp_word", "wgmma_host",
]
