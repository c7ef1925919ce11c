"""The occupancy calculator against hand-computed H200 cases, ``kj.occupancy`` on any backend,
and (``gpu``) the calculator against the driver's answers."""

from __future__ import annotations

import pytest

import kaiojit as kj
from kaiojit.tools.occupancy_calc import H200, SmLimits, calculate, max_threads_for_registers
from kaiojit.tools.resources import Resources

SIG = "void(float32[:], float32[:], int32)"


def kernel_resources(registers: int, shared: int = 0) -> Resources:
    return Resources(registers=registers, shared_bytes=shared, local_bytes=0, const_bytes=0,
                     max_threads_per_block=max_threads_for_registers(registers))


# H200: 64K registers an SM in 4 partitions of 16K, given to warps in units of 256;
# 64 warps and 32 blocks an SM; 228 KB shared an SM, 1 KB reserved a block, 128 B units.

def test_register_limited():
    # 128 regs * 32 = 4096 a warp; 16384 / 4096 = 4 warps a partition, 16 an SM;
    # a 256-thread block is 8 warps: 2 blocks (warps alone would allow 8)
    occ = calculate(kernel_resources(128), 256)
    assert (occ.active_blocks_per_sm, occ.limiting_factor) == (2, "registers")
    assert occ.occupancy_fraction == 16 / 64
    # at most 16 warps of this kernel fit an SM, and any block size of 512 or less that
    # divides them evenly reaches them: the largest is 512, one block an SM
    assert (occ.suggested_block_size, occ.min_grid_size) == (512, 132)


def test_shared_memory_limited():
    # 48 KB static + 1 KB reserved = 50176 B a block; 233472 / 50176 = 4.65: 4 blocks
    occ = calculate(kernel_resources(32, shared=48 * 1024), 128)
    assert (occ.active_blocks_per_sm, occ.limiting_factor) == (4, "shared memory")
    assert occ.occupancy_fraction == 4 * 4 / 64
    assert dict(occ.limits) == {"warps": 16, "registers": 16, "shared memory": 4, "blocks": 32}


def test_shared_memory_is_allocated_in_128_byte_units():
    # 45670 dynamic + 1024 reserved = 46694 B, five of which (233470 B) would fit in 233472;
    # rounded up to 46720 B only four do
    occ = calculate(kernel_resources(32), 64, dynamic_shared=45670)
    assert (occ.active_blocks_per_sm, occ.limiting_factor) == (4, "shared memory")
    assert calculate(kernel_resources(32), 64, dynamic_shared=45670 - 128).active_blocks_per_sm == 5


def test_block_count_limited():
    # one-warp blocks of a 16-register kernel: 64 would fit by warps, 32 blocks is the cap
    occ = calculate(kernel_resources(16), 32)
    assert (occ.active_blocks_per_sm, occ.limiting_factor) == (32, "blocks")
    assert occ.occupancy_fraction == 0.5


def test_warp_limited():
    # 16 regs * 32 = 512 a warp: registers allow 128 warps; threads allow 64, 8 blocks of 256
    occ = calculate(kernel_resources(16), (32, 8))
    assert (occ.block_size, occ.active_blocks_per_sm, occ.limiting_factor) == (256, 8, "warps")
    assert occ.occupancy_fraction == 1.0
    assert occ.suggested_block_size == 1024


def test_the_suggestion_is_the_largest_block_of_highest_occupancy():
    # 40 regs: 1280 a warp, 12 warps a partition, 48 an SM. 1024 threads (32 warps) give one
    # block, 1024 threads; 768 (24 warps) gives two, 1536 threads, the most any size reaches
    occ = calculate(kernel_resources(40), 1024)
    assert (occ.active_blocks_per_sm, occ.occupancy_fraction) == (1, 0.5)
    assert (occ.suggested_block_size, occ.min_grid_size) == (768, 2 * 132)


@pytest.mark.parametrize("registers,threads", [(255, 256), (128, 512), (80, 768), (72, 896),
                                               (64, 1024), (16, 1024)])
def test_max_threads_for_registers(registers, threads):
    # warps fit in groups of 4 (one a partition): 255 regs -> 8192 a warp -> 8 warps;
    # 80 -> 2560 -> 25 warps -> 24; 72 -> 2304 -> 28 warps
    assert max_threads_for_registers(registers) == threads


