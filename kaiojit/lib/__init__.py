"""Kernel libraries written on kaiojit's public API: xoroshiro128+ random numbers
(:mod:`.random`, documented as ``kaiojit.random``), ``@kj.vectorize`` and ``@kj.reduce``
(:mod:`.ufunc`), the autotuner (:mod:`.autotuner`: ``kj.autotune``, ``kj.Config``) and
FlashAttention (:mod:`.attention`: ``attention``, ``attention_varlen`` and their backward)."""
