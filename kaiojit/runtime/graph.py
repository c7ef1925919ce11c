"""CUDA graphs of kaiojit launches: stream capture, instantiation, replay and update.

``kj.CudaGraph`` records the launches made on one kaiojit stream between ``capture(stream)``'s
entry and exit (the driver's stream capture, thread-local mode), instantiates the graph once
and replays it with one ``cuGraphLaunch``. Capturing the same ``CudaGraph`` again updates the
instantiated graph in place (``cuGraphExecUpdate``) where the driver allows it (same
topology: new arguments, grids, pointers), and instantiates anew where it does not.

A capture records work; it must not do any: no compile, module load, allocation,
synchronization or autotuning may happen inside one (the driver refuses most of them and
invalidates the capture). kaiojit does them only on a kernel's first launch with new argument
types (or on a new device, or for NumPy arguments it stages), and there it calls
:func:`forbid_in_capture` first: inside a capture, by kaiojit's API or by
``torch.cuda.graph``, it raises a :class:`~kaiojit.LaunchError` that says to warm up first,
and the capture stays valid.

Backends that capture (cuda, mock) answer the :class:`GraphOps` calls; the cuda backend's are
:class:`CudaGraphOps` over its driver, the mock backend models them (``kaiojit.runtime.mock``).
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any, Protocol

from kaiojit.errors import LaunchError
from kaiojit.runtime.backend import GpuBackend, get_backend
from kaiojit.runtime.driver import check
from kaiojit.runtime.stream import stream_handle


class GraphOps(Protocol):
    """What a backend that captures offers, with graphs and executables as opaque handles."""

    def capture_begin(self, stream: int) -> None: ...
    def capture_end(self, stream: int) -> Any: ...  # the captured graph
    def stream_capturing(self, stream: int) -> bool: ...
    def graph_nodes(self, graph: Any) -> int: ...
    def graph_instantiate(self, graph: Any) -> Any: ...
    def graph_update(self, executable: Any, graph: Any) -> bool: ...  # False: re-instantiate
    def graph_launch(self, executable: Any, stream: int) -> None: ...
    def graph_destroy(self, graph: Any) -> None: ...
    def graph_exec_destroy(self, executable: Any) -> None: ...


class CudaGraphOps:
    """:class:`GraphOps` over the cuda backend's driver (``cuda.bindings.driver``)."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.drv = backend.drv

    def capture_begin(self, stream: int) -> None:
        mode = self.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(self.drv.cuStreamBeginCapture(stream, mode), "begin stream capture")

    def capture_end(self, stream: int) -> Any:
        return check(self.drv.cuStreamEndCapture(stream), "end stream capture")

    def stream_capturing(self, stream: int) -> bool:
        status = check(self.drv.cuStreamIsCapturing(stream))
        return status == self.drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE

    def graph_nodes(self, graph: Any) -> int:
        _, count = check(self.drv.cuGraphGetNodes(graph, 0))
        return int(count)

    def graph_instantiate(self, graph: Any) -> Any:
        return check(self.drv.cuGraphInstantiate(graph, 0), "instantiate a CUDA graph")

    def graph_update(self, executable: Any, graph: Any) -> bool:
        err, _ = self.drv.cuGraphExecUpdate(executable, graph)
        return int(err) == 0

    def graph_launch(self, executable: Any, stream: int) -> None:
        check(self.drv.cuGraphLaunch(executable, stream), "launch a CUDA graph")

    def graph_destroy(self, graph: Any) -> None:
        if not self.backend.closing:
            check(self.drv.cuGraphDestroy(graph))

    def graph_exec_destroy(self, executable: Any) -> None:
        if not self.backend.closing:
            check(self.drv.cuGraphExecDestroy(executable))


def graph_ops(backend: GpuBackend) -> GraphOps:
    """The capture calls of ``backend``; a clear error on a backend without CUDA graphs."""
    if backend.name == "cuda":
        ops = getattr(backend, "graph_ops", None)
        if ops is None:
            ops = backend.graph_ops = CudaGraphOps(backend)  # type: ignore[attr-defined]
        return ops
    if hasattr(backend, "capture_begin"):
        return backend  # type: ignore[return-value]
    raise LaunchError(f"CUDA graphs need the cuda backend; kaiojit's {backend.name} backend "
                      "runs each launch when it is made")


# --- whether a capture is active ------------------------------------------------------------

class _CaptureState(threading.local):
    depth = 0  # kaiojit captures open in this thread


_STATE = _CaptureState()


