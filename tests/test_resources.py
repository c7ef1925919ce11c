"""Kernel resources from ptxas's report (no GPU), and against the driver's (``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.tools import resources as res
from kaiojit.tools.occupancy_calc import REG_ALLOC_UNIT, REGS_PER_BLOCK, WARP_SIZE
from tests.ptxas import require_ptxas

SHARED_WORDS = 1536
TABLE = np.random.default_rng().standard_normal(100)  # a fresh constant table every run


def with_shared(out, x, n):
    s = kj.shared.array(SHARED_WORDS, kj.float32)
    i = kj.grid(1)
    s[kj.threadIdx.x] = x[i % n]
    kj.syncthreads()
    out[i % n] = s[(kj.threadIdx.x + 1) % kj.blockDim.x]


def with_const(out, x, n):
    t = kj.const.array_like(TABLE)
    i = kj.grid(1)
    if i < n:
        out[i] = x[i] * t[i % 100]


def with_local(out, x, n):
    acc = kj.local.array(64, kj.float32)  # indexed at run time: it lives in local memory
    i = kj.grid(1)
    for j in range(64):
        acc[j] = x[(i + j) % n]
    out[i % n] = acc[i % 64] + acc[(i * 7) % 64]


def register_hungry(out, x, n):
    acc = kj.local.array(48, kj.float32)  # constant indices after unrolling: 48 live values
    i = kj.grid(1)
    for j in range(48):
        acc[j] = x[i + j * n]
    for j in range(48):
        acc[j] = acc[j] * acc[47 - j] + acc[(j + 5) % 48]
    for j in range(48):
        out[i + j * n] = acc[j] * acc[(j + 7) % 48]


SIG = "void(float32[:], float32[:], int32)"


def resources_of(pyfunc, sig: str = SIG, **options) -> res.Resources:
    require_ptxas()
    return res.ptxas_resources(kj.compile_ptx(pyfunc, sig, **options), "sm_90")


def test_static_shared_bytes_are_the_declared_array():
    r = resources_of(with_shared)
    assert r.shared_bytes == SHARED_WORDS * 4
    assert r.barriers == 1
    assert r.local_bytes == 0 and not r.spills


def test_constant_bytes_are_the_constant_table():
    r = resources_of(with_const, "void(float64[:], float64[:], int32)")
    assert r.const_bytes == TABLE.nbytes
    assert r.shared_bytes == 0


def test_a_local_array_indexed_at_run_time_takes_local_memory():
    r = resources_of(with_local)
    assert r.local_bytes >= 64 * 4
    assert not r.spills


def test_a_tiny_register_limit_spills():
    free = resources_of(register_hungry)
    tight = resources_of(register_hungry, max_registers=24)
    assert not free.spills
    assert free.registers > 24
    assert tight.registers <= 24
    assert tight.spill_store_bytes > 0 and tight.spill_load_bytes > 0
    # spilled values live in the stack frame (ptxas counts spill bytes per instruction, so a
    # slot stored to twice counts twice: the frame may be smaller than the spill stores)
    assert tight.local_bytes > 0
    assert "spill stores" in str(tight) and "spill loads" in str(tight)


def test_max_threads_per_block_follows_the_register_file():
    r = resources_of(register_hungry, max_registers=255)  # ptxas then keeps all 48 in registers
    per_warp = -(-r.registers * WARP_SIZE // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    warps = r.max_threads_per_block // WARP_SIZE
    assert r.max_threads_per_block < 1024 and r.max_threads_per_block % (4 * WARP_SIZE) == 0
    assert per_warp * warps <= REGS_PER_BLOCK  # the block fits the register file...
    assert per_warp * (warps + 4) > REGS_PER_BLOCK  # ...and 4 more warps would not
    assert resources_of(with_shared).max_threads_per_block == 1024


def test_maxntid_caps_the_block():
    require_ptxas()
    ptx = kj.compile_ptx(with_shared, SIG)
    name = ptx.split(".entry ", 1)[1].split("(", 1)[0]
    close = ptx.index(")", ptx.index(f".entry {name}("))
    limited = ptx[:close + 1] + "\n.maxntid 96, 2, 1" + ptx[close + 1:]
    assert res.ptxas_resources(limited, "sm_90").max_threads_per_block == 192


def test_the_header_line_names_every_figure():
    r = resources_of(with_shared)
    assert str(r) == (f"// kaiojit resources (ptxas): {r.registers} registers, "
                      f"{SHARED_WORDS * 4} B shared, 0 B local, 0 B spill, 0 B constant, "
                      "1024 threads/block max")


def test_a_report_is_cached_by_the_ptx(monkeypatch):
    require_ptxas()
    ptx = kj.compile_ptx(with_local, SIG) + f"\n// {np.random.default_rng().integers(1 << 62)}\n"
    runs = []
    real = res._run_ptxas
    monkeypatch.setattr(res, "_run_ptxas", lambda *a: runs.append(a) or real(*a))
    first = res.ptxas_resources(ptx, "sm_90")
    assert res.ptxas_resources(ptx, "sm_90") == first
    assert len(runs) == 1


def test_older_ptxas_reports_with_constant_banks():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
           "ptxas info    : Function properties for k\n"
           "    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 40 registers, 360 bytes cmem[0], 800 bytes cmem[3], "
           "2048 bytes smem\n")
    r = res.parse_ptxas_report(log, ".visible .entry k(\n)\n{\n}\n")["k"]
    assert (r.registers, r.shared_bytes, r.local_bytes, r.const_bytes) == (40, 2048, 16, 800)
    assert (r.spill_store_bytes, r.spill_load_bytes) == (8, 12)


def test_without_ptxas_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(res, "find_ptxas", lambda: None)
    ptx = f"// never assembled {np.random.default_rng().integers(1 << 62)}\n"
    with pytest.raises(res.PtxasError, match="nvidia-cuda-nvcc"):
        res.ptxas_resources(ptx, "sm_90")


def test_rejected_ptx_shows_ptxas_log():
    require_ptxas()
    with pytest.raises(res.PtxasError, match="rejected"):
        res.ptxas_resources(".version 8.0\n.target sm_90\n.address_size 64\nbogus;\n", "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("pyfunc,sig,options", [
    (with_shared, SIG, {}), (with_const, "void(float64[:], float64[:], int32)", {}),
    (with_local, SIG, {}), (register_hungry, SIG, {}), (register_hungry, SIG, {"max_registers": 24}),
    (register_hungry, SIG, {"max_registers": 255}), (register_hungry, SIG, {"max_registers": 80}),
])
def test_ptxas_figures_match_the_driver(pyfunc, sig, options):
    import kaiojit.runtime as rt

    backend = rt.get_backend()
    if backend.name != "cuda":
        pytest.skip("needs the cuda backend")
    kernel = kj.jit(**options)(pyfunc)
    ck = kernel.compile(sig, backend.target_spec())
    loaded = backend.load_kernel(ck)
    attrs = backend.function_attributes(loaded.on_device(backend.current_device()).fn)
    driver = res.Resources.from_attributes(attrs)
    mine = res.ptxas_resources(ck.ptx, ck.target.arch)
    assert (mine.registers, mine.shared_bytes, mine.local_bytes, mine.const_bytes,
            mine.max_threads_per_block) == (driver.registers, driver.shared_bytes,
                                            driver.local_bytes, driver.const_bytes,
                                            driver.max_threads_per_block)


# --- kernel.resources, the inspect_* header and the command line ---------------------------------


def test_kernel_resources_on_either_backend(kj_backend):
    require_ptxas()
    kernel = kj.jit(register_hungry)
    got = kernel.resources(SIG)
    ck = kernel.compile(SIG)  # sm_90: what ptxas reports on
    want = res.ptxas_resources(ck.ptx, "sm_90", ck.name)
    assert got.source == ("driver" if kj_backend == "cuda" else "ptxas")
    assert (got.registers, got.shared_bytes, got.local_bytes, got.const_bytes,
            got.max_threads_per_block, got.spill_store_bytes) == (
        want.registers, want.shared_bytes, want.local_bytes, want.const_bytes,
        want.max_threads_per_block, want.spill_store_bytes)
    assert got.registers > 24  # 48 live values
    shared = kj.jit(with_shared)
    assert shared.resources(SIG).shared_bytes == SHARED_WORDS * 4


def test_inspect_output_is_headed_by_the_resources():
    require_ptxas()
    kernel = kj.jit(with_shared)
    line = str(res.ptxas_resources(kernel.compile(SIG).ptx, "sm_90"))
    assert f"{SHARED_WORDS * 4} B shared" in line
    assert kernel.inspect_ptx(SIG).splitlines()[0] == line
    assert kernel.inspect_llvm(SIG).splitlines()[0] == ";" + line[2:]
    assert kernel.inspect_ptx()[kj.types.parse_signature(SIG)].startswith(line + "\n")


def test_kernel_occupancy_is_kj_occupancy(kj_backend):
    require_ptxas()
    kernel = kj.jit(with_shared)
    occ = kernel.occupancy(SIG, 128)
    assert occ == kj.occupancy(kernel, SIG, 128)
    # 6 KB static + 1 KB reserved a block; 4 warps a block
    assert occ.active_blocks_per_sm == min(228 * 1024 // (SHARED_WORDS * 4 + 1024), 16)
    assert occ.occupancy_fraction == occ.active_blocks_per_sm * 4 / 64


def test_command_line_emits_resources(tmp_path):
    import os
    import subprocess
    import sys

    require_ptxas()
    src = tmp_path / "kern.py"
    src.write_text("import kaiojit as kj\n\n"
                   "def k(out, n):\n"
                   "    s = kj.shared.array(300, kj.float64)\n"
                   "    s[kj.threadIdx.x] = n\n"
                   "    kj.syncthreads()\n"
                   "    out[kj.threadIdx.x] = s[299 - kj.threadIdx.x]\n")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    r = subprocess.run([sys.executable, "-m", "kaiojit", "ptx", f"{src}:k", "--sig",
                        "void(float64[::1], float64)", "--emit", "resources"],
                       check=False, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kaiojit resources (ptxas): ")
    assert ", 2400 B shared, 0 B local, 0 B spill, 0 B constant, 1024 threads/block max" in r.stdout


@pytest.mark.gpu
def test_kernel_resources_come_from_the_driver_on_the_gpu():
    import kaiojit.runtime as rt

    backend = rt.get_backend()
    if backend.name != "cuda":
        pytest.skip("needs the cuda backend")
    kernel = kj.jit(max_registers=24)(register_hungry)
    got = kernel.resources(SIG)
    ck = kernel.compile(SIG, backend.target_spec())
    attrs = backend.load_kernel(ck).attributes()
    assert got.source == "driver"
    assert (got.registers, got.shared_bytes, got.local_bytes, got.const_bytes,
            got.max_threads_per_block) == (attrs["registers"], attrs["shared_bytes"],
                                           attrs["local_bytes"], attrs["const_bytes"],
                                           attrs["max_threads_per_block"])
    assert got.registers <= 24 and got.local_bytes > 0
    if res.find_ptxas() is not None:
        assert got.spill_store_bytes > 0  # ptxas adds what the driver does not say
