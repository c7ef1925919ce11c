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
from kaiojit.aot.arguments import argument_types
from kaiojit.aot.manifest import USER_ERRORS, ArtifactError, Entry, Manifest
from kaiojit.errors import CudaError, user_facing
from kaiojit.options import VERSION, CompileOptions
from kaiojit.overloads import accepts as _accepts
from kaiojit.runtime.args import typeof
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
    written_arrays: frozenset | None = None  # the array parameters the kernel may write


class ExportedCoarse:
    """An exported kernel's coarse entry, shaped as the compiler's CoarseEntry is for the
    runtime (``name``, ``ptx``, and here ``cubin``): its files are read when a launch first
    takes it (most processes never run a grid that large)."""

    def __init__(self, name: str, read: Any, ptx_file: str, cubin_file: str | None):
        self.name = name
        self._read, self._ptx_file, self._cubin_file = read, ptx_file, cubin_file

    @property
    def ptx(self) -> str:
        return self._read(self._ptx_file, text=True)

    @property
    def cubin(self) -> bytes | None:
        return self._read(self._cubin_file, text=False) if self._cubin_file else None


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
    """An exported kernel: its signatures, launched as ``kernel[grid, block](...)``.

    It launches as a ``@kj.jit`` kernel does: ``kernel[config]`` is a
    :class:`~kaiojit.launch.launcher.Launcher` (cached per configuration) whose first call
    takes the general path (type the arguments, pick the exported signature, load, check,
    pack, launch) and then builds the runtime's fast form of that launch; later
    ``kernel[config]`` return the fast form itself, so a repeated launch costs what a JIT
    kernel's does. It offers the launcher what it reads of a dispatcher: ``loaded_kernel``,
    ``passed_args``, ``constexpr_positions`` and ``cache_fast_launch``."""

    constexpr_positions: tuple[int, ...] = ()  # an export has none: constants are folded

    def __init__(self, module: ExportedModule, name: str, entries: list[Entry]):
        self.module = module
        self.__name__ = name
        self.entries = entries
        self.signatures = [kt.parse_signature(e.signature) for e in entries]
        self._loaded: dict[int, Any] = {}
        self._by_types: dict[tuple, Any] = {}  # the arguments' types -> the loaded kernel
        self._launchers: dict[Any, Any] = {}  # configuration -> Launcher or its fast form
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<exported kernel {self.__name__}: {', '.join(map(str, self.signatures))}>"

    def __getitem__(self, config):
        __tracebackhide__ = True  # a new configuration's error passes through this frame
        try:
            launcher = self._launchers.get(config)
        except TypeError:  # an unhashable configuration (lists): a launcher of its own
            launcher = None
        return launcher if launcher is not None else self._new_launcher(config)

    @user_facing(errors=USER_ERRORS)
    def _new_launcher(self, config):
        from kaiojit.launch.launcher import Launcher, parse_launch_config

        try:
            cached = len(self._launchers) < 64 and hash(config) is not None
        except TypeError:
            cached = False
        launcher = Launcher(self, *parse_launch_config(config), config if cached else None)
        if cached:
            self._launchers[config] = launcher
        return launcher

    @user_facing(errors=USER_ERRORS)
    def launch(self, *args, grid, block, shared_mem=0, stream=None, cluster=None):
        self.loaded_kernel(args).launch(grid, block, stream, shared_mem, args, cluster)

    # --- what a Launcher reads of its kernel --------------------------------------------------

    def passed_args(self, args: tuple) -> tuple:
        return args

    def cache_fast_launch(self, config: Any, fast: Any) -> None:
        """``kernel[config]`` returns ``fast`` from now on, if ``config``'s launcher is
        still cached."""
        if self._launchers.get(config) is not None:
            self._launchers[config] = fast

    def loaded_kernel(self, args: tuple) -> Any:
        """The loaded signature that takes ``args``: by their types once they were seen,
        else matched (a ``TypeError`` naming the signatures exported) and loaded."""
        try:
            key = tuple([typeof(a) for a in args])
        except TypeError:  # an argument kaiojit cannot type: argument_types names it
            key = None
        loaded = self._by_types.get(key) if key is not None else None
        if loaded is None:
            loaded = self._match(args)
            if key is not None and len(self._by_types) < 64:
                self._by_types[key] = loaded
        return loaded

    def _match(self, args: tuple) -> Any:
        types = argument_types(self.__name__, self.entries[0].arg_names, args)
        taking = [i for i, sig in enumerate(self.signatures)
                  if all(_accepts(p, a) for p, a in zip(sig.args, types))]
        if taking:
            # the signature of most parameters exactly the arguments' types (an aligned
            # array's align=16 one, as the JIT would specialize), the first of those
            i = max(taking, key=lambda i: (sum(p == a for p, a in zip(self.signatures[i].args,
                                                                      types)), -i))
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
        self.kernels: dict[str, Any] = {}
        for name, es in by_name.items():
            if name in manifest.autotuned:
                from kaiojit.aot.autotuned import ExportedAutotuned

                self.kernels[name] = ExportedAutotuned(
                    name, es, manifest.autotuned[name],
                    lambda entries, name=name: ExportedKernel(self, name, entries))
            else:
                self.kernels[name] = ExportedKernel(self, name, es)
        # plain attributes, so ``module.saxpy`` costs no __getattr__ call at each launch (a
        # kernel named as a method or attribute of the module stays reachable as module[name])
        for name, kernel in self.kernels.items():
            if name not in self.__dict__ and not hasattr(type(self), name):
                self.__dict__[name] = kernel

    def __getattr__(self, name: str) -> Any:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"{self.__dict__.get('directory')!r} exports no kernel {name!r}; "
                             f"it has {', '.join(sorted(kernels)) or 'none'}")

    def __getitem__(self, name: str) -> Any:
        return self.__getattr__(name)

    def __dir__(self):
        return [*super().__dir__(), *self.kernels]

    def __repr__(self) -> str:
        m = self.manifest
        made = f", cubins by {m.compiler_version}" if m.compiler_version else ""
        return (f"<exported kernels {', '.join(self.kernels)} from {self.directory!r}: "
                f"{m.target} ({', '.join(m.archs) or m.host_triple}{made})>")

    def load_entry(self, entry: Entry) -> Any:
        if self.manifest.target == "host":
            return self.backend.load_kernel(self._host_image(entry))
        image = self._gpu_image(entry)
        loaded = self.backend.load_kernel(image)
        try:  # the module now, so that an image the driver refuses names who made it
            loaded.on_device(self.backend.current_device())
        except CudaError as e:
            what = (f"its {image.arch} cubin (made by {self.manifest.compiler_version})"
                    if image.cubin is not None else f"its {image.arch} PTX")
            raise ArtifactError(f"{entry.kernel}: {entry.signature}: the driver refused "
                                f"{what}: {e}") from None
        return loaded

    def _common(self, entry: Entry) -> dict:
        known = CompileOptions.__dataclass_fields__
        options = CompileOptions(**{k: v for k, v in entry.options.items() if k in known})
        return dict(name=entry.symbol, py_name=entry.kernel,
                    signature=kt.parse_signature(entry.signature),
                    arg_names=tuple(entry.arg_names),
                    static_shared_bytes=entry.static_shared_bytes,
                    uses_sync=entry.cooperative, options=options,
                    written_arrays=(None if entry.written_arrays is None
                                    else frozenset(entry.written_arrays)))

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
        coarse = None
        if entry.coarse_symbol:  # taken as the JIT takes it: grids of many threads
            coarse = ExportedCoarse(entry.coarse_symbol, self._read, entry.coarse_ptx[ptx_arch],
                                    entry.coarse_cubins[arch] if arch else None)
        return ExportedImage(ptx=ptx, cubin=cubin, arch=arch or ptx_arch, coarse=coarse,
                             **self._common(entry))

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


@user_facing(errors=USER_ERRORS)
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
