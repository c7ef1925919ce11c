"""Launching a compiled kernel: ``kernel[grid, block](...)`` and ``.forall(n)``
(:mod:`.launcher`), the fast form of an autotuned launch (:mod:`.autotune_launch`), and
occupancy questions asked of a kernel (:mod:`.occupancy_api`: ``kj.occupancy``). Launchers
read a kernel through the public interface of :class:`kaiojit.dispatcher.Dispatcher`.

The names below are the launch package's public interface for kernel libraries (kaiojit/lib/):
``outside_graphs`` marks a library's launch entry as one ``torch.compile`` does not trace into
(as ``kernel[grid, block]`` is), and ``FastCalls`` keeps the specialized fast launches of an
autotuned kernel's chosen configurations (see :mod:`.autotune_launch` for what it reads of
the tuner).
"""

from __future__ import annotations

from .autotune_launch import FastCalls
from .launcher import outside_graphs

__all__ = ["FastCalls", "outside_graphs"]
