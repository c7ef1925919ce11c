"""examples/attention.py runs and matches PyTorch (its own asserts), on the cpu backend with
the kernel configuration the other CI tests compile (head dim 64, bfloat16, causal)."""

from __future__ import annotations

import importlib.util
import os

import pytest

pytest.importorskip("torch")
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "attention.py")


def test_attention_example(kj_backend):
    spec = importlib.util.spec_from_file_location("example_attention", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    errors = example.main(batch=1, seqlen=150, heads=2, kv_heads=1, head_dim=64, causal=True)
    assert set(errors) == {"out", "dq", "dk", "dv"}
    assert max(errors.values()) < 4 * 2.0 ** -8
