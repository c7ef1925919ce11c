"""Random numbers in kernels: numba-cuda's xoroshiro128+ generators, with the same streams.

One generator per thread, each a 128-bit xoroshiro128+ state (Blackman and Vigna). Like
numba-cuda, the first state is made from the seed by SplitMix64, and state ``i`` is state
``i - 1`` advanced by the jump function (2**64 steps), so the streams of different threads
never overlap; the same seed gives the same numbers as ``numba.cuda.random``.

kaiojit has no record dtypes, so the states are an ``(n, 2)`` uint64 array: ``states[i, 0]``
is numba's ``s0`` and ``states[i, 1]`` its ``s1`` (the same 16 bytes a state, in the same
order). Inside a kernel::

    from kaiojit.random import xoroshiro128p_uniform_float32

    @kj.jit
    def fill(states, out):
        i = kj.grid(1)
        if i < out.shape[0]:
            out[i] = xoroshiro128p_uniform_float32(states, i)

    fill.forall(n)(create_xoroshiro128p_states(n, seed=1), out)

States are initialized on the device: the jump is linear over GF(2), so jumping ``k`` times is
one 128 x 128 bit matrix, ``J**k``. The host squares ``J`` into ``J**(2**b)``; the device
fills states ``[h, 2h)`` from states ``[0, h)`` with ``J**h`` for ``h = 1, 2, 4, ...``, in
``log2(n)`` launches (numba instead runs ``n - 1`` sequential jumps on the host).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

import kaiojit as kj
from kaiojit import float32, float64, uint64

_MASK64 = (1 << 64) - 1
_JUMP = (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922)  # xoroshiro128+'s jump polynomial, 2**64 steps
_LEVELS = 64  # J**(2**b) for b < 64: every count of jumps a uint64 can hold

__all__ = [
    "create_xoroshiro128p_states", "init_xoroshiro128p_state", "init_xoroshiro128p_states",
    "uint64_to_unit_float32", "uint64_to_unit_float64", "xoroshiro128p_jump",
    "xoroshiro128p_next", "xoroshiro128p_normal_float32", "xoroshiro128p_normal_float64",
    "xoroshiro128p_uniform_float32", "xoroshiro128p_uniform_float64",
]


# --- device functions ---------------------------------------------------------------------------


@kj.jit(device=True)
def init_xoroshiro128p_state(states, index, seed):
    """Set ``states[index]`` from a 64-bit seed with SplitMix64 (both words the same, as numba)."""
    z = uint64(seed) + uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> 30)) * uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> 27)) * uint64(0x94D049BB133111EB)
    z = z ^ (z >> 31)
    states[index, 0] = z
    states[index, 1] = z


@kj.jit(device=True)
def xoroshiro128p_next(states, index):
    """The next uint64 of generator ``index``; advances ``states[index]`` one step."""
    s0 = states[index, 0]
    s1 = states[index, 1]
    result = s0 + s1
    s1 ^= s0
    states[index, 0] = ((s0 << 55) | (s0 >> 9)) ^ s1 ^ (s1 << 14)
    states[index, 1] = (s1 << 36) | (s1 >> 28)
    return result


@kj.jit(device=True)
def xoroshiro128p_jump(states, index):
    """Advance ``states[index]`` by 2**64 steps."""
    s0 = uint64(0)
    s1 = uint64(0)
    word = uint64(0xBEAC0467EBA5FACB)
    for b in range(128):
        if b == 64:
            word = uint64(0xD86B048B86AA9922)
        if word & 1:
            s0 ^= states[index, 0]
            s1 ^= states[index, 1]
        word >>= 1
        xoroshiro128p_next(states, index)
    states[index, 0] = s0
    states[index, 1] = s1


@kj.jit(device=True)
def uint64_to_unit_float64(x):
    """The top 53 bits of ``x`` as a float64 in [0, 1)."""
    return float64(x >> 11) * (1.0 / 9007199254740992.0)


@kj.jit(device=True)
def uint64_to_unit_float32(x):
    """``uint64_to_unit_float64(x)`` rounded to float32 (as numba does; it can round up to 1)."""
    return float32(uint64_to_unit_float64(x))


@kj.jit(device=True)
def xoroshiro128p_uniform_float32(states, index):
    """A float32 uniform in [0, 1) from generator ``index``."""
    return uint64_to_unit_float32(xoroshiro128p_next(states, index))


@kj.jit(device=True)
def xoroshiro128p_uniform_float64(states, index):
    """A float64 uniform in [0, 1) from generator ``index``."""
    return uint64_to_unit_float64(xoroshiro128p_next(states, index))


@kj.jit(device=True)
def xoroshiro128p_normal_float32(states, index):
    """A standard normal float32 (Box-Muller from two float32 uniforms; the sine half is
    dropped, so every call takes two steps)."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(float32(6.283185307179586) * u2)


