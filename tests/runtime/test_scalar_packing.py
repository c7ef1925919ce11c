"""Every scalar dtype through every launch path, read back in a kernel bit for bit.

A scalar argument is packed from one fact about its type (``ScalarFacts.slot_format`` and,
for bfloat16 and fp8, ``encode``): the general path's writers, the fast form's ``struct``
packing and the raw-launch builder read it there, and the DLPack readers take the type's
DLPack code from the same place. A bfloat16 once travelled as IEEE half (1.5 arrived as
0.125); these tests send random values of each type, declared and passed as NumPy /
ml_dtypes scalars, and compare the bytes the kernel stored with the value's own bytes.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kaiojit as kj
from kaiojit import types as kt
from kaiojit.launch.launcher import Launcher
from kaiojit.runtime import dlpack, interop
from kaiojit.runtime.native import dlpack_exchange as dx
from kaiojit.runtime.native.fastlaunch import source_of

pytest.importorskip("ml_dtypes")  # bfloat16 and fp8 values are ml_dtypes scalars

DTYPES = [t for t in kt.SCALARS.values()]
# DLPack's DLDataTypeCode, from dlpack.h (v1.1), independently of kaiojit's table
DLPACK_CODES = {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5, "bfloat16": 4, "float8_e4m3fn": 10,
                "float8_e5m2": 12}


def store(out, x):
    out[0] = x


def random_value(t: kt.ScalarType, rng: np.random.Generator):
    """A random value of ``t`` as its NumPy / ml_dtypes scalar (never zero; finite)."""
    dt = t.np_dtype
    while True:
        if t.is_bool:
            return np.bool_(True)
        raw = rng.integers(0, 256, dt.itemsize, dtype=np.uint8)
        v = raw.view(dt)[0]
        if t.is_int:
            if v != 0:
                return v
            continue
        parts = [v.real, v.imag] if t.is_complex else [v]
        if all(np.isfinite(np.float64(p)) for p in parts) and np.float64(abs(v)) != 0:
            return v


def python_value(v, t: kt.ScalarType):
    """The same value as a Python bool / int / float / complex."""
    if t.is_bool:
        return bool(v)
    if t.is_int:
        return int(v)
    if t.is_complex:
        return complex(v)
    return float(v)


def read_back(kernel_or_launch, t: kt.ScalarType, value) -> bytes:
    out = kj.to_device(np.full(1, 0xA5, np.uint8).repeat(t.itemsize).view(t.np_dtype))
    kernel_or_launch(out, value)
    return out.copy_to_host().tobytes()


def _missed(self, args):
    raise AssertionError("the fast form fell back to the general path")


@pytest.mark.parametrize("t", DTYPES, ids=str)
@pytest.mark.parametrize("passed", ["declared", "typed"])
def test_every_scalar_arrives_intact_in_a_kernel(t, passed, monkeypatch):
    rng = np.random.default_rng()
    if passed == "declared":  # a Python value, converted to the declared type
        kernel = kj.jit(f"void({t}[::1], {t})")(store)
        convert = python_value
    else:  # a NumPy / ml_dtypes scalar, its type inferred
        kernel = kj.jit(store)
        convert = lambda v, t: v
    launch = kernel[1, 1]
    for _ in range(2):  # the general path (the cpu backend's every launch)
        v = random_value(t, rng)
        assert read_back(launch, t, convert(v, t)) == np.array([v]).tobytes()
    if launch.fast is None:
        return  # a backend without fast forms (cpu): the mock test below checks its bytes
    if t.facts.encode is not None:
        assert f"ENC_{t.name}(" in source_of(launch.fast)
    monkeypatch.setattr(Launcher, "general", _missed)
    for _ in range(3):  # the fast form, now the launcher's call
        w = random_value(t, rng)
        assert read_back(launch, t, convert(w, t)) == np.array([w]).tobytes()


def test_bfloat16_one_and_a_half_is_one_and_a_half():
    """The reported case: 1.5 declared bfloat16 arrived as 0.125 (packed as IEEE half)."""
    import ml_dtypes

    kernel = kj.jit("void(float32[::1], bfloat16)")(store)
    out = kj.to_device(np.full(1, np.nan, np.float32))
    kernel[1, 1](out, 1.5)
    kernel[1, 1](out, 1.5)
    assert out.copy_to_host()[0] == 1.5
    lazy = kj.jit(store)
    out = kj.to_device(np.full(1, np.nan, np.float32))
    lazy[1, 1](out, ml_dtypes.bfloat16(-2.75))
    assert out.copy_to_host()[0] == -2.75


@pytest.mark.parametrize("t", DTYPES, ids=str)
@pytest.mark.parametrize("passed", ["declared", "typed"])
def test_fast_and_general_paths_pack_the_type_s_own_bytes(mock, t, passed):
    """On the mock backend: the parameter bytes, on both paths, are the value's bytes."""
    rng = np.random.default_rng()
    if passed == "declared":  # (a device array is 16-byte aligned: the exact type)
        kernel = kj.jit(f"void({t}[::1, align=16], {t})")(store)
        convert = python_value
    else:
        kernel = kj.jit(store)
        convert = lambda v, t: v
    out = kj.device_array(1, t.np_dtype)
    launch = kernel[1, 1]
    for n in range(4):
        v = random_value(t, rng)
        launch(out, convert(v, t))
        assert mock.fast_launches == n, "the first launch is general, the others fast"
        params = mock.launches[-1].params
        scalar = params[-2:] if t.is_complex else params[-1:]
        assert b"".join(scalar) == np.array([v]).tobytes()


@pytest.mark.parametrize("t", DTYPES, ids=str)
def test_dlpack_readers_take_the_type_s_code(mock, t):
    """The DLPack export and import, and the native exchange reader's dtype word, read the
    DLPack code from the type: a device array of each dtype goes out and comes back as
    itself."""
    code = DLPACK_CODES.get(t.name, DLPACK_CODES[t.kind])
    assert dx.dtype_word(t) == code | (t.bits << 8) | (1 << 16)
    host = np.full(3, 0x5A, np.uint8).repeat(t.itemsize).view(t.np_dtype)
    a = kj.to_device(host)
    device_type = a.__dlpack_device__()[0]
    capsule = dlpack.to_dlpack_capsule(a, device_type)
    managed = dlpack.DLManagedTensor.from_address(
        dlpack._capsule_pointer(capsule, ctypes.addressof(dlpack._NAME)))
    assert (managed.dl_tensor.dtype.code, managed.dl_tensor.dtype.bits) == (code, t.bits)

    class Producer:
        def __dlpack__(self, stream=None):
            return capsule

        def __dlpack_device__(self):
            return (device_type, 0)

    view = interop.from_dlpack(Producer())
    assert view.kaiojit_type.dtype == t
    assert view.copy_to_host().tobytes() == host.tobytes()


@pytest.mark.parametrize("t", [kt.float8_e4m3fn, kt.float8_e5m2], ids=str)
def test_fp8_torch_dtype_maps_to_the_type(t):
    torch = pytest.importorskip("torch")
    assert interop._torch_scalar(getattr(torch, t.name)) is t