def _torch_capturing() -> bool:
    """Whether this thread's current PyTorch stream is capturing (``torch.cuda.graph``)."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)  # a stand-in module may lack it
    if cuda is None or not cuda.is_initialized():
        return False
    return bool(cuda.is_current_stream_capturing())


def capturing() -> bool:
    """Whether a CUDA graph capture is open in this thread (kaiojit's or PyTorch's)."""
    return _STATE.depth > 0 or _torch_capturing()


def forbid_in_capture(what: str) -> None:
    """Raise before ``what`` (work a capture forbids) where a capture is open in this thread.

    Called only where kaiojit is about to compile, load, allocate or synchronize, which are
    slow already: the check costs nothing on a warm launch."""
    if capturing():
        raise LaunchError(f"{what}, which a CUDA graph capture forbids; warm up first: launch "
                          "it once with the same argument types (and device) before capturing")


# --- the user's API ------------------------------------------------------------------------

class CudaGraph:
    """``kj.CudaGraph()``: launches captured on a stream, replayed as one graph.

    ::

        g = kj.CudaGraph()
        s = kj.Stream()
        kernel[grid, block, s](out, x, n)          # warm-up: compiles and loads
        with g.capture(s):
            for _ in range(100):
                kernel[grid, block, s](out, x, n)  # recorded, not run
        g.replay()                                 # all 100, on s (or g.replay(other))
    """

    def __init__(self) -> None:
        self.backend = get_backend()
        self._ops = graph_ops(self.backend)
        self.stream: int | None = None  # the stream of the last capture
        self.graph: Any = None
        self.executable: Any = None
        self.nodes = 0  # launches (graph nodes) in the last capture
        self.updates = 0  # captures that updated the instantiated graph in place

    @staticmethod
    def is_capturing() -> bool:
        """Whether a CUDA graph capture is open in this thread (kaiojit's or PyTorch's): a
        library asks before work a capture forbids (compiling, allocating, synchronizing)."""
        return capturing()

    @staticmethod
    def forbid_in_capture(what: str) -> None:
        """Raise kaiojit's LaunchError for ``what`` (work a capture forbids, such as
        autotuning a new key) where a capture is open in this thread."""
        forbid_in_capture(what)

    def capture(self, stream: Any) -> _Capture:
        """A context manager: launches on ``stream`` (a ``kj.Stream`` or another library's
        stream, not the legacy default stream) inside it are recorded into this graph."""
        handle = stream_handle(stream)
        if handle == 0:
            raise LaunchError("a CUDA graph captures a stream of its own: pass a kj.Stream() "
                              "(the legacy default stream cannot be captured)")
        return _Capture(self, handle)

    def _captured(self, graph: Any) -> None:
        """Take a new capture: update the executable graph where the driver allows it."""
        ops = self._ops
        if self.graph is not None:
            ops.graph_destroy(self.graph)
        self.graph, self.nodes = graph, ops.graph_nodes(graph)
        if self.executable is not None:
            if ops.graph_update(self.executable, graph):
                self.updates += 1
                return
            ops.graph_exec_destroy(self.executable)
            self.executable = None
        self.executable = ops.graph_instantiate(graph)

    def replay(self, stream: Any = None) -> None:
        """Launch the graph on ``stream`` (default: the stream it was captured on)."""
        if self.executable is None:
            raise LaunchError("this CudaGraph has captured nothing yet: use "
                              "`with graph.capture(stream): ...` first")
        handle = self.stream if stream is None else stream_handle(stream)
        self._ops.graph_launch(self.executable, handle)

    def __del__(self) -> None:
        ops = getattr(self, "_ops", None)
        if ops is None:
            return
        try:
            if self.executable is not None:
                ops.graph_exec_destroy(self.executable)
            if self.graph is not None:
                ops.graph_destroy(self.graph)
        except Exception:  # at interpreter exit the driver may be gone already
            pass

    def __repr__(self) -> str:
        return f"<kj.CudaGraph of {self.nodes} nodes on {self.backend.name}>"


class _Capture:
    """One capture of a :class:`CudaGraph` on one stream (the ``with`` block)."""

    def __init__(self, graph: CudaGraph, stream: int):
        self.graph, self.stream = graph, stream

    def __enter__(self) -> CudaGraph:
        ops = self.graph._ops
        ops.capture_begin(self.stream)
        _STATE.depth += 1
        self.graph.stream = self.stream
        return self.graph

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        _STATE.depth -= 1
        ops = self.graph._ops
        if kind is None:
            self.graph._captured(ops.capture_end(self.stream))
            return
        try:  # the block raised: end the capture, keep the block's error
            ops.graph_destroy(ops.capture_end(self.stream))
        except Exception:  # noqa: BLE001 - an invalidated capture ends in an error of its own
            pass
