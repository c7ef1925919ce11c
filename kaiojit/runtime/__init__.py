"""The kaiojit runtime: backends, memory, streams, argument packing and launching.

Importing it is cheap and never touches the CUDA driver; the driver is loaded the first time
the cuda backend is used. The three built-in backends are registered here, by name.
"""

from __future__ import annotations

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
from kaiojit.runtime.cpu import CpuBackend
from kaiojit.runtime.cuda import CudaBackend
from kaiojit.runtime.driver import (
    device_compute_capability,
    driver_version,
    max_ptx_version,
    ptx_version_for_driver,
)
from kaiojit.runtime.graph import CudaGraph
from kaiojit.runtime.interop import as_device_array
from kaiojit.runtime.launch import (
    ModuleKernel,
    check_launch_config,
    forall_config,
    load_kernel,
    suggest_block_size,
)
from kaiojit.runtime.memory import DeviceArray, device_array, device_array_like, to_device
from kaiojit.runtime.mock import MockBackend
from kaiojit.runtime.module import Module
from kaiojit.runtime.peer import can_access_peer, copy_peer, enable_peer_access
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

register_backend("cuda", CudaBackend)
register_backend("cpu", CpuBackend)
register_backend("mock", MockBackend)

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