def test_blocks_the_kernel_cannot_launch_are_launch_errors():
    with pytest.raises(kj.LaunchError, match="this kernel's registers allow at most 896"):
        calculate(kernel_resources(72), 928)
    with pytest.raises(kj.LaunchError, match="the device allows at most 1024"):
        calculate(kernel_resources(16), (32, 33))
    with pytest.raises(kj.LaunchError, match="exceed the device's 232448 bytes per block"):
        calculate(kernel_resources(16, shared=1024), 64, dynamic_shared=227 * 1024)
    with pytest.raises(kj.LaunchError, match="block must be an int or a tuple"):
        calculate(kernel_resources(16), (32, 2, 2, 2))


BIG_SHARED = 12288  # float32 words: 48 KB, the most a block has without opting in


@kj.jit
def big_shared(out, x, n):
    s = kj.shared.array(BIG_SHARED, kj.float32)
    i = kj.grid(1)
    s[kj.threadIdx.x] = x[i % n]
    kj.syncthreads()
    out[i % n] = s[(kj.threadIdx.x + 1) % kj.blockDim.x]


def test_kj_occupancy_of_a_kernel(kj_backend):
    occ = kj.occupancy(big_shared, SIG, 64)
    assert occ.source == ("driver" if kj_backend == "cuda" else "calculator")
    # 48 KB static + 1 KB reserved a block
    assert occ.active_blocks_per_sm == H200.shared_per_sm // (BIG_SHARED * 4 + 1024)
    assert occ.limiting_factor == "shared memory"
    with pytest.raises(kj.LaunchError):
        kj.occupancy(big_shared, SIG, 64, shared=200 * 1024)


def test_kj_occupancy_takes_a_kernel():
    with pytest.raises(TypeError, match="takes a @kj.jit kernel"):
        kj.occupancy(lambda out: None, SIG, 64)


# --- against the driver -------------------------------------------------------------------------

@kj.jit
def dynamic_shared(out, x, n):
    s = kj.shared.array(0, kj.float32)
    i = kj.grid(1)
    s[kj.threadIdx.x] = x[i % n]
    kj.syncthreads()
    out[i % n] = s[(kj.threadIdx.x + 3) % kj.blockDim.x]


def hungry(out, x, n):
    acc = kj.local.array(48, kj.float32)
    i = kj.grid(1)
    for j in range(48):
        acc[j] = x[(i + j * n) % n]
    for j in range(48):
        acc[j] = acc[j] * acc[47 - j] + acc[(j + 5) % 48]
    for j in range(48):
        out[(i + j * n) % n] = acc[j] * acc[(j + 7) % 48]


KERNELS = {"big_shared": big_shared, "dynamic_shared": dynamic_shared,
           **{f"hungry_{r}": kj.jit(max_registers=r)(hungry) for r in (40, 72, 128, 255)}}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("shared", [0, 20000, 100000])
def test_the_calculator_agrees_with_the_driver(name, shared):
    import kaiojit.runtime as rt
    from kaiojit.runtime.occupancy_query import sm_limits

    backend = rt.get_backend()
    if backend.name != "cuda":
        pytest.skip("needs the cuda backend")
    kernel = KERNELS[name]
    limits = SmLimits(**sm_limits(backend, backend.current_device()))
    checked = 0
    for block in (32, 96, 128, 256, 384, 640, 1024):
        try:
            driver = kj.occupancy(kernel, SIG, block, shared)
        except kj.LaunchError:
            continue  # more threads than the kernel's registers allow
        loaded = backend.load_kernel(kernel.compile(SIG, _spec(backend)))
        attrs = backend.function_attributes(loaded.on_device(backend.current_device()).fn)
        mine = calculate(Resources.from_attributes(attrs), block, shared, limits)
        assert (mine.active_blocks_per_sm, mine.suggested_block_size, mine.min_grid_size) == (
            driver.active_blocks_per_sm, driver.suggested_block_size, driver.min_grid_size), (
            name, block, shared, attrs)
        checked += 1
    assert checked >= 2
    assert limits.sm_count == H200.sm_count and limits.shared_per_sm == H200.shared_per_sm


def _spec(backend):
    return backend.target_spec()

