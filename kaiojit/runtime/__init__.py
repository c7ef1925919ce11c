"""The kaiojit runtime: backends, memory, streams, argument packing and launching.

Importing it is cheap and never touches the CUDA driver; the driver is loaded the first time
the cuda backend is used. The three built-in backends are registered here, by name, and each
backend's module is imported when that backend is first made (a process on the cpu backend
never imports the cuda or mock modules; one on a GPU never imports the cpu one). The names of
modules a launch does not need (the backends' classes, ``Module``, peer access, graphs) load
on first use too: an AOT-loaded kernel's process pays only for what it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kaiojit.runtime.args import typeof
from kaiojit.runtime.backend import (
    DeviceLimits,
    GpuBackend,
    LaunchConfig,
    LoadedKernel,
    backend,
    get_backend,
    is_cuda_available,
    register_backend,
    set_backend,
)
from kaiojit.runtime.driver import (
    device_compute_capability,
    driver_version,
    max_ptx_version,
    ptx_version_for_driver,
)
from kaiojit.runtime.interop import as_device_array
from kaiojit.runtime.launch import (
    ModuleKernel,
    check_launch_config,
    forall_config,
    load_kernel,
    suggest_block_size,
)
from kaiojit.runtime.memory import DeviceArray, device_array, device_array_like, to_device
from kaiojit.runtime.stream import (
    Event,
    Stream,
    default_stream,
    device,
    device_count,
    select_device,
    sm_count,
    synchronize,
)
from kaiojit.runtime.tensormap import TensorMap

# name -> the module defining it, imported on first use (PEP 562)
_LAZY = {"CpuBackend": "cpu", "CudaBackend": "cuda", "MockBackend": "mock", "Module": "module",
         "CudaGraph": "graph", "can_access_peer": "peer", "copy_peer": "peer",
         "enable_peer_access": "peer"}


def _lazy_backend(name: str) -> Callable[[], GpuBackend]:
    """A factory that imports the backend's module when the backend is first made."""
    def make() -> GpuBackend:
        return __getattr__(name)()
    return make


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kaiojit.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kaiojit.runtime.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


register_backend("cuda", _lazy_backend("CudaBackend"))
register_backend("cpu", _lazy_backend("CpuBackend"))
register_backend("mock", _lazy_backend("MockBackend"))

__all__ = [
    "can_access_peer", "copy_peer", "enable_peer_access", "CudaGraph",
    "DeviceArray", "DeviceLimits", "Event", "GpuBackend", "LaunchConfig", "LoadedKernel",
    "Module", "ModuleKernel", "Stream", "TensorMap", "as_device_array", "backend",
    "check_launch_config", "default_stream", "device", "device_array", "device_array_like",
    "device_count", "device_compute_capability", "driver_version", "max_ptx_version",
    "ptx_version_for_driver", "forall_config", "get_backend", "is_cuda_available", "load_kernel",
    "register_backend", "select_device", "set_backend", "sm_count", "suggest_block_size",
    "synchronize",
    "to_device", "typeof",
]
