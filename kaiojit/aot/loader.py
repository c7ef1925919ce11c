"""Launch exported kernels without the JIT: ``kaiojit.aot.load(DIR)``.

The loader reads ``manifest.json`` and hands the runtime each signature's image as the
compiler would have: for the GPU the cubin matching the device (or the PTX, which the driver
compiles), for the host the entry in the exported shared library. ``kernel[grid, block](...)``
takes the same arguments as ``@kj.jit`` kernels. Neither llvmlite nor the kernels' source
module is imported.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from kaiojit import types as kt
from kaiojit.aot.manifest import ArtifactError, Entry, Manifest
from kaiojit.options import VERSION, CompileOptions
from kaiojit.overloads import accepts as _accepts
from kaiojit.target import HostImage


@dataclass(slots=True)
class ExportedImage:
    """One exported signature, shaped as the compiler's CompiledKernel is for the runtime."""

    name: str
    py_name: str
    signature: kt.Signature
    arg_names: tuple[str, ...]
    static_shared_bytes: int
    uses_sync: bool
    options: CompileOptions
    ptx: str = ""
    cubin: bytes | None = None
    image: Any = None
    fault_sites: tuple = ()
    coarse: Any = None
    arch: str = field(default="")  # the arch of the image chosen (nvptx)


def _arch_cc(arch: str) -> tuple[int, bool]:
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    return int(digits), arch.endswith("a")


