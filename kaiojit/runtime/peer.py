"""Several GPUs of one host: peer access and copies between devices (``cuMemcpyPeerAsync``).

Arrays live on the device that was current when they were made; a launch takes arrays of the
launch's device only (others are a TypeError naming the parameter). Moving data between
devices is explicit: :func:`copy_peer`, which the driver routes over NVLink or PCIe, directly
when peer access is enabled and staged through the host otherwise.
"""

from __future__ import annotations

from typing import Any

from kaiojit.runtime.backend import get_backend
from kaiojit.runtime.memory import DeviceArray
from kaiojit.runtime.stream import stream_handle


def can_access_peer(device: int, peer: int) -> bool:
    """Whether ``device`` can read and write ``peer``'s memory directly."""
    return get_backend().can_access_peer(device, peer)


def enable_peer_access(device: int, peer: int) -> bool:
    """Let kernels and copies on ``device`` reach ``peer``'s memory; False where impossible."""
    return get_backend().enable_peer_access(device, peer)


def copy_peer(dst: DeviceArray, src: DeviceArray, stream: Any = None) -> None:
    """Copy ``src`` into ``dst``, arrays of one shape and dtype on any devices of this host."""
    if not isinstance(dst, DeviceArray) or not isinstance(src, DeviceArray):
        raise TypeError("copy_peer copies between kaiojit DeviceArrays (use kj.as_device_array "
                        "for CuPy or PyTorch arrays)")
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"copy_peer needs arrays of one shape and dtype, got {dst.shape} "
                         f"{dst.dtype} and {src.shape} {src.dtype}")
    if not (dst.is_c_contiguous and src.is_c_contiguous):
        raise ValueError("copy_peer copies contiguous arrays; copy a strided view first")
    backend = get_backend()
    handle = None if stream is None else stream_handle(stream)
    if dst.device_id == src.device_id:
        backend.memcpy_dtod(dst.ptr, src.ptr, src.nbytes, handle)
        return
    backend.memcpy_peer(dst.ptr, dst.device_id, src.ptr, src.device_id, src.nbytes, handle)
