"""Kernel libraries written on kaiojit's public API: xoroshiro128+ random numbers
(:mod:`.random`, documented as ``kaiojit.random``), ``@kj.vectorize`` and ``@kj.reduce``
(:mod:`.ufunc`), and the autotuner (:mod:`.autotuner`: ``kj.autotune``, ``kj.Config``)."""
