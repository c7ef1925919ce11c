"""kj.random: xoroshiro128+ generators giving numba-cuda's streams, checked against a plain
Python reference of the published algorithm and against values numba-cuda produced."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.lib.random import (
    create_xoroshiro128p_states,
    init_xoroshiro128p_state,
    init_xoroshiro128p_states,
    xoroshiro128p_jump,
    xoroshiro128p_next,
    xoroshiro128p_normal_float32,
    xoroshiro128p_normal_float64,
    xoroshiro128p_uniform_float32,
    xoroshiro128p_uniform_float64,
)
from tests.lib.conftest import compile_for_gpu

rng = np.random.default_rng()
M64 = (1 << 64) - 1

# --- a plain-Python reference: xoroshiro128+ 1.0 and splitmix64 as Blackman and Vigna publish
# them, seeded and jumped the way numba-cuda's numba/cuda/random.py does ---------------------


def ref_splitmix64(seed: int) -> int:
    z = (seed + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & M64


def ref_next(state: list[int]) -> int:
    s0, s1 = state
    result = (s0 + s1) & M64
    s1 ^= s0
    state[0] = rotl(s0, 55) ^ s1 ^ ((s1 << 14) & M64)
    state[1] = rotl(s1, 36)
    return result


def ref_jump(state: list[int]) -> None:
    acc = [0, 0]
    for word in (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922):
        for b in range(64):
            if word >> b & 1:
                acc[0] ^= state[0]
                acc[1] ^= state[1]
            ref_next(state)
    state[:] = acc


def ref_states(n: int, seed: int, subsequence_start: int = 0) -> np.ndarray:
    """numba's host initialization: splitmix64 of the seed, then one jump per state."""
    state = [ref_splitmix64(seed & M64)] * 2
    for _ in range(subsequence_start):
        ref_jump(state)
    out = np.empty((n, 2), np.uint64)
    for i in range(n):
        if i:
            ref_jump(state)
        out[i] = state
    return out


def ref_uniform64(x: int) -> float:
    return (x >> 11) * 2.0 ** -53


def ref_uniform32(x: int) -> np.float32:
    return np.float32(ref_uniform64(x))


def ref_normal32(u1: np.float32, u2: np.float32) -> np.float32:
    return np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(2 * math.pi) * u2)


def ref_normal64(u1: np.float32, u2: np.float32) -> float:
    # numba-cuda takes the logarithm of the float32 uniform in float32
    return math.sqrt(-2.0 * float(np.log(u1))) * math.cos(2 * math.pi * float(u2))


# --- initialization -------------------------------------------------------------------------


def fresh_seed() -> int:
    return int(rng.integers(0, 2 ** 63)) * 2 + int(rng.integers(0, 2))


def test_states_match_the_reference(backend):
    seed = fresh_seed()
    n = int(rng.integers(70, 300))  # across several powers of two
    start = int(rng.integers(0, 4))
    states = create_xoroshiro128p_states(n, seed, subsequence_start=start)
    assert states.shape == (n, 2) and states.dtype == np.uint64
    np.testing.assert_array_equal(states.copy_to_host(), ref_states(n, seed, start))
    compile_for_gpu(kj.random._set_state, kj.random._advance_states)


# Known answers: the first four states numba-cuda 0.30.4 made for these (seed,
# subsequence_start), as [(s0, s1), ...]; from create_xoroshiro128p_states run under its CUDA
# simulator (NUMBA_ENABLE_CUDASIM=1), numba 0.68.1, NumPy 2.2.6.
NUMBA_STATES = {
    (1, 0): [(0x910A2DEC89025CC1, 0x910A2DEC89025CC1), (0x73C19A5348FC9098, 0x6C96C932F21D71EE),
             (0x0B3D0CD6DDFA7A4C, 0xD3C2C33E9B8E707A), (0x3B80C389FCD31EE7, 0xB43C70624D182BBB)],
    (42, 0): [(0xBDD732262FEB6E95, 0xBDD732262FEB6E95), (0x045A2C270718BC3B, 0x05B3939A23E533B4),
              (0xA67324E5ECCCB8DC, 0x4A81BBD6C315729E), (0xEF6261E44FD8ABC9, 0x0C6EBFA4759A0F22)],
    (12345, 3): [(0x81677962ECC05FC7, 0x6AD0E4DAB75AD20B),
                 (0xBEFA25F3118B9BBF, 0x6C72B22D7DB22783),
                 (0x31BD3AD7BB6686A0, 0x986B232C0E34383E),
                 (0x7D88183E4EF235F5, 0x1059F7E319C7E8E8)],
    (2 ** 64 - 1, 0): [(0xE4D971771B652C20, 0xE4D971771B652C20),
                       (0xF06E5493D9197688, 0x5D1905E55C940204),
                       (0x451FC10B7CD06B84, 0xC2C48037AD7BEC7F),
                       (0x9429EAE766DBFAD8, 0xF9E4513E318D0A1D)],
}


