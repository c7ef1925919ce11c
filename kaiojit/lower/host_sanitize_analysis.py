"""The checked variant's compile-time facts about a kernel: where each array lives, which
array parameters need no racecheck, which shared reads need no race record, how big a shadow
entry is, and whether the kernel can be checked at all (``host_sanitize.py`` uses them)."""

from __future__ import annotations

from .. import kir
from .. import types as T
from ..kir import Expr
from ..kir.analysis import is_thread_index, written_params
from ..kir.intrinsics import lookup

QUIET_READ_ONLY, QUIET_PRIVATE = 1, 2  # see quiet_params
QUIET_INTERVAL = 4  # a shared read no write shares a barrier interval with (initcheck only)
# intrinsics that write memory the shadow does not see: shared memory is then not initchecked
_UNTRACKED_WRITERS = ("tc.", "tma.", "wgmma.", "mbarrier.", "foreign.", "cluster.")
GLOBAL, SHARED, LOCAL, CONST, UNKNOWN = "global", "shared", "local", "const", "unknown"
# another block's shared memory (kj.cluster.map_shared_rank): its shadow is that block's, so
# accesses through it are memchecked only
CLUSTER_SHARED = "cluster shared"


# --- where an array lives ------------------------------------------------------------------------

def array_spaces(kfunc: kir.KFunction) -> dict[str, str]:
    """Each array variable's memory space (``GLOBAL`` ... ``UNKNOWN``): a kernel's array
    parameters are global, ``kj.shared``/``kj.local``/constant arrays are what they are, views
    keep their array's space, a variable assigned from several spaces is unknown."""
    params = dict(kfunc.params)
    assigned: dict[str, list[Expr]] = {}
    for s in kir.walk_stmts(kfunc.body):
        if isinstance(s, kir.Assign) and isinstance(s.value.type, T.ArrayType):
            assigned.setdefault(s.target, []).append(s.value)
    spaces: dict[str, str] = {}
    for name, t in params.items():
        if isinstance(t, T.ArrayType):
            spaces[name] = GLOBAL if kfunc.is_kernel else UNKNOWN
    for _ in range(4):  # chains of assignments settle in a few rounds
        for name, values in assigned.items():
            found = {space_of(v, spaces) for v in values}
            if name in params:
                found.add(spaces[name])
            spaces[name] = found.pop() if len(found) == 1 else UNKNOWN
    return spaces


def space_of(e: Expr, spaces: dict[str, str]) -> str:
    op = e.op
    if op == "shared":
        return SHARED
    if op == "local":
        return LOCAL
    if op == "constarray":
        return CONST
    if op in ("var", "param"):
        return spaces.get(e.attr, UNKNOWN)
    if op == "intrinsic" and e.attr == "cluster.map_shared_rank":
        return CLUSTER_SHARED
    if op == "intrinsic" and e.args and lookup(e.attr).view:
        return space_of(e.args[0], spaces)
    if op == "reuse":
        return space_of(e.args[0], spaces)
    if op == "select":
        a, b = space_of(e.args[1], spaces), space_of(e.args[2], spaces)
        return a if a == b else UNKNOWN
    return UNKNOWN