def choose_arch(archs: list[str], cc: int, cubin: bool) -> str | None:
    """The arch whose image runs on compute capability ``cc``: a cubin of the same major and
    no higher minor (an arch-specific one, ``sm_90a``, only on exactly its own), or PTX of
    any arch no higher than ``cc`` (not arch-specific), the highest such."""
    best, best_cc = None, -1
    for arch in archs:
        acc, specific = _arch_cc(arch)
        if acc > cc or acc <= best_cc:
            continue
        if cubin and (acc // 10 != cc // 10 or (specific and acc != cc)):
            continue
        if not cubin and specific:
            continue
        best, best_cc = arch, acc
    return best


class ExportedKernel:
    """An exported kernel: its signatures, launched as ``kernel[grid, block](...)``."""

    def __init__(self, module: ExportedModule, name: str, entries: list[Entry]):
        self.module = module
        self.__name__ = name
        self.entries = entries
        self.signatures = [kt.parse_signature(e.signature) for e in entries]
        self._loaded: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<exported kernel {self.__name__}: {', '.join(map(str, self.signatures))}>"

    def __getitem__(self, config):
        from kaiojit.launch.launcher import parse_launch_config

        grid, block, stream, shared, cluster = parse_launch_config(config)
        return lambda *args: self._launch(grid, block, stream, shared, args, cluster)

    def launch(self, *args, grid, block, shared_mem=0, stream=None, cluster=None):
        self._launch(grid, block, stream, shared_mem, args, cluster)

    def _launch(self, grid, block, stream, shared, args, cluster) -> None:
        loaded = self._loaded_for(args)
        loaded.launch(grid, block, stream, shared, args, cluster)

    def _loaded_for(self, args: tuple) -> Any:
        from kaiojit.runtime import typeof

        first = self.entries[0]
        if len(args) != len(first.arg_names):
            raise TypeError(f"{self.__name__}() takes {len(first.arg_names)} arguments "
                            f"({', '.join(first.arg_names)}), got {len(args)}")
        types = []
        for a, name in zip(args, first.arg_names):
            try:
                types.append(typeof(a))
            except TypeError as e:
                raise TypeError(f"{self.__name__}(): parameter {name!r}: {e}") from None
        for i, sig in enumerate(self.signatures):
            if all(_accepts(p, a) for p, a in zip(sig.args, types)):
                loaded = self._loaded.get(i)
                if loaded is None:
                    with self._lock:
                        loaded = self._loaded.get(i)
                        if loaded is None:
                            loaded = self._loaded[i] = self.module.load_entry(self.entries[i])
                return loaded
        raise TypeError(f"{self.__name__} was exported for {'; '.join(map(str, self.signatures))}"
                        f"; none accepts ({', '.join(map(str, types))}): export that signature "
                        "too")


class ExportedModule:
    """The kernels of one export directory, as attributes (``module.saxpy``) or by name."""

    def __init__(self, directory: str, manifest: Manifest, backend: Any):
        self.directory = directory
        self.manifest = manifest
        self.backend = backend
        by_name: dict[str, list[Entry]] = {}
        for e in manifest.entries:
            by_name.setdefault(e.kernel, []).append(e)
        self.kernels = {name: ExportedKernel(self, name, es) for name, es in by_name.items()}

    def __getattr__(self, name: str) -> ExportedKernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"{self.__dict__.get('directory')!r} exports no kernel {name!r}; "
                             f"it has {', '.join(sorted(kernels)) or 'none'}")

    def __getitem__(self, name: str) -> ExportedKernel:
        return self.__getattr__(name)

    def __dir__(self):
        return [*super().__dir__(), *self.kernels]

    def load_entry(self, entry: Entry) -> Any:
        image = (self._host_image(entry) if self.manifest.target == "host"
                 else self._gpu_image(entry))
        return self.backend.load_kernel(image)

    def _common(self, entry: Entry) -> dict:
        known = CompileOptions.__dataclass_fields__
        options = CompileOptions(**{k: v for k, v in entry.options.items() if k in known})
        return dict(name=entry.symbol, py_name=entry.kernel,
                    signature=kt.parse_signature(entry.signature),
                    arg_names=tuple(entry.arg_names),
                    static_shared_bytes=entry.static_shared_bytes,
                    uses_sync=entry.cooperative, options=options)

    def _gpu_image(self, entry: Entry) -> ExportedImage:
        major, minor = self.backend.compute_capability(self.backend.current_device())
        cc = major * 10 + minor
        archs = self.manifest.archs
        arch = choose_arch(archs, cc, cubin=True)
        ptx_arch = arch or choose_arch(archs, cc, cubin=False)
        if ptx_arch is None:
            raise ArtifactError(f"{entry.kernel}: {entry.signature}: exported for "
                                f"{', '.join(archs)}; none runs on this device (sm_{cc}): "
                                f"export for sm_{cc} too")
        ptx = self._read(entry.ptx[ptx_arch], text=True)
        cubin = self._read(entry.cubins[arch], text=False) if arch else None
        return ExportedImage(ptx=ptx, cubin=cubin, arch=arch or ptx_arch, **self._common(entry))

    def _host_image(self, entry: Entry) -> ExportedImage:
        library = os.path.join(os.path.abspath(self.directory), self.manifest.library)
        if not os.path.exists(library):
            raise ArtifactError(f"{self.directory!r}: the host library {self.manifest.library} "
                                "is missing")
        host = HostImage(object_code=b"", entry=entry.symbol,
                         uses_block_mode=entry.uses_block_mode,
                         static_shared_bytes=entry.static_shared_bytes,
                         sites=[dict(s) for s in entry.sites], library=library)
        return ExportedImage(image=host, **self._common(entry))

    def _read(self, name: str, text: bool) -> str | bytes:
        path = os.path.join(self.directory, name)
        try:
            with open(path, "r" if text else "rb") as f:
                return f.read()
        except OSError as e:
            raise ArtifactError(f"{path}: {e.strerror}") from None


def load(directory: str) -> ExportedModule:
    """The kernels exported into ``directory`` (by ``python -m kaiojit aot`` or
    :func:`kaiojit.aot.export`), ready to launch on the current backend."""
    from kaiojit.runtime import get_backend

    manifest = Manifest.read(directory, VERSION)
    backend = get_backend()
    wants = "cpu" if manifest.target == "host" else "a GPU"
    on_host = backend.name == "cpu"
    if on_host != (manifest.target == "host"):
        other = "--target host" if not on_host else "--arch sm_XY (no --target host)"
        raise ArtifactError(f"{directory!r} holds kernels for {manifest.target}, which needs "
                            f"{wants}; this process runs the {backend.name} backend: export "
                            f"with {other}")
    return ExportedModule(directory, manifest, backend)
