"""Streams, events and devices.

A stream argument anywhere in kaiojit may be a :class:`Stream`, ``None`` or ``0`` (the legacy
default stream), an integer handle, or a foreign stream: an object with a ``__cuda_stream__``
method returning ``(version, handle)`` (CUDA Python's protocol, CuPy) or a ``cuda_stream``
attribute (PyTorch). The resolver is chosen once per Python class.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from kaiojit.errors import user_facing
from kaiojit.runtime.backend import GpuBackend, get_backend


class Stream:
    """A CUDA stream. ``Stream()`` creates one on the current device; ``Stream(handle=h)``
    wraps a stream someone else owns (``external``, numba's name: kaiojit never destroys it)."""

    __slots__ = ("handle", "device", "external", "_backend", "__weakref__")

    def __init__(self, handle: int | None = None):
        backend = get_backend()
        self._backend = backend
        self.device = backend.current_device()
        self.external = handle is not None
        if handle is None:
            self.handle = backend.stream_create()
            fin = weakref.finalize(self, _destroy_stream, backend, self.handle)
            fin.atexit = False
        else:
            self.handle = int(handle)

    @user_facing
    def synchronize(self) -> None:
        self._backend.stream_synchronize(self.handle)

    def wait_event(self, event: Event) -> None:
        self._backend.stream_wait_event(self.handle, event.handle)

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.handle

    def __int__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<kj.Stream 0x{self.handle:x} on device {self.device}>"


def _destroy_stream(backend: GpuBackend, handle: int) -> None:
    if not backend.closing:
        try:
            backend.stream_destroy(handle)
        except Exception:
            pass


_DEFAULT_STREAMS: dict[int, Stream] = {}


def default_stream() -> Stream:
    """The legacy default stream (handle 0) of the current device."""
    device = get_backend().current_device()
    stream = _DEFAULT_STREAMS.get(device)
    if stream is None:
        stream = _DEFAULT_STREAMS[device] = Stream(handle=0)
        stream.external = False  # the device's own, not someone else's
    return stream


# --- resolving any stream-like object to a handle ---------------------------------------------

def _from_protocol(obj: Any) -> int:
    version_and_handle = obj.__cuda_stream__()
    return int(version_and_handle[1])


def _classify_stream(cls: type) -> Callable[[Any], int]:
    if cls is type(None):
        return lambda s: 0
    if issubclass(cls, Stream):
        return lambda s: s.handle
    if issubclass(cls, int):
        return int
    if hasattr(cls, "__cuda_stream__"):
        return _from_protocol
    if hasattr(cls, "cuda_stream"):
        return lambda s: int(s.cuda_stream)

    def fail(s: Any) -> int:
        raise TypeError(f"not a stream: {type(s).__qualname__} (use kj.Stream, an integer "
                        "handle, or an object with __cuda_stream__)")
    return fail


_STREAM_RESOLVERS: dict[type, Callable[[Any], int]] = {}


def stream_handle(stream: Any) -> int:
    """The integer CUstream handle of any stream-like object (0 for None)."""
    cls = stream.__class__
    fn = _STREAM_RESOLVERS.get(cls)
    if fn is None:
        fn = _STREAM_RESOLVERS[cls] = _classify_stream(cls)
    return fn(stream)


# --- events ------------------------------------------------------------------------------------

class Event:
    """A CUDA event, for ordering and timing work on streams."""

    __slots__ = ("handle", "_backend", "__weakref__")

    def __init__(self, timing: bool = True):
        backend = get_backend()
        self._backend = backend
        self.handle = backend.event_create(timing)
        fin = weakref.finalize(self, _destroy_event, backend, self.handle)
        fin.atexit = False

    def record(self, stream: Any = None) -> Event:
        self._backend.event_record(self.handle, stream_handle(stream))
        return self

    @user_facing
    def synchronize(self) -> None:
        self._backend.event_synchronize(self.handle)

    def wait(self, stream: Any = None) -> None:
        """Make ``stream`` wait for this event."""
        self._backend.stream_wait_event(stream_handle(stream), self.handle)

    def elapsed_time(self, later: Event) -> float:
        """Milliseconds from this event to ``later`` (both recorded and completed)."""
        return self._backend.event_elapsed_ms(self.handle, later.handle)


def _destroy_event(backend: GpuBackend, handle: int) -> None:
    if not backend.closing:
        try:
            backend.event_destroy(handle)
        except Exception:
            pass


# --- devices -------------------------------------------------------------------------------------

@user_facing
def synchronize() -> None:
    """Wait until the current device has finished all its work."""
    get_backend().synchronize()


def device_count() -> int:
    return get_backend().device_count()


def sm_count(device: int | None = None) -> int:
    """The multiprocessors of ``device`` (default: the current one): the grid of a persistent
    kernel, one block per SM. The cpu backend's are its worker threads."""
    backend = get_backend()
    return backend.device_limits(backend.current_device() if device is None else device)\
        .multiprocessor_count


def select_device(device: int) -> None:
    """Make ``device`` current in this thread and the default of threads started later."""
    backend = get_backend()
    backend.set_default_device(device)
    backend.select_device(device)


def get_current_device() -> int:
    return get_backend().current_device()


@contextlib.contextmanager
def device(index: int) -> Iterator[int]:
    """``with kj.device(i):`` run the block on device ``i`` (this thread only), then restore."""
    backend = get_backend()
    previous = backend.current_device()
    backend.select_device(index)
    try:
        yield index
    finally:
        backend.select_device(previous)
