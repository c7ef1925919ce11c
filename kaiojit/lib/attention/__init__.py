"""FlashAttention in kaiojit: ``attention`` and ``attention_varlen`` (interface.py), the
forward kernel (forward.py)."""

from __future__ import annotations

from .interface import attention, attention_backward, attention_varlen, attention_varlen_backward

__all__ = ["attention", "attention_backward", "attention_varlen", "attention_varlen_backward"]
