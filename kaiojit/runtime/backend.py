"""The backend protocol and the choice of backend.

A backend is what kernels run on: ``cuda`` (the driver API), ``cpu`` (kernels compiled for the
host) or ``mock`` (records launches, for tests). The protocol is declared here in parts
(devices, memory, modules, launching, streams and events, tensor maps) that
:class:`GpuBackend` combines, with :class:`LoadedKernel`, what ``load_kernel`` returns. Every
backend implements every member: where a backend cannot do something (the cpu backend has no
PTX JIT and no tensor-map encoder) its answer is a clear error, documented on its method.

Backends are registered by name (``kaiojit.runtime`` registers the three built-in ones).
``KAIOJIT_BACKEND`` is read once, the first time a backend is asked for; without it the
default is cuda when a CUDA device is usable, else cpu (said once in the ``kaiojit`` log).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kaiojit import env
from kaiojit.logs import log
from kaiojit.runtime import driver
from kaiojit.runtime.slots import ArgSlots
from kaiojit.target import TargetSpec

Dim3 = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """What a device allows one launch: checked before launching (``kj.LaunchError``)."""

    max_threads_per_block: int = 1024
    max_block: Dim3 = (1024, 1024, 64)
    max_grid: Dim3 = (2**31 - 1, 65535, 65535)
    max_shared_per_block: int = 48 * 1024
    max_shared_per_block_optin: int = 227 * 1024
    max_cluster_size: int = 8
    multiprocessor_count: int = 132  # an H100 SXM's / H200's; the cuda backend asks the device


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """A checked launch configuration (see ``kaiojit.runtime.launch.check_launch_config``)."""

    grid: Dim3
    block: Dim3
    shared_mem: int
    cluster: Dim3 | None


@dataclass(frozen=True, slots=True)
class FastLaunchBinding:
    """What a generated fast launch (:mod:`kaiojit.runtime.native.fastlaunch`) calls for one kernel,
    configuration, stream and set of slots: ``call()`` launches and returns the driver's
    status, or ``call(record)`` where ``record`` is not None (a prebuilt pointer, see
    :mod:`kaiojit.runtime.native.launchrecord`); ``failed(status)`` raises the error of a non-zero
    one. ``thread_state.token`` is the calling thread's device-selection token: the launch is
    valid while it is ``token`` (the same thread, the same device)."""

    call: Callable[..., int]
    record: Any
    failed: Callable[[int], None]
    thread_state: Any
    token: Any
    keep: Any = None  # what ``call`` or ``record`` points into, kept alive with the binding

    def invoke(self) -> int:
        """One launch, as the fast form makes it."""
        return self.call() if self.record is None else self.call(self.record)


_TOKENS: dict[tuple[int, int], tuple[int, int]] = {}


def device_token(device: int) -> tuple[int, int]:
    """The interned token of (this thread, ``device``), which a backend stores in its
    thread state when a device is selected: one identity test tells a fast launch that it
    runs in the thread and on the device it was built for."""
    key = (threading.get_ident(), device)
    token = _TOKENS.get(key)
    if token is None:
        token = _TOKENS.setdefault(key, key)
    return token


# --- the protocol, in parts -----------------------------------------------------------------------

class Devices(Protocol):
    """Devices, their limits and what to compile for them. Devices are ordinals from 0."""

    def device_count(self) -> int: ...
    def current_device(self) -> int: ...  # this thread's device
    def select_device(self, device: int) -> None: ...  # for this thread
    def set_default_device(self, device: int) -> None: ...  # for threads started later
    def device_limits(self, device: int) -> DeviceLimits: ...
    def compute_capability(self, device: int) -> tuple[int, int]: ...

    def target_spec(self, device: int | None = None) -> TargetSpec:
        """What kernels for ``device`` (default: the current one) are compiled for."""
        ...


class Memory(Protocol):
    """Allocations and copies; pointers are ints, sizes bytes, streams handles (None: sync)."""

    def alloc(self, nbytes: int) -> int: ...  # on the current device
    def free(self, ptr: int, device: int) -> None: ...
    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None: ...
    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None: ...
    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None: ...
    def memcpy_peer(self, dst: int, dst_device: int, src: int, src_device: int, nbytes: int,
                    stream: int | None = None) -> None: ...
    def can_access_peer(self, device: int, peer: int) -> bool: ...
    def enable_peer_access(self, device: int, peer: int) -> bool: ...  # False: impossible
    def memset(self, ptr: int, byte: int, nbytes: int, stream: int | None = None) -> None: ...
    def pointer_device(self, ptr: int) -> int: ...  # -1 for memory the backend does not know
    def dlpack_device_type(self) -> int: ...  # kDLCUDA (2) or kDLCPU (1)


class Modules(Protocol):
    """Loading code. ``load_kernel`` is what the dispatcher uses; the module-level calls serve
    ``kj.Module`` (code users bring) and the loaded kernels themselves."""

    def load_kernel(self, kernel: Any) -> LoadedKernel:
        """A compiled kernel (``kaiojit.compiler.CompiledKernel``) ready to launch; cached."""
        ...

    def load_module(self, image: Any, device: int) -> Any: ...  # image: PTX text or HostImage
    def unload_module(self, module: Any, device: int) -> None: ...
    def get_function(self, module: Any, name: str, device: int) -> Any: ...
    def function_attributes(self, fn: Any) -> dict[str, int]: ...
    def set_dynamic_shared(self, fn: Any, nbytes: int) -> None: ...  # opt in past 48 KB

    def occupancy_block_size(self, fn: Any, dynamic_shared: int) -> tuple[int, int]:
        """``(min_grid_size, block_size)`` of the highest occupancy."""
        ...


class Launching(Protocol):
    """Launches of a function ``get_function`` returned, with its arguments in slots."""

    def launch_typed(self, fn: Any, grid: Dim3, block: Dim3, shared_mem: int, stream: int,
                     slots: ArgSlots, cluster: Dim3 | None = None) -> None: ...

    def fast_launch_binding(self, fn: Any, grid: Dim3, block: Dim3, shared_mem: int,
                            stream: int, slots: ArgSlots) -> FastLaunchBinding | None:
        """What a generated fast launch calls, or None where launches take no fast form."""
        ...


class Streams(Protocol):
    """Streams and events, as integer handles; stream 0 is the legacy default stream."""

    def synchronize(self) -> None: ...  # the current device
    def stream_create(self) -> int: ...
    def stream_destroy(self, stream: int) -> None: ...
    def stream_synchronize(self, stream: int) -> None: ...
    def stream_wait_event(self, stream: int, event: int) -> None: ...
    def event_create(self, timing: bool = True) -> int: ...
    def event_destroy(self, event: int) -> None: ...
    def event_record(self, event: int, stream: int) -> None: ...
    def event_synchronize(self, event: int) -> None: ...
    def event_elapsed_ms(self, start: int, end: int) -> float: ...


class TensorMaps(Protocol):
    """CUtensorMap encoding (the fields are ``kaiojit.runtime.tensormap.tiled_fields``')."""

    def encode_tensormap_tiled(self, *, dtype: str, rank: int, address: int,
                               dims: tuple[int, ...], strides: tuple[int, ...],
                               box: tuple[int, ...], element_strides: tuple[int, ...],
                               interleave: str, swizzle: str, l2_promotion: str,
                               oob_fill: str) -> bytes: ...


@runtime_checkable
class GpuBackend(Devices, Memory, Modules, Launching, Streams, TensorMaps, Protocol):
    """Everything the runtime needs from a device."""

    name: str  # what kj.backend() says: "cuda", "cpu", "mock"
    debug_sync: bool  # KAIOJIT_DEBUG_SYNC, read once when the backend is made
    closing: bool  # set at interpreter exit: finalizers then free nothing


class DeviceKernel(Protocol):
    """A loaded kernel on one device: ``fn`` is what the backend's ``get_function`` gave."""

    device: int
    fn: Any


@runtime_checkable
class LoadedKernel(Protocol):
    """A compiled kernel ready to launch on any device of its backend."""

    name: str
    backend: GpuBackend
    packer: Any  # the signature's kaiojit.runtime.args.ArgPacker

    def launch(self, grid: Any, block: Any, stream: Any, shared_mem: Any, args: Sequence[Any],
               cluster: Any = None) -> None:
        """Check the configuration, pack ``args`` (the user's values in signature order) and
        launch."""
        ...

    def configure(self, grid: Any, block: Any, shared_mem: Any = 0, cluster: Any = None,
                  device: int | None = None) -> LaunchConfig:
        """Check a configuration for this kernel (``LaunchError`` if it cannot run)."""
        ...

    def on_device(self, device: int) -> DeviceKernel: ...
    def attributes(self, device: int | None = None) -> dict[str, int]: ...
    def suggest_block_size(self, dynamic_shared: int = 0) -> int: ...

    def fast_path(self, grid: Any, block: Any, stream: Any, shared_mem: Any,
                  plan: Any) -> Callable[..., Any] | None:
        """After a successful launch with this configuration: a plain function
        ``fast(*args)`` that repeats such launches with less work, its call mapped to the
        kernel's parameters by ``plan`` (a :class:`kaiojit.runtime.native.fastlaunch.FastPlan`),
        or None where there is no fast form."""
        ...


def launch_context(name: str, grid: Any, block: Any, shared_mem: int) -> str:
    """How errors name a launch."""
    return f"kernel {name!r}, grid={tuple(grid)}, block={tuple(block)}, shared_mem={shared_mem}"


# --- registry and selection ---------------------------------------------------------------------

_FACTORIES: dict[str, Callable[[], GpuBackend]] = {}

_lock = threading.RLock()
_active: GpuBackend | None = None
_instances: dict[str, GpuBackend] = {}  # one backend per name, made on first use
_cuda_available: bool | None = None


def register_backend(name: str, factory: Callable[[], GpuBackend]) -> None:
    """Make ``KAIOJIT_BACKEND=name`` (and :func:`set_backend`) build a backend with ``factory``."""
    _FACTORIES[name] = factory


def _instance(name: str) -> GpuBackend:
    backend = _instances.get(name)
    if backend is None:
        factory = _FACTORIES.get(name)
        if factory is None:
            known = ", ".join(sorted(_FACTORIES))
            raise ValueError(f"unknown kaiojit backend {name!r}; choose one of {known}")
        backend = _instances[name] = factory()
    return backend


def is_cuda_available() -> bool:
    """Whether the CUDA driver loads and sees at least one device. Never raises; cached.

    The one place that decides (the default backend, the pytest plugin, ``kj.cuda``). The
    driver library is asked first through ctypes: where it does not load or sees no device
    the answer is no, and ``cuda.bindings`` is never imported. Where it sees one, the
    bindings confirm it (an install without them is "no", as before), and the cuda backend
    imports them anyway."""
    global _cuda_available
    if _cuda_available is None:
        try:
            _cuda_available = driver.driver_sees_devices() and driver.probe_device_count() > 0
        except Exception:  # no driver library, no device, broken install: all mean "no"
            _cuda_available = False
    return _cuda_available


def _choose_default() -> str:
    name = env.get("KAIOJIT_BACKEND")
    if name:
        _check_env_choice(name)
        return name
    if is_cuda_available():
        return "cuda"
    log.info("no usable CUDA device, using the cpu backend")
    return "cpu"


def _check_env_choice(name: str) -> None:
    """``KAIOJIT_BACKEND`` names a registered backend, and the mock backend (which runs no
    kernel) only with ``KAIOJIT_MOCK_BACKEND=1`` beside it: it cannot be picked by accident."""
    users = ", ".join(n for n in sorted(_FACTORIES) if n != "mock")
    raw = env.raw("KAIOJIT_BACKEND")
    if name not in _FACTORIES:
        raise env.invalid("KAIOJIT_BACKEND", raw, f"one of {users}")
    if name == "mock" and not env.get("KAIOJIT_MOCK_BACKEND"):
        raise env.invalid("KAIOJIT_BACKEND", raw, f"one of {users}; the mock backend runs no "
                          "kernel and is for kaiojit's own tests, which set "
                          "KAIOJIT_MOCK_BACKEND=1 beside it")


def get_backend() -> GpuBackend:
    """The active backend, created on first use."""
    backend = _active
    if backend is not None:
        return backend
    with _lock:
        if _active is None:
            name = _choose_default()
            if name == "cuda" and not is_cuda_available():
                driver.raise_unavailable()
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
