"""The inline PTX of the TMA intrinsics (``kaiojit.lower.tma_ptx``), through LLVM exactly as
generated code emits it, assembled by ptxas for sm_90; each instruction is refused below sm_90.
"""

from __future__ import annotations

import re

import pytest

from kaiojit.lower import tma_ptx as P
from tests.ptxas import assemble

from .tma_kernels import every_instruction_ir, ptx_of, single_ir, tiles_ir

SINGLE = {
    "mbarrier_init": (P.mbarrier_init(), "void", "i32 %bar", "i32 %n"),
    "fence_mbarrier_init": (P.fence_mbarrier_init(), "void"),
    "mbarrier_arrive": (P.mbarrier_arrive(), "i64", "i32 %bar"),
    "mbarrier_arrive_expect_tx": (P.mbarrier_arrive_expect_tx(), "i64", "i32 %bar", "i32 %n"),
    "mbarrier_expect_tx": (P.mbarrier_expect_tx(), "void", "i32 %bar", "i32 %n"),
    "mbarrier_try_wait_parity": (P.mbarrier_try_wait_parity(), "i32", "i32 %bar", "i32 %n"),
    "mbarrier_wait_parity": (P.mbarrier_wait_parity(), "void", "i32 %bar", "i32 %n"),
    "tma_load_3d": (P.tma_load(3), "void", "i32 %buf", "ptr %tm", "i32 %n", "i32 -7", "i32 3",
                    "i32 %bar"),
    "tma_store_4d": (P.tma_store(4), "void", "ptr %tm", "i32 %n", "i32 1", "i32 -2", "i32 3",
                     "i32 %buf"),
    "tma_reduce_add_2d": (P.tma_reduce_add(2), "void", "ptr %tm", "i32 %n", "i32 16",
                          "i32 %buf"),
    "bulk_commit_group": (P.bulk_commit_group(), "void"),
    "bulk_wait_group_read": (P.bulk_wait_group_read(2), "void"),
    "bulk_wait_group": (P.bulk_wait_group(0), "void"),
    "fence_proxy_async": (P.fence_proxy_async(), "void"),
    "prefetch_tensormap": (P.prefetch_tensormap(), "void", "ptr %tm"),
    "elect_sync": (P.elect_sync(), "i32", "i32 %n"),
}


def test_every_instruction_in_one_kernel_assembles_for_sm_90():
    ptx = ptx_of(every_instruction_ir())
    assemble(ptx, "sm_90")
    # the map is a 64-byte aligned 128-byte param; the asm operand is its generic address
    assert re.search(r"\.param \.align 64 \.b8 every_param_1\[128\]", ptx)
    assert re.search(r"mov\.b64\s+(%rd\d+), every_param_1;\s+cvta\.param\.u64\s+(%rd\d+), \1;",
                     ptx)
    tm = re.search(r"cvta\.param\.u64\s+(%rd\d+)", ptx).group(1)
    for rank in range(1, 6):
        assert re.search(rf"cp\.async\.bulk\.tensor\.{rank}d\.shared::cluster\.global\.tile\."
                         rf"mbarrier::complete_tx::bytes \[%r\d+\], \[{tm}, \{{", ptx)
        assert re.search(rf"cp\.async\.bulk\.tensor\.{rank}d\.global\.shared::cta\.tile\."
                         rf"bulk_group \[{tm}, \{{", ptx)
        assert re.search(rf"cp\.reduce\.async\.bulk\.tensor\.{rank}d\.global\.shared::cta\."
                         rf"add\.tile\.bulk_group \[{tm}, \{{", ptx)
    assert ptx.count("$kj_wait:") == 2  # the scoped label may repeat


def test_the_gpu_test_kernel_assembles_for_sm_90():
    ptx = ptx_of(tiles_ir())
    assemble(ptx, "sm_90")
    assert len(re.findall(r"\.param \.align 64 \.b8 tma_tiles_param_\d\[128\]", ptx)) == 2


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_each_instruction_assembles_for_sm_90_and_not_below_its_arch(name):
    ir_text = single_ir(*SINGLE[name])
    assemble(ptx_of(ir_text), "sm_90")
    below = ptx_of(ir_text, "sm_80", 78)
    if P.ARCH_NEEDED.get(name, P.MIN_ARCH) <= 80:
        assemble(below, "sm_80")
    else:
        with pytest.raises(AssertionError, match=r"requires \.target sm_90 or higher"):
            assemble(below, "sm_80")


def test_the_templates_check_their_arguments():
    with pytest.raises(ValueError, match=r"^a tensor copy has 1 to 5 dimensions, got 6$"):
        P.tma_load(6)
    with pytest.raises(ValueError, match=r"^a tensor copy has 1 to 5 dimensions, got 0$"):
        P.tma_store(0)
    with pytest.raises(ValueError, match=r"^a bulk wait_group count is an integer 0 to 63, "
                                         r"got -1$"):
        P.bulk_wait_group_read(-1)
    load = P.tma_load(2)
    assert load.constraints == "r,l,r,r,r,~{memory}"
    assert load.text.endswith("[$0], [$1, {$2, $3}], [$4];")
    store = P.tma_store(5)
    assert store.constraints == "l,r,r,r,r,r,r,~{memory}"
    assert store.text.endswith("[$0, {$1, $2, $3, $4, $5}], [$6];")
    add = P.tma_reduce_add(3)
    assert add.constraints == "l,r,r,r,r,~{memory}"
    assert add.text == ("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                        " [$0, {$1, $2, $3}], [$4];")
    with pytest.raises(ValueError, match=r"^a tensor copy has 1 to 5 dimensions, got 6$"):
        P.tma_reduce_add(6)
