"""How a compile is asked for: the user's options, and the environment read once.

``CompileOptions`` is what ``@kj.jit(...)`` takes; it is part of every cache key.
``Config`` is what the compiler dumps and where (``KAIOJIT_DUMP``, ``KAIOJIT_DUMP_DIR``);
``CONFIG`` reads them from the environment (:mod:`kaiojit.env`) at the first compile, so
nothing deeper in the compiler reads ``os.environ``. :func:`write_dump` writes a dump file
without following links: a fresh temporary file renamed into place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kaiojit import env

VERSION = "0.1.0"  # kaiojit's version: part of every cache key


@dataclass(frozen=True, slots=True)
class CompileOptions:
    fastmath: bool = False
    contract: bool = True  # False: no multiply-add is fused into an fma (bit-exact IEEE steps)
    debug: bool = False
    lineinfo: bool = False
    opt: int = 3
    max_registers: int | None = None
    cache: bool = False
    prefetch: bool = True  # L2 prefetches ahead of a streaming kernel's loads (nvptx.py)
    coarsen: bool = True  # a coarse entry beside an elementwise kernel (kir/coarsen.py)
    link: tuple[str, ...] = ()  # foreign device code to link (kaiojit/linking.py)
    # (max threads per block[, min blocks per SM[, max blocks per cluster]]): PTX's .maxntid,
    # .minnctapersm, .maxclusterrank (numba's and CUDA C's __launch_bounds__)
    launch_bounds: tuple[int, ...] = ()
    # a device function's inlining into its callers: "" as LLVM decides, "always" (LLVM's
    # alwaysinline: numba's inline="always" and forceinline=True), "never" (noinline)
    inline: str = ""


def launch_bounds_of(value) -> tuple[int, ...]:
    """``launch_bounds=`` as a tuple of 1 to 3 positive ints (an int is the first)."""
    if value is None:
        return ()
    bounds = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(bounds) > 3:
        raise ValueError(f"Got {len(bounds)} launch bounds: {bounds}. A maximum of three are "
                         "supported: (max_threads_per_block, min_blocks_per_sm, "
                         "max_blocks_per_cluster)")
    for b in bounds:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"launch bounds are positive integers, got {value!r}")
    return bounds


@dataclass(frozen=True, slots=True)
class Config:
    """Which stages the compiler dumps (their names), and into which directory."""

    dump: frozenset = frozenset()
    dump_dir: str = "."

    @staticmethod
    def from_env() -> Config:
        return Config(dump=env.get("KAIOJIT_DUMP"), dump_dir=env.get("KAIOJIT_DUMP_DIR"))


class _EnvConfig:
    """``CONFIG``: the :class:`Config` of the environment, read when a compile first asks."""

    __slots__ = ()

    @property
    def dump(self) -> frozenset:
        return env.get("KAIOJIT_DUMP")

    @property
    def dump_dir(self) -> str:
        return env.get("KAIOJIT_DUMP_DIR")


CONFIG: Config = _EnvConfig()  # type: ignore[assignment]


def write_dump(directory: str, filename: str, data: str | bytes) -> str:
    """Write one dump file into ``directory`` (made if missing) and return its path. The file
    is written under a fresh random name (``O_EXCL``, mode 0600) and renamed over
    ``filename``: a link planted under the predictable name is replaced, never written
    through. A ``directory`` naming a file is a one-line ``ValueError``."""
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        pass  # said below, as for a directory that exists but is a file
    if not os.path.isdir(directory):
        raise ValueError(f"KAIOJIT_DUMP_DIR={directory!r}: names a file, not a directory; "
                         f"takes {env.KNOBS['KAIOJIT_DUMP_DIR'].takes}")
    path = os.path.join(directory, filename)
    import tempfile  # only when dumping: not on every import of kaiojit

    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kaiojit-dump-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def cache_dir() -> str:
    """Where kaiojit keeps what it caches on disk (kernels, libdevice subsets)."""
    root = env.get("KAIOJIT_CACHE_DIR")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kaiojit")
