"""The inline PTX of thread-block clusters (``kaiojit.lower.cluster_ptx``), through LLVM exactly
as generated code emits it, assembled by ptxas for sm_90a (and sm_90); each instruction is
refused below sm_90."""

from __future__ import annotations

import pytest

from kaiojit.lower import cluster_ptx as P
from tests.ptxas import assemble

from .tma_kernels import ptx_of, single_ir

# the generic address of the test kernel's shared mbarriers (what mapa maps)
SHARED_GENERIC = "i64 ptrtoint (ptr addrspacecast (ptr addrspace(3) @bars to ptr) to i64)"
SINGLE = {
    "cluster_arrive": (P.cluster_arrive(), "void"),
    "cluster_arrive_relaxed": (P.cluster_arrive_relaxed(), "void"),
    "cluster_wait": (P.cluster_wait(), "void"),
    "cluster_sync": (P.cluster_sync(), "void"),
    "map_shared_rank": (P.map_shared_rank(), "i64", SHARED_GENERIC, "i32 %n"),
    "mbarrier_arrive_cluster": (P.mbarrier_arrive_cluster(), "void", "i32 %bar", "i32 %n"),
    "mbarrier_wait_parity_cluster": (P.mbarrier_wait_parity_cluster(), "void", "i32 %bar",
                                     "i32 %n"),
    "tma_load_multicast_2d": (P.tma_load_multicast(2), "void", "i32 %buf", "ptr %tm", "i32 %n",
                              "i32 8", "i32 %bar", "i16 3"),
    "tma_load_multicast_5d": (P.tma_load_multicast(5), "void", "i32 %buf", "ptr %tm", "i32 %n",
                              "i32 0", "i32 1", "i32 2", "i32 -3", "i32 %bar", "i16 65535"),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_each_instruction_assembles_for_sm_90a_and_not_below_sm_90(name):
    ir_text = single_ir(*SINGLE[name])
    ptx = ptx_of(ir_text, "sm_90a")
    assemble(ptx, "sm_90a")
    assemble(ptx_of(ir_text, "sm_90"), "sm_90")
    with pytest.raises(AssertionError, match=r"requires \.target sm_90 or higher"):
        assemble(ptx_of(ir_text, "sm_80", 78), "sm_80")


def test_the_multicast_copy_names_its_mask_and_barrier():
    load = P.tma_load_multicast(3)
    assert load.constraints == "r,l,r,r,r,r,h,~{memory}"
    assert load.text.endswith("[$0], [$1, {$2, $3, $4}], [$5], $6;")
    assert ".multicast::cluster" in load.text
    with pytest.raises(ValueError, match=r"^a tensor copy has 1 to 5 dimensions, got 0$"):
        P.tma_load_multicast(0)
