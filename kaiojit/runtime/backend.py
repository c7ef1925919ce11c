"""The backend protocol and the choice of backend.

A backend is what kernels run on: ``cuda`` (the driver API), ``cpu`` (kernels compiled for the
host, plugged in by ``kaiojit/runtime/cpu.py``) or ``mock`` (records launches, for tests).
``KAIOJIT_BACKEND`` is read once, the first time a backend is asked for; without it the
default is cuda when a CUDA device is usable, else cpu (said once in the ``kaiojit`` log).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kaiojit.errors import CudaError

log = logging.getLogger("kaiojit")


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """What a device allows one launch: checked before launching (``kj.LaunchError``)."""

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_per_block: int = 48 * 1024
    max_shared_per_block_optin: int = 227 * 1024
    max_cluster_size: int = 8


class GpuBackend(Protocol):
    """What the runtime needs from a device. Pointers, streams, events and modules are ints
    or opaque handles owned by the backend; sizes are in bytes.

    ``launch_typed`` receives an :class:`~kaiojit.runtime.slots.ArgSlots` whose values are
    already written; ``fn`` is what ``get_function`` returned.
    """

    name: str
    debug_sync: bool  # KAIOJIT_DEBUG_SYNC, read once when the backend is made
    closing: bool  # set at interpreter exit: finalizers then free nothing

    def load_kernel(self, image: Any) -> Any: ...  # a LoadedKernel (see launch.load_kernel)

    # devices
    def device_count(self) -> int: ...
    def current_device(self) -> int: ...
    def select_device(self, device: int) -> None: ...
    def set_default_device(self, device: int) -> None: ...
    def device_limits(self, device: int) -> DeviceLimits: ...
    def compute_capability(self, device: int) -> tuple[int, int]: ...

    # code
    def load_module(self, ptx: str, device: int) -> Any: ...
    def unload_module(self, module: Any, device: int) -> None: ...
    def get_function(self, module: Any, name: str, device: int) -> Any: ...
    def function_attributes(self, fn: Any) -> dict[str, int]: ...
    def set_dynamic_shared(self, fn: Any, nbytes: int) -> None: ...
    def occupancy_block_size(self, fn: Any, dynamic_shared: int) -> tuple[int, int]: ...
    def launch_typed(self, fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                     shared_mem: int, stream: int, slots: Any,
                     cluster: tuple[int, int, int] | None = None) -> None: ...

    # memory
    def alloc(self, nbytes: int) -> int: ...
    def free(self, ptr: int, device: int) -> None: ...
    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None: ...
    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None: ...
    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None: ...
    def memset(self, ptr: int, byte: int, nbytes: int, stream: int | None = None) -> None: ...
    def pointer_device(self, ptr: int) -> int: ...
    def dlpack_device_type(self) -> int: ...

    # streams and events
    def synchronize(self) -> None: ...
    def stream_create(self) -> int: ...
    def stream_destroy(self, stream: int) -> None: ...
    def stream_synchronize(self, stream: int) -> None: ...
    def event_create(self, timing: bool = True) -> int: ...
    def event_destroy(self, event: int) -> None: ...
    def event_record(self, event: int, stream: int) -> None: ...
    def event_synchronize(self, event: int) -> None: ...
    def event_elapsed_ms(self, start: int, end: int) -> float: ...
    def stream_wait_event(self, stream: int, event: int) -> None: ...

    # tensor maps
    def encode_tensormap_tiled(self, **fields: Any) -> bytes: ...


# --- registry and selection ---------------------------------------------------------------------

_FACTORIES: dict[str, Callable[[], GpuBackend]] = {}
# Backends that live in a module not imported yet: importing it registers the factory.
_LAZY_MODULES: dict[str, str] = {
    "cuda": "kaiojit.runtime.cuda",
    "mock": "kaiojit.runtime.mock",
    "cpu": "kaiojit.runtime.cpu",
}
BACKEND_NAMES = ("cuda", "cpu", "mock")

_lock = threading.RLock()
_active: GpuBackend | None = None
_instances: dict[str, GpuBackend] = {}  # one backend per name, made on first use
_cuda_available: bool | None = None


def register_backend(name: str, factory: Callable[[], GpuBackend]) -> None:
    """Make ``KAIOJIT_BACKEND=name`` (and :func:`set_backend`) build a backend with ``factory``."""
    _FACTORIES[name] = factory


def _factory(name: str) -> Callable[[], GpuBackend]:
    if name not in _FACTORIES and name in _LAZY_MODULES:
        try:
            importlib.import_module(_LAZY_MODULES[name])
        except ModuleNotFoundError as e:
            if e.name != _LAZY_MODULES[name]:
                raise
    if name not in _FACTORIES:
        if name == "cpu":
            raise RuntimeError(
                "the cpu backend is not available in this build of kaiojit "
                "(kaiojit/runtime/cpu.py is missing); use KAIOJIT_BACKEND=cuda on a machine "
                "with a GPU"
            )
        known = ", ".join(sorted(set(BACKEND_NAMES) | set(_FACTORIES)))
        raise ValueError(f"unknown kaiojit backend {name!r}; choose one of {known}")
    return _FACTORIES[name]


def _instance(name: str) -> GpuBackend:
    backend = _instances.get(name)
    if backend is None:
        backend = _instances[name] = _factory(name)()
    return backend


def is_cuda_available() -> bool:
    """Whether the CUDA driver loads and sees at least one device. Never raises; cached."""
    global _cuda_available
    if _cuda_available is None:
        try:
            from kaiojit.runtime import cuda as cuda_backend

            _cuda_available = cuda_backend.probe_device_count() > 0
        except Exception:  # no driver library, no device, broken install: all mean "no"
            _cuda_available = False
    return _cuda_available


def _choose_default() -> str:
    env = os.environ.get("KAIOJIT_BACKEND", "").strip().lower()
    if env:
        return env
    if is_cuda_available():
        return "cuda"
    log.info("kaiojit: no usable CUDA device, using the cpu backend")
    return "cpu"


def get_backend() -> GpuBackend:
    """The active backend, created on first use."""
    backend = _active
    if backend is not None:
        return backend
    with _lock:
        if _active is None:
            name = _choose_default()
            if name == "cuda" and not is_cuda_available():
                from kaiojit.runtime import cuda as cuda_backend

                cuda_backend.raise_unavailable()
            _set(_instance(name))
        return _active  # type: ignore[return-value]


def _set(backend: GpuBackend | None) -> None:
    global _active
    _active = backend


def set_backend(backend: str | GpuBackend | None) -> GpuBackend | None:
    """Replace the active backend (a name, an instance, or None to choose again on next use).

    Returns the previous one. Meant for tests and the pytest plugin: kernels already loaded
    stay bound to the backend that loaded them.
    """
    with _lock:
        previous = _active
        if isinstance(backend, str):
            backend = _instance(backend)
        _set(backend)
        return previous


def backend() -> str:
    """``kj.backend()``: the name of the active backend ("cuda", "cpu" or "mock")."""
    return get_backend().name


def cuda_unavailable_error(reason: str) -> CudaError:
    return CudaError(
        "CUDA_ERROR_NO_DEVICE",
        f"no usable CUDA device ({reason}); set KAIOJIT_BACKEND=cpu to run kernels on the host",
    )


def launch_context(name: str, grid: Any, block: Any, shared_mem: int) -> str:
    """How errors name a launch."""
    return f"kernel {name!r}, grid={tuple(grid)}, block={tuple(block)}, shared_mem={shared_mem}"