@pytest.mark.parametrize("seed, start", list(NUMBA_STATES))
def test_states_known_answers_from_numba_cuda(backend, seed, start):
    states = create_xoroshiro128p_states(4, seed, subsequence_start=start).copy_to_host()
    assert [(int(a), int(b)) for a, b in states] == NUMBA_STATES[seed, start]


def test_subsequence_start_jumps_by_whole_generators(backend):
    """Generator i of subsequence_start k is generator 0 of subsequence_start k + i, for
    starts far beyond what a loop of jumps could reach."""
    seed = fresh_seed()
    start = int(rng.integers(2 ** 40, 2 ** 62))
    five = create_xoroshiro128p_states(5, seed, subsequence_start=start).copy_to_host()
    for i in (1, 4):
        one = create_xoroshiro128p_states(1, seed, subsequence_start=start + i).copy_to_host()
        np.testing.assert_array_equal(one[0], five[i])


def test_init_in_place_on_a_stream_and_on_a_host_array(backend):
    seed = fresh_seed()
    n = int(rng.integers(20, 60))
    expected = ref_states(n, seed)
    states = kj.to_device(np.full((n, 2), 0xDEAD, np.uint64))  # poisoned
    stream = kj.Stream()
    init_xoroshiro128p_states(states, seed, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(states.copy_to_host(), expected)
    host = np.full((n, 2), 0xDEAD, np.uint64)
    init_xoroshiro128p_states(host, seed)
    np.testing.assert_array_equal(host, expected)


def test_no_states(backend):
    assert create_xoroshiro128p_states(0, fresh_seed()).shape == (0, 2)


@pytest.mark.parametrize("call, error, message", [
    (lambda: create_xoroshiro128p_states(-1, 1), ValueError, "n must be a non-negative"),
    (lambda: create_xoroshiro128p_states(4, 1.5), TypeError, "seed must be an integer"),
    (lambda: create_xoroshiro128p_states(4, 1, -2), ValueError, "subsequence_start must be >= 0"),
    (lambda: init_xoroshiro128p_states(kj.device_array((4, 3), np.uint64), 1), TypeError,
     r"states must be an \(n, 2\) uint64 array, got shape \(4, 3\)"),
    (lambda: init_xoroshiro128p_states(kj.device_array((4, 2), np.int64), 1), TypeError,
     "dtype int64"),
])
def test_bad_arguments_are_named(backend, call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- drawing ----------------------------------------------------------------------------------


@kj.jit
def draw_all(states, u32, u64, n32, n64):
    i = kj.grid(1)
    if i < u32.shape[0]:
        for j in range(u32.shape[1]):
            u32[i, j] = xoroshiro128p_uniform_float32(states, i)
            u64[i, j] = xoroshiro128p_uniform_float64(states, i)
            n32[i, j] = xoroshiro128p_normal_float32(states, i)
            n64[i, j] = xoroshiro128p_normal_float64(states, i)


def draw(states, n: int, k: int) -> list[np.ndarray]:
    outs = [kj.to_device(np.full((n, k), np.nan, dtype))
            for dtype in (np.float32, np.float64, np.float32, np.float64)]
    draw_all.forall(n)(states, *outs)
    return [o.copy_to_host() for o in outs]


def test_draws_match_the_reference(backend):
    seed = fresh_seed()
    n, k = int(rng.integers(5, 40)), int(rng.integers(3, 9))
    u32, u64, n32, n64 = draw(create_xoroshiro128p_states(n, seed), n, k)
    for i, state in enumerate(ref_states(n, seed).tolist()):
        for j in range(k):
            assert u32[i, j] == ref_uniform32(ref_next(state))
            assert u64[i, j] == ref_uniform64(ref_next(state))
            a, b = ref_uniform32(ref_next(state)), ref_uniform32(ref_next(state))
            # transcendental functions: libdevice on the GPU, libm on the host
            np.testing.assert_allclose(n32[i, j], ref_normal32(a, b), rtol=1e-5, atol=1e-5)
            a, b = ref_uniform32(ref_next(state)), ref_uniform32(ref_next(state))
            # ... and the float32 logarithm inside the float64 normal: one float32 ulp
            np.testing.assert_allclose(n64[i, j], ref_normal64(a, b), rtol=1e-6, atol=1e-6)
    assert ((0 <= u64) & (u64 < 1)).all() and ((0 <= u32) & (u32 <= 1)).all()
    compile_for_gpu(draw_all)


# Known answers: three rounds of (uniform_float32, uniform_float64, normal_float32,
# normal_float64) for three generators of seed 7, from numba-cuda 0.30.4 under its CUDA
# simulator. The simulator evaluates the normals' log and cos in float64 where the GPU uses
# float32, so the normals agree to float32 precision, the uniforms exactly.
NUMBA_DRAWS_SEED_7 = [
    [[0.7796595, 0.5721662, 0.4546682], [0.09631481, 0.119100586, 0.42742813],
     [0.9711314, 0.118625626, 0.8880806]],
    [[0.9206832612273267, 0.4271574692022303, 0.08880487162889295],
     [0.05440889886332212, 0.829099824137604, 0.5092020037404013],
     [0.7849114158449384, 0.4331573593617176, 0.01807889110552252]],
    [[-1.337733, -1.3083774, -0.7364738], [-1.6305772, 0.4081799, -1.3476099],
     [-0.6237084, 0.44398278, 0.36410478]],
    [[-0.4480467914953481, -2.1729356424086594, 0.871502360606572],
     [0.6876237283781986, 1.2911827812625127, -0.2621511602433665],
     [-0.5979199966447393, 0.8019734593338105, -1.0718926334240062]],
]


def test_draws_known_answers_from_numba_cuda(backend):
    u32, u64, n32, n64 = draw(create_xoroshiro128p_states(3, seed=7), 3, 3)
    known = NUMBA_DRAWS_SEED_7
    np.testing.assert_array_equal(u32, np.array(known[0], np.float32))
    np.testing.assert_array_equal(u64, np.array(known[1], np.float64))
    np.testing.assert_allclose(n32, np.array(known[2], np.float32), rtol=1e-5)
    np.testing.assert_allclose(n64, np.array(known[3], np.float64), rtol=1e-5)


@kj.jit
def seed_step_jump(states, seeds, out):
    i = kj.grid(1)
    if i < out.shape[0]:
        init_xoroshiro128p_state(states, i, seeds[i])
        out[i, 0] = xoroshiro128p_next(states, i)
        xoroshiro128p_jump(states, i)
        out[i, 1] = xoroshiro128p_next(states, i)


def test_seed_next_and_jump_device_functions(backend):
    n = int(rng.integers(3, 30))
    seeds = rng.integers(0, 2 ** 63, n, dtype=np.int64)
    states = kj.to_device(np.full((n, 2), 0xDEAD, np.uint64))
    out = kj.to_device(np.full((n, 2), 0xDEAD, np.uint64))
    seed_step_jump.forall(n)(states, kj.to_device(seeds), out)
    got = out.copy_to_host()
    for i, seed in enumerate(seeds.tolist()):
        state = [ref_splitmix64(seed)] * 2
        first = ref_next(state)
        ref_jump(state)
        assert (int(got[i, 0]), int(got[i, 1])) == (first, ref_next(state))
    np.testing.assert_array_equal(states.copy_to_host(), ref_states_after(seeds))
    compile_for_gpu(seed_step_jump)


def ref_states_after(seeds: np.ndarray) -> np.ndarray:
    """The states seed_step_jump leaves: seeded, one step, a jump, one step."""
    out = np.empty((len(seeds), 2), np.uint64)
    for i, seed in enumerate(seeds.tolist()):
        state = [ref_splitmix64(seed)] * 2
        ref_next(state)
        ref_jump(state)
        ref_next(state)
        out[i] = state
    return out
