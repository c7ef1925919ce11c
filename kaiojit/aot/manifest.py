"""The manifest of an exported artifact: what was exported, for which targets, and how.

One JSON file, ``manifest.json``, beside the images. Each entry is one kernel compiled for one
signature: its entry symbol, parameter layout (the 8-byte slots every kernel parameter takes,
``kaiojit.runtime.slots``), static shared memory, whether it synchronizes its grid, the options
it was compiled with, and its images: a cubin per arch and the PTX of each arch (nvptx), or
the shared library holding its host code (host). The loader and the C launcher read nothing
else, so an artifact is usable without the kernel's source.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from kaiojit.errors import KaiojitError

FORMAT = 3  # 2: autotuned kernels (Entry.autotune, Manifest.autotuned); 3: coarse entries,
# the cubins' compiler (Entry.coarse_*, Manifest.compiler*)
MANIFEST = "manifest.json"


class ArtifactError(KaiojitError):
    """An exported artifact that cannot be used here: missing, stale or without a kernel or
    signature or arch asked for."""


class ExportError(KaiojitError):
    """A kernel that cannot be exported as asked (named, with why)."""


# what a bad call of the AOT API raises: shown at the user's line (kaiojit.errors.user_facing)
USER_ERRORS = (KaiojitError, TypeError, ValueError)


@dataclass(slots=True)
class Entry:
    """One kernel compiled for one signature."""

    kernel: str              # the Python name
    symbol: str              # the entry symbol in the images
    c_name: str              # the C launch function's name
    signature: str           # as kaiojit prints it, e.g. "void(float32[::1], int32)"
    arg_names: list[str]
    param_kinds: list[str]   # one per kernel parameter (kaiojit.types.param_parts, in order)
    first_slot: list[int]    # each parameter's first 8-byte slot
    slot_count: int
    static_shared_bytes: int
    cooperative: bool
    options: dict
    cubins: dict[str, str] = field(default_factory=dict)   # arch -> file (nvptx)
    ptx: dict[str, str] = field(default_factory=dict)      # arch -> file (nvptx)
    uses_block_mode: bool = False                          # host
    sites: list[dict] = field(default_factory=list)        # host: where a fault came from
    autotune: dict = field(default_factory=dict)  # an autotuned kernel's: index, call_signature
    # nvptx: the kernel's coarse entry (kaiojit/kir/coarsen.py), which the JIT launches for
    # grids of KAIOJIT_COARSE_MIN_THREADS threads or more; "" where it has none
    coarse_symbol: str = ""
    coarse_cubins: dict[str, str] = field(default_factory=dict)  # arch -> file
    coarse_ptx: dict[str, str] = field(default_factory=dict)     # arch -> file
    # the array parameters the kernel may write (None: not known, any): a read-only array
    # passed for another is taken, as the JIT's kernel takes it
    written_arrays: list[str] | None = None


@dataclass(slots=True)
class Manifest:
    target: str                 # "nvptx" or "host"
    kaiojit_version: str
    entries: list[Entry]
    archs: list[str] = field(default_factory=list)
    library: str = ""           # host: the shared library's file name
    host_triple: str = ""       # host: what the library was compiled for
    autotuned: dict = field(default_factory=dict)  # kernel -> configs and the tuner's choices
    compiler: str = ""          # nvptx: what made the cubins, "ptxas" or "driver" (aot/cubin.py)
    compiler_version: str = ""  # e.g. "ptxas 13.0 (V13.0.88)", "CUDA 13.0 driver"
    format: int = FORMAT

    def write(self, directory: str) -> str:
        path = os.path.join(directory, MANIFEST)
        with open(path, "w") as f:
            json.dump(asdict(self), f, indent=1, sort_keys=True)
        return path

    @staticmethod
    def read(directory: str, expected_version: str) -> Manifest:
        path = os.path.join(directory, MANIFEST)
        try:
            with open(path) as f:
                raw = json.load(f)
        except FileNotFoundError:
            raise ArtifactError(f"{directory!r} is not a kaiojit export: it has no "
                                f"{MANIFEST}") from None
        except (OSError, ValueError) as e:
            raise ArtifactError(f"{path}: cannot read the manifest ({e})") from None
        if raw.get("format") != FORMAT:
            raise ArtifactError(f"{path}: manifest format {raw.get('format')!r}, this kaiojit "
                                f"reads format {FORMAT}; export the kernels again")
        if raw.get("kaiojit_version") != expected_version:
            raise ArtifactError(
                f"{path} was exported by kaiojit {raw.get('kaiojit_version')}, this is kaiojit "
                f"{expected_version}: export the kernels again with this version (the parameter "
                "layout and host ABI may differ between versions)")
        try:
            entries = [Entry(**e) for e in raw.pop("entries")]
            return Manifest(entries=entries, **raw)
        except TypeError as e:
            raise ArtifactError(f"{path}: malformed manifest ({e})") from None
