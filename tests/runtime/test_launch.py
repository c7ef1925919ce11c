"""Launch configuration checks, LoadedKernel caching, the builder and DEBUG_SYNC, on the mock."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import kaiojit.runtime as rt
from kaiojit.errors import CudaError, LaunchError
from kaiojit.runtime.backend import DeviceLimits
from kaiojit.runtime.launch import check_launch_config, forall_config, normalize_dim3

from .ptx_kernels import TENSORMAP_PTX, image

EMPTY_PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n)\n{ ret; }"
LIMITS = DeviceLimits(max_shared_per_block_optin=227 * 1024)


def test_dims_normalize_to_three():
    assert normalize_dim3(5, "grid") == (5, 1, 1)
    assert normalize_dim3((2, 3), "grid") == (2, 3, 1)
    assert normalize_dim3([2, 3, 4], "grid") == (2, 3, 4)
    assert normalize_dim3(np.int64(7), "block") == (7, 1, 1)


@pytest.mark.parametrize("grid, block, shared, message", [
    (1, 1025, 0, "kernel 'k': block (1025, 1, 1) has 1025 threads; the device allows at most "
                 "1024 threads per block"),
    (1, (32, 32, 2), 0, "kernel 'k': block (32, 32, 2) has 2048 threads; the device allows at "
                        "most 1024 threads per block"),
    (1, (1, 1, 65), 0, "kernel 'k': block (1, 1, 65) has block.z = 65; the device allows at "
                       "most 64"),
    (2**31, 1, 0, "kernel 'k': grid (2147483648, 1, 1) has grid.x = 2147483648; the device "
                  "allows at most 2147483647"),
    ((1, 65536), 1, 0, "kernel 'k': grid (1, 65536, 1) has grid.y = 65536; the device allows "
                       "at most 65535"),
    (0, 32, 0, "kernel 'k': grid (0, 1, 1) has grid.x = 0; every dimension must be at least 1"),
    (1, (32, -1), 0, "kernel 'k': block (32, -1, 1) has block.y = -1; every dimension must "
                     "be at least 1"),
    (1, 32, -4, "kernel 'k': shared memory must be >= 0 bytes, got -4"),
    (1, 32, 228 * 1024, "kernel 'k': 233472 bytes of dynamic shared memory exceed the "
                        "device's 232448 bytes per block"),
    ((1, 2, 3, 4), 32, 0, "kernel 'k': grid must be an int or a tuple of 1 to 3 ints, got "
                          "(1, 2, 3, 4)"),
    (1.5, 32, 0, "kernel 'k': grid must be an int or a tuple of 1 to 3 ints, got 1.5"),
])
def test_impossible_configurations_are_launch_errors(grid, block, shared, message):
    with pytest.raises(LaunchError) as info:
        check_launch_config(grid, block, shared, None, LIMITS, "k")
    assert str(info.value) == message


def test_static_shared_counts_against_the_limit():
    with pytest.raises(LaunchError, match=r"^kernel 'k': 200000 bytes of dynamic shared memory "
                                          r"\+ 40000 static exceed"):
        check_launch_config(1, 1, 200000, None, LIMITS, "k", static_shared=40000)


def test_register_limited_kernel():
    with pytest.raises(LaunchError, match=r"this kernel can run at most 512 per block"):
        check_launch_config(1, 1024, 0, None, LIMITS, "k", max_threads_for_kernel=512)


def test_cluster_checks():
    assert check_launch_config((4, 2), 128, 0, (2, 2), LIMITS).cluster == (2, 2, 1)
    with pytest.raises(LaunchError, match=r"grid.x = 3 is not a multiple of cluster.x = 2"):
        check_launch_config(3, 128, 0, 2, LIMITS)
    with pytest.raises(LaunchError, match=r"cluster \(16, 1, 1\) has 16 blocks; a cluster holds "
                                          r"1 to 8 blocks"):
        check_launch_config(16, 128, 0, 16, LIMITS)
    old = DeviceLimits(max_cluster_size=0)
    with pytest.raises(LaunchError, match=r"clusters need a device of compute capability 9.0"):
        check_launch_config(2, 128, 0, 2, old)


def test_launch_error_comes_before_anything_is_launched(mock):
    k = mock.load_kernel(image("k", EMPTY_PTX, "void(int32)", "n"))
    with pytest.raises(LaunchError):
        k.launch(1, 2048, None, 0, (1,))
    assert mock.launches == []


def test_launch_records_geometry_and_caches_per_image(mock):
    img = image("k", EMPTY_PTX, "void(int32)", "n")
    k = mock.load_kernel(img)
    assert mock.load_kernel(img) is k
    k.launch((3, 2), (64, 2), 5, 1024, (9,))
    k.launch([3, 2], [64, 2], 5, 1024, (10,))  # unhashable lists work too
    first, second = mock.launches
    assert (first.grid, first.block, first.shared_mem, first.stream) == ((3, 2, 1), (64, 2, 1),
                                                                          1024, 5)
    assert second.grid == (3, 2, 1) and struct.unpack("<i", second.params[0])[0] == 10


def test_dynamic_shared_over_48k_raises_the_attribute_once(mock):
    k = mock.load_kernel(image("k", EMPTY_PTX, "void()", ""))
    k.launch(1, 32, None, 40 * 1024, ())
    assert mock.dynamic_shared_set == []
    k.launch(1, 32, None, 100 * 1024, ())
    k.launch(1, 32, None, 100 * 1024, ())
    k.launch(1, 32, None, 64 * 1024, ())
    assert mock.dynamic_shared_set == [("k", 100 * 1024)]


def test_streams_of_every_kind(mock):
    k = mock.load_kernel(image("k", EMPTY_PTX, "void()", ""))

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x77)

    class TorchLike:
        cuda_stream = 0x88

    s = rt.Stream()
    for stream, handle in [(None, 0), (0, 0), (0x55, 0x55), (s, s.handle), (Protocol(), 0x77),
                           (TorchLike(), 0x88), (rt.default_stream(), 0)]:
        k.launch(1, 1, stream, 0, ())
        assert mock.launches[-1].stream == handle
    with pytest.raises(TypeError, match=r"not a stream: str"):
        k.launch(1, 1, "s", 0, ())


def test_forall_config_covers_n(mock):
    k = mock.load_kernel(image("k", EMPTY_PTX, "void()", ""))
    assert forall_config(k, 1000) == (4, 256)
    assert forall_config(k, 0) == (1, 256)
    assert rt.suggest_block_size(k) == 256


def test_debug_sync_reports_the_launch_and_where_it_came_from(mock):
    mock.debug_sync = True
    k = mock.load_kernel(image("k", EMPTY_PTX, "void(int32)", "n"))
    k.launch(2, 64, None, 0, (1,))
    assert mock.synchronize_calls == 1
    mock.fail_next_sync = CudaError("CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access "
                                    "was encountered")

    def launching_function():
        k.launch((2, 3), 64, None, 128, (1,))

    with pytest.raises(CudaError) as info:
        launching_function()
    message = str(info.value)
    assert message.startswith("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
                              "encountered (kernel 'k', grid=(2, 3, 1), block=(64, 1, 1), "
                              "shared_mem=128; KAIOJIT_DEBUG_SYNC caught this fault")
    assert "in launching_function" in message and "test_launch.py" in message


def test_builder_packs_in_order_with_a_tensormap_in_the_middle(mock):
    mod = rt.Module.from_ptx(TENSORMAP_PTX)
    fn = mod.get_function("tmap")
    tm = bytes(range(128))
    fn.grid(4).block(32).shared_mem(256).arg_ptr(0x1000).arg_tensormap(tm).arg_u32(7).launch()
    launch = mock.launches[-1]
    assert (launch.kernel, launch.grid, launch.block, launch.shared_mem) == (
        "tmap", (4, 1, 1), (32, 1, 1), 256)
    assert launch.params == (struct.pack("<Q", 0x1000), tm, struct.pack("<I", 7))


def test_builder_every_scalar_method(mock):
    fn = rt.Module.from_ptx(EMPTY_PTX).get_function("k")
    a = rt.device_array(4, np.float32)
    (fn.grid(1, 2).block(8, 8).cluster(1, 2).arg_ptr(a).arg_u32(2**32 - 1).arg_i32(-3)
       .arg_u64(2**64 - 1).arg_i64(-(2**63)).arg_f32(0.5).arg_f64(-0.25).launch(0x10))
    launch = mock.launches[-1]
    assert launch.cluster == (1, 2, 1) and launch.stream == 0x10
    assert launch.params == (struct.pack("<Q", a.ptr), struct.pack("<I", 2**32 - 1),
                             struct.pack("<i", -3), struct.pack("<Q", 2**64 - 1),
                             struct.pack("<q", -(2**63)), struct.pack("<f", 0.5),
                             struct.pack("<d", -0.25))


def test_builder_rejects_out_of_range_values(mock):
    fn = rt.Module.from_ptx(EMPTY_PTX).get_function("k")
    with pytest.raises(ValueError, match=r"argument 1 \(uint32\): -1 is not an integer in "
                                         r"\[0, 4294967295\]"):
        fn.arg_ptr(0).arg_u32(-1)
    with pytest.raises(ValueError, match=r"needs 128 bytes, got 64"):
        fn.arg_tensormap(bytes(64))
    with pytest.raises(LaunchError, match=r"block \(2048, 1, 1\) has 2048 threads"):
        fn.block(2048).launch()
    assert mock.launches == []


def test_builder_missing_function_is_a_cuda_error(mock):
    mod = rt.Module.from_ptx(EMPTY_PTX)
    with pytest.raises(CudaError, match=r"CUDA_ERROR_NOT_FOUND: named symbol not found "
                                        r"\(kernel 'nope'\)"):
        mod.get_function("nope")
