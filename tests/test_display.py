"""Notebook display of inspection text: kaiojit's lexers give no error token for kernel IR, LLVM
IR (GPU and host), PTX and SASS; the HTML is monospace, under a header of the kernel's
resources and occupancy; IPython's text view is the text itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kaiojit as kj
from kaiojit.highlight import error_tokens, highlight_html, lexer_for
from kaiojit.target import TargetSpec
from kaiojit.tools.resources import find_ptxas

pytest.importorskip("pygments")
rng = np.random.default_rng()
HOST = TargetSpec(kind="host")


@kj.jit
def saxpy(a, x, y, out):
    i = kj.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@kj.jit
def block_sum(x, out):
    sm = kj.shared.array(256, kj.float32)
    t = kj.threadIdx.x
    sm[t] = x[kj.grid(1)] if kj.grid(1) < x.size else 0.0
    kj.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        kj.syncthreads()
        s //= 2
    v = kj.shfl_down_sync(0xFFFFFFFF, sm[t], 1)
    if t == 0:
        kj.atomic.add(out, 0, v + math.sqrt(abs(sm[0])))


@kj.jit
def grid_phases(x, y):
    i = kj.grid(1)
    y[(i + 1) % y.size] = x[i] * np.float16(2) if i < x.size else 0
    kj.cg.this_grid().sync()
    for k in range(3):
        if k == 2:
            break
        x[i] = y[i] - k


KERNELS = [
    (saxpy, "void(float32, float32[::1], float32[::1], float32[::1])"),
    (block_sum, "void(float32[::1], float32[::1])"),
    (grid_phases, "void(float16[::1], float16[::1])"),
]


@pytest.mark.parametrize("kernel,sig", KERNELS, ids=[k.__name__ for k, _ in KERNELS])
def test_every_stage_lexes_without_error_tokens(kernel, sig):
    texts = {"kir": kernel.inspect_kir(sig), "llvm": kernel.inspect_llvm(sig),
             "ptx": kernel.inspect_ptx(sig)}
    texts["host llvm"] = kernel.compile(sig, HOST).llvm
    for stage, text in texts.items():
        language = stage.split()[-1]
        assert getattr(text, "language", language) == language
        assert error_tokens(text, language) == [], stage
        html = highlight_html(text, language, classes=True)
        assert 'class="err"' not in html, stage
    # pygments' own lexers box these in red (why kaiojit has its own)
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Error

    theirs = [v for t, v in get_lexer_by_name("ptx").get_tokens(texts["ptx"]) if t in Error]
    assert "@" in theirs or "@" not in texts["ptx"]


SASS_SAMPLE = """\
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
//--------------------- .text.saxpy --------------------------
\t.section\t.text.saxpy,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS={regs}"
saxpy:
.text.saxpy:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   S2UR UR4, SR_CTAID.X ;
        /*0050*/                   ISETP.GE.AND P0, PT, R7, UR5, PT ;
        /*0060*/               @P0 EXIT ;
        /*0070*/              @!P1 BRA `(.L_x_0) ;
        /*00a0*/                   LDG.E.CONSTANT R2, desc[UR4][R2.64] ;
        /*00b0*/                   FFMA R9, R2, {scale}, -|R5| ;
        /*00c0*/                   STG.E desc[UR4][R4.64+{offset:#x}], R9 ;
.L_x_0:
        /*00e0*/                   EXIT ;
        /* 0x000fc80000000000 */
"""


def test_sass_lexes_opcodes_registers_and_predicates():
    text = SASS_SAMPLE.format(regs=int(rng.integers(8, 255)), scale=float(rng.random()),
                              offset=int(rng.integers(0, 4096)) * 4)
    assert error_tokens(text, "sass") == []
    from pygments.token import Keyword, Name, Operator

    tokens = [(t, v) for t, v in lexer_for("sass").get_tokens(text)]
    assert (Keyword, "LDG.E.CONSTANT") in tokens and (Keyword, "FFMA") in tokens
    assert (Name.Variable, "R9") in tokens and (Name.Variable, "UR4") in tokens
    assert (Operator, "@!P1") in tokens and (Operator, "@P0") in tokens
    assert (Name.Label, ".L_x_0:") in tokens


def test_notebook_html_is_monospace_under_a_resource_header():
    sig = KERNELS[1][1]
    shown = block_sum.inspect_ptx(sig)
    html = shown._repr_html_()
    assert 'class="err"' not in html and "border: 1px solid #FF0000" not in html
    assert "font-family: ui-monospace" in html.split("<pre", 1)[1].split(">", 1)[0]
    head = dict(shown.header)
    assert head["kernel"] == "block_sum(float32[::1], float32[::1])" and head["target"] == "sm_90"
    if find_ptxas() is not None:
        res = block_sum.resources(sig)
        assert head["registers"] == str(res.registers)
        assert head["shared"] == f"{res.shared_bytes} B static" and res.shared_bytes == 1024
        assert head["occupancy"].endswith(")") and "threads/block (H200" in head["occupancy"]
        assert f"<b>registers</b> {res.registers}" in html
    host = dict(saxpy.inspect_kir(KERNELS[0][1]).header)
    assert set(host) >= {"kernel", "target"}


def test_text_view_is_the_text_not_its_repr():
    pretty = pytest.importorskip("IPython.lib.pretty").pretty  # a notebook extra

    shown = saxpy.inspect_llvm(KERNELS[0][1])
    assert pretty(shown) == str(shown) and "\\n" not in pretty(shown).splitlines()[0]
    everything = saxpy.inspect_kir()
    text = pretty(everything)
    assert text.startswith("# void(float32, float32[::1]") and "kernel saxpy(" in text
    assert 'class="err"' not in everything._repr_html_()