@kj.jit(device=True)
def xoroshiro128p_normal_float64(states, index):
    """A standard normal float64. numba-cuda draws its two uniforms as float32 and takes their
    logarithm in float32; so does this, to give the same stream."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    log_u1 = float64(math.log(u1))
    return math.sqrt(-2.0 * log_u1) * math.cos(6.283185307179586 * float64(u2))


# --- initialization -----------------------------------------------------------------------------


@kj.jit
def _set_state(states, s0, s1):
    states[0, 0] = s0
    states[0, 1] = s1


@kj.jit
def _advance_states(states, jumps, level, half):
    """``states[half + i] = J**half @ states[i]``, where ``jumps[level]`` is ``J**half`` as
    128 columns of two words (the image of each state bit)."""
    i = kj.grid(1)
    if i < half and half + i < states.shape[0]:
        r0 = uint64(0)
        r1 = uint64(0)
        for w in range(2):
            bits = states[i, w]
            for b in range(64):
                take = uint64(0) - (bits & 1)  # all ones where the bit is set: no branch
                r0 ^= jumps[level, 64 * w + b, 0] & take
                r1 ^= jumps[level, 64 * w + b, 1] & take
                bits >>= 1
        states[half + i, 0] = r0
        states[half + i, 1] = r1


def _splitmix64(seed: int) -> int:
    z = (seed + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _jump_state(state: int) -> int:
    """One jump of a state held as the 128-bit integer ``s0 | s1 << 64``."""
    s0, s1 = state & _MASK64, state >> 64
    acc0 = acc1 = 0
    for word in _JUMP:
        for b in range(64):
            if word >> b & 1:
                acc0 ^= s0
                acc1 ^= s1
            s1 ^= s0
            s0 = (((s0 << 55) | (s0 >> 9)) ^ s1 ^ (s1 << 14)) & _MASK64
            s1 = ((s1 << 36) | (s1 >> 28)) & _MASK64
    return acc0 | acc1 << 64


@functools.cache
def _jump_powers() -> np.ndarray:
    """``J**(2**b)`` for ``b < 64``, each as 128 columns of two uint64 words: shape (64, 128, 2)."""
    images = [_jump_state(1 << j) for j in range(128)]
    bits = np.array([[image >> row & 1 for row in range(128)] for image in images], np.float64)
    matrix = bits.T  # matrix[row, column]: bit ``row`` of the image of bit ``column``
    powers = np.empty((_LEVELS, 128, 2), np.uint64)
    for level in range(_LEVELS):
        columns = np.packbits(matrix.T.astype(np.uint8), axis=1, bitorder="little")
        powers[level] = np.ascontiguousarray(columns).view("<u8")
        matrix = (matrix @ matrix) % 2  # exact: the sums stay below 2**53
    return powers


def _apply(columns: np.ndarray, state: int) -> int:
    out = 0
    for j in range(128):
        if state >> j & 1:
            out ^= int(columns[j, 0]) | int(columns[j, 1]) << 64
    return out


def _first_state(seed: int, subsequence_start: int) -> int:
    """State 0: SplitMix64 of the seed, jumped ``subsequence_start`` times."""
    z = _splitmix64(seed)
    state = z | z << 64
    powers = _jump_powers()
    for level in range(subsequence_start.bit_length()):
        if subsequence_start >> level & 1:
            state = _apply(powers[level], state)
    return state


_DEVICE_POWERS: dict[tuple[Any, int], Any] = {}  # the jump table, uploaded once a device


def _device_powers() -> Any:
    backend = kj.get_backend()
    key = (backend, backend.current_device())
    table = _DEVICE_POWERS.get(key)
    if table is None:
        table = _DEVICE_POWERS[key] = kj.to_device(_jump_powers())
    return table


def _as_uint64(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}")
    return int(value) & _MASK64


def init_xoroshiro128p_states(states: Any, seed: int, subsequence_start: int = 0,
                              stream: Any = 0) -> None:
    """Initialize ``states`` (an ``(n, 2)`` uint64 array) for ``n`` generators: generator
    ``i`` starts ``(subsequence_start + i) * 2**64`` steps into the stream of ``seed``."""
    seed = _as_uint64(seed, "seed")
    if isinstance(subsequence_start, (int, np.integer)) and subsequence_start < 0:
        raise ValueError(f"subsequence_start must be >= 0, got {subsequence_start}")
    start = _as_uint64(subsequence_start, "subsequence_start")
    if isinstance(states, np.ndarray):
        _check_states(states)
        device = kj.to_device(states, stream=stream)
        init_xoroshiro128p_states(device, seed, start, stream)
        device.copy_to_host(out=states, stream=stream)
        kj.synchronize()
        return
    if not isinstance(states, kj.DeviceArray):
        states = kj.as_device_array(states)
    _check_states(states)
    n = states.shape[0]
    if n == 0:
        return
    state = _first_state(seed, start)
    _set_state[1, 1, stream](states, np.uint64(state & _MASK64), np.uint64(state >> 64))
    table = _device_powers()
    half, level = 1, 0
    while half < n:
        count = min(half, n - half)
        block = min(256, count)
        _advance_states[(count + block - 1) // block, block, stream](
            states, table, np.int64(level), np.int64(half))
        half, level = 2 * half, level + 1


def _check_states(states: Any) -> None:
    if states.ndim != 2 or states.shape[1] != 2 or states.dtype != np.uint64:
        raise TypeError(f"states must be an (n, 2) uint64 array, got shape {states.shape} "
                        f"dtype {states.dtype}")


def create_xoroshiro128p_states(n: int, seed: int, subsequence_start: int = 0,
                                stream: Any = 0) -> Any:
    """A new ``(n, 2)`` uint64 device array of ``n`` initialized generator states."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    states = kj.device_array((int(n), 2), np.uint64)
    init_xoroshiro128p_states(states, seed, subsequence_start, stream)
    return states
