"""What a user runs on a compiled kernel: SASS (:mod:`.sass`), ptxas resource counts
(:mod:`.resources`), the occupancy calculator (:mod:`.occupancy_calc`), notebook display of
inspected text (:mod:`.display`), and where the CUDA binary utilities are found
(:mod:`.binutils`). Not to be confused with the repository's top-level ``tools/`` folder (the
numba suite runner, the PTX collector), which is outside the package."""
