"""The backend protocol is implemented in full by cuda, cpu and mock: every member, with the
protocol's parameters; where a backend cannot do something, its answer is a clear error.

The cuda backend is checked as a class (no GPU here); cpu and mock as instances too."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.errors import CudaError
from kaiojit.runtime import driver
from kaiojit.runtime.backend import (
    Devices,
    FastLaunchBinding,
    GpuBackend,
    Launching,
    LoadedKernel,
    Memory,
    Modules,
    Streams,
    TensorMaps,
    set_backend,
)
from kaiojit.runtime.cpu import CpuBackend, CpuKernel
from kaiojit.runtime.cuda import CudaBackend
from kaiojit.runtime.launch import ModuleKernel
from kaiojit.runtime.mock import MockBackend
from kaiojit.runtime.slots import ArgSlots, SlotLayout
from kaiojit.target import HostImage, TargetSpec, ptx_version_for

PARTS = (Devices, Memory, Modules, Launching, Streams, TensorMaps)
BACKENDS = {"cuda": CudaBackend, "cpu": CpuBackend, "mock": MockBackend}
KERNELS = {"module (cuda, mock)": ModuleKernel, "cpu": CpuKernel}


def _methods(proto: type) -> dict[str, inspect.Signature]:
    found = {}
    for cls in reversed(proto.__mro__):
        for name, value in vars(cls).items():
            if inspect.isfunction(value) and not name.startswith("_"):
                found[name] = inspect.signature(value)
    return found


def _attributes(proto: type) -> set[str]:
    return {name for cls in proto.__mro__ for name in getattr(cls, "__annotations__", {})
            if cls.__module__ == GpuBackend.__module__}


def _shape(sig: inspect.Signature) -> list[tuple]:
    """What callers rely on: names, kinds and defaults (handle types may be narrowed)."""
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def _check_conformance(cls: type, proto: type) -> list[str]:
    problems = []
    for name, expected in _methods(proto).items():
        member = getattr(cls, name, None)
        if member is None or not callable(member):
            problems.append(f"{cls.__name__}.{name} is missing")
        elif _shape(inspect.signature(member)) != _shape(expected):
            problems.append(f"{cls.__name__}.{name}{inspect.signature(member)} does not take "
                            f"the protocol's parameters {expected}")
    return problems


def test_the_protocol_is_declared_in_parts():
    members = _methods(GpuBackend)
    assert set(members) == set().union(*(_methods(p) for p in PARTS))
    assert {"load_kernel", "target_spec", "launch_typed", "fast_launch_binding",
            "encode_tensormap_tiled", "memcpy_peer"} <= set(members)
    assert _attributes(GpuBackend) == {"name", "debug_sync", "closing"}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_backend_implements_every_member(name):
    cls = BACKENDS[name]
    assert _check_conformance(cls, GpuBackend) == []
    for attribute in _attributes(GpuBackend):
        assert hasattr(cls, attribute), f"{cls.__name__}.{attribute}"
    assert cls.name == name
    assert "NotImplementedError" not in inspect.getsource(inspect.getmodule(cls))


def test_the_check_finds_a_missing_member_and_other_parameters():
    class Partial(MockBackend):
        target_spec = None

        def memset(self, ptr: int, byte: int, nbytes: int) -> None:
            """No stream parameter."""

    problems = sorted(_check_conformance(Partial, GpuBackend))
    assert len(problems) == 2
    assert problems[0].startswith("Partial.memset(self, ptr: 'int', byte: 'int', nbytes: 'int')"
                                  " -> 'None' does not take the protocol's parameters (self, ")
    assert problems[1] == "Partial.target_spec is missing"


@pytest.mark.parametrize("kind", list(KERNELS))
def test_loaded_kernel_implements_every_member(kind):
    assert _check_conformance(KERNELS[kind], LoadedKernel) == []


@pytest.mark.parametrize("backend", [MockBackend, CpuBackend], ids=["mock", "cpu"])
def test_instances_satisfy_the_protocol(backend):
    instance = backend()
    previous = set_backend(instance)
    try:
        @kj.jit
        def scale(out, x, a):
            i = kj.grid(1)
            if i < x.size:
                out[i] = a * x[i]
        sig = "void(float32[::1], float32[::1], float32)"
        loaded = instance.load_kernel(scale.compile(sig, instance.target_spec()))
    finally:
        set_backend(previous)
    assert isinstance(instance, GpuBackend)
    assert isinstance(loaded, LoadedKernel)
    assert loaded.backend is instance and loaded.packer.nargs == 3
    for attribute in _attributes(LoadedKernel):
        assert hasattr(loaded, attribute)


# --- what each backend answers for itself --------------------------------------------------------

def test_cuda_target_is_the_device_arch_under_the_driver_limit(monkeypatch):
    backend = object.__new__(CudaBackend)  # no GPU here: the two driver facts are stand-ins
    backend._specs = {}
    monkeypatch.setattr(CudaBackend, "compute_capability", lambda self, device: (12, 0))
    monkeypatch.setattr(driver, "max_ptx_version", lambda: (8, 5))
    assert backend.target_spec(1) == TargetSpec("nvptx", "sm_120", 85)
    monkeypatch.setattr(CudaBackend, "compute_capability", lambda self, device: (8, 9))
    assert backend.target_spec(2) == TargetSpec("nvptx", "sm_89", ptx_version_for("sm_89", 85))
    assert backend.target_spec(1).arch == "sm_120"  # cached per device


def test_mock_target_is_what_its_device_claims():
    mock = MockBackend(compute_capability=(8, 9))
    assert mock.target_spec() == TargetSpec("nvptx", "sm_89", ptx_version_for("sm_89"))


def test_the_dispatcher_compiles_for_the_backends_target():
    class Recording(MockBackend):
        def __init__(self) -> None:
            super().__init__(compute_capability=(8, 9))
            self.images: list[str] = []

        def load_module(self, image, device):
            self.images.append(image)
            return super().load_module(image, device)

    mock = Recording()
    previous = set_backend(mock)
    try:
        @kj.jit
        def fill(out, v):
            out[kj.grid(1)] = v
        out = kj.device_array(32, np.int32)
        fill[1, 32](out, np.int32(np.random.default_rng().integers(1, 99)))
    finally:
        set_backend(previous)
    assert len(mock.images) == 1 and ".target sm_89" in mock.images[0]
    assert mock.launches[-1].block == (32, 1, 1)


def test_cpu_target_is_the_host():
    assert CpuBackend(workers=1, sanitize=False).target_spec() == TargetSpec(kind="host")
    # the checked mode (docs/sanitizer.md) is the host target's other compile variant
    assert CpuBackend(workers=1, sanitize=True).target_spec() == TargetSpec(kind="host",
                                                                            sanitize=True)


def test_cpu_answers_what_a_host_cannot_do_with_a_clear_error():
    cpu = CpuBackend(workers=1)
    with pytest.raises(CudaError, match=r"^CUDA_ERROR_NOT_SUPPORTED: the cpu backend loads host "
                                        r"images \(kaiojit.target.HostImage\), got str; PTX "
                                        r"needs the cuda backend"):
        cpu.load_module(".version 8.0\n.target sm_90\n", 0)
    fields = dict(dtype="CU_TENSOR_MAP_DATA_TYPE_FLOAT32", rank=1, address=0x1000, dims=(64,),
                  strides=(), box=(16,), element_strides=(1,),
                  interleave="CU_TENSOR_MAP_INTERLEAVE_NONE",
                  swizzle="CU_TENSOR_MAP_SWIZZLE_NONE",
                  l2_promotion="CU_TENSOR_MAP_L2_PROMOTION_NONE",
                  oob_fill="CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")
    # a tensor map on the cpu backend is kaiojit's host encoding, which the host tile copies
    # read (see kaiojit/tma_host.py); an interleaved one is not modelled and says so
    from kaiojit import tma_host

    assert tma_host.decode(cpu.encode_tensormap_tiled(**fields)).address == 0x1000
    with pytest.raises(ValueError, match=r"^interleave: the cpu backend does not model "):
        cpu.encode_tensormap_tiled(**{**fields, "interleave": "CU_TENSOR_MAP_INTERLEAVE_16B"})
    assert cpu.can_access_peer(0, 0) and cpu.enable_peer_access(0, 0)
    with pytest.raises(ValueError, match=r"^no device 1: the cpu backend has one device, 0$"):
        cpu.can_access_peer(0, 1)


def test_cpu_runs_a_host_module_through_the_protocol():
    rng = np.random.default_rng()
    cpu = CpuBackend(workers=1)
    previous = set_backend(cpu)
    try:
        @kj.jit
        def axpy(out, x, a):
            i = kj.grid(1)
            if i < x.size:
                out[i] = a * x[i] + out[i]
        ck = axpy.compile("void(float64[::1], float64[::1], float64)", cpu.target_spec())
        image = ck.image
        assert isinstance(image, HostImage)
        module = cpu.load_module(image, 0)
        fn = cpu.get_function(module, image.entry, 0)
        x, y, a = rng.standard_normal(300), rng.standard_normal(300), rng.uniform(-4, 4)
        out = kj.to_device(y)
        slots = ArgSlots(cpu.load_kernel(ck).packer.layout)
        xd = kj.to_device(x)  # held: the slots keep only its address
        cpu.load_kernel(ck).packer.pack(slots, (out, xd, a), 0)
        cpu.launch_typed(fn, (3, 1, 1), (128, 1, 1), 0, 0, slots)
        assert np.allclose(out.copy_to_host(), a * x + y)
        with pytest.raises(CudaError, match="named symbol not found"):
            cpu.get_function(module, "elsewhere", 0)
    finally:
        set_backend(previous)


@pytest.mark.parametrize("mode", ["native", "ex", "ctypes"])
def test_mock_fast_launch_binding_records_like_launch_typed(mode):
    mock = MockBackend(launch_mode=mode)
    module = mock.load_module(".entry k(\n.param .u64 p\n)\n{\n}\n", 0)
    fn = mock.get_function(module, "k", 0)
    slots = ArgSlots(SlotLayout.for_kinds(["uint64"]))
    value = int(np.random.default_rng().integers(1, 2**62))
    slots.write_int(0, value, 2**64 - 1)
    binding = mock.fast_launch_binding(fn, (2, 1, 1), (64, 1, 1), 0, 0, slots)
    assert isinstance(binding, FastLaunchBinding)
    assert (binding.record is None) == (mode != "ex")
    assert binding.invoke() == 0
    assert mock.fast_launches == 1
    assert mock.launches[-1].params == (value.to_bytes(8, "little"),)
    assert mock.launches[-1].grid == (2, 1, 1) and mock.launches[-1].block == (64, 1, 1)
    assert binding.thread_state.token is binding.token
    mock.fail_next_launch = 719  # the driver's status comes back through the trampoline
    assert binding.invoke() == 719 and binding.invoke() == 0
    with pytest.raises(CudaError, match=r"^CUDA_ERROR_LAUNCH_FAILED: mock launch failed \(1\)$"):
        binding.failed(1)
    assert MockBackend(launch_mode="bindings").fast_launch_binding(
        fn, (1, 1, 1), (1, 1, 1), 0, 0, slots) is None
    assert CpuBackend(workers=1).fast_launch_binding(fn, (1, 1, 1), (1, 1, 1), 0, 0, slots) is None
