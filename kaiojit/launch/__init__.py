"""Launching a compiled kernel: ``kernel[grid, block](...)`` and ``.forall(n)``
(:mod:`.launcher`), the fast form of an autotuned launch (:mod:`.autotune_launch`), and
occupancy questions asked of a kernel (:mod:`.occupancy_api`: ``kj.occupancy``). Launchers
read a kernel through the public interface of :class:`kaiojit.dispatcher.Dispatcher`."""