def quiet_params(kfunc: kir.KFunction) -> dict[str, int]:
    """A kernel's array parameters whose accesses need no racecheck when its arguments do not
    overlap (the runtime's ``SAN_QUIET`` bits say so per launch): ``QUIET_READ_ONLY`` for an
    array the kernel never writes, ``QUIET_PRIVATE`` for one it only indexes as ``a[i]`` with
    ``i`` the thread's index in a one-dimensional launch (``kj.grid(1)``): no two threads
    touch one element."""
    if not kfunc.is_kernel:
        return {}
    arrays = {n for n, t in kfunc.params if isinstance(t, T.ArrayType)}
    stmts = list(kir.walk_stmts(kfunc.body))
    values: dict[str, list[Expr]] = {}
    for st in stmts:
        if isinstance(st, kir.Assign):
            values.setdefault(st.target, []).append(st.value)
        elif isinstance(st, kir.ForRange):
            values.setdefault(st.var, []).append(Expr("const", T.int64, attr=0))
    arrays -= set(values)  # a parameter assigned another array: not followed
    index_vars = {v for v, vs in values.items() if all(is_thread_index(e) for e in vs)}
    uses = dict.fromkeys(arrays, 0)
    private = dict.fromkeys(arrays, 0)

    def at_thread(arr: Expr, indices) -> None:
        if arr.op == "var" and arr.attr in arrays and len(indices) == 1 and \
                indices[0].op == "var" and indices[0].attr in index_vars:
            private[arr.attr] += 1

    for st in stmts:
        if isinstance(st, kir.Store):
            at_thread(st.array, st.indices)
        for top in kir.stmt_exprs(st):
            for e in kir.walk_expr(top):
                if e.op == "var" and e.attr in arrays:
                    uses[e.attr] += 1
                elif e.op == "load":
                    at_thread(e.args[0], e.args[1:])
    written = written_params(kfunc)
    quiet = {}
    for name in arrays:
        bits = (QUIET_READ_ONLY if name not in written else 0) | \
            (QUIET_PRIVATE if uses[name] == private[name] else 0)
        if bits:
            quiet[name] = bits
    return quiet


def quiet_reads(kfunc: kir.KFunction, spaces: dict[str, str]) -> set[int]:
    """The ids of the kernel's shared-memory loads that need no racecheck
    (``host_sanitize_intervals``)."""
    from .host_sanitize_intervals import quiet_shared_reads

    return quiet_shared_reads(kfunc, spaces, space_of)


def access_quiet(fl, arr: Expr, load: Expr | None = None) -> int:
    """The quiet bits of an access of ``arr`` (by ``load``, for a load): its parameter's
    (``quiet_params``), and ``QUIET_INTERVAL`` for a read no write shares an interval with."""
    bits = fl.san_quiet.get(arr.attr, 0) if arr.op == "var" else 0
    if load is not None and id(load) in fl.san_quiet_reads:
        bits |= QUIET_INTERVAL
    return bits


MAX_CHECKED_ACCESSES = 1000  # a kernel with more (unrolled) array accesses runs unchecked


def access_count(kfunc: kir.KFunction) -> int:
    """The array loads and stores of a kernel and the device functions it calls."""
    n = 0
    for f in kir.walk_functions(kfunc):
        n += sum(isinstance(s, kir.Store) for s in kir.walk_stmts(f.body))
        n += sum(e.op == "load" for e in kir.function_exprs(f))
    return n


def shared_initcheck(kfunc: kir.KFunction) -> bool:
    """Whether every write of shared memory goes through a plain store or an atomic (else a
    read of what a tensor copy wrote would look uninitialized)."""
    return not any(e.op == "intrinsic" and e.attr.startswith(_UNTRACKED_WRITERS)
                   for f in kir.walk_functions(kfunc) for e in kir.function_exprs(f))


def shadow_granule(kfunc: kir.KFunction) -> int:
    """log2 of the bytes one shared-shadow entry covers: the largest power of two (up to 8)
    that divides the element size of every array the kernel and its device functions index,
    so that two elements never share an entry (a smaller shadow: fewer cache misses)."""
    granule = 3
    for f in kir.walk_functions(kfunc):
        arrays = [s.array for s in kir.walk_stmts(f.body) if isinstance(s, kir.Store)]
        arrays += [e.args[0] for e in kir.function_exprs(f)
                   if e.op == "load" or (e.op == "intrinsic" and e.args and
                                         isinstance(e.args[0].type, T.ArrayType))]
        for a in arrays:
            size = getattr(getattr(a.type, "dtype", None), "itemsize", 1) or 1
            while granule and size % (1 << granule):
                granule -= 1
    return granule


__all__ = ["CLUSTER_SHARED", "CONST", "GLOBAL", "LOCAL", "MAX_CHECKED_ACCESSES", "QUIET_INTERVAL", "QUIET_PRIVATE",
           "QUIET_READ_ONLY", "SHARED", "UNKNOWN", "access_count", "access_quiet",
           "array_spaces", "quiet_params", "quiet_reads", "shadow_granule", "shared_initcheck",
           "space_of"]
