"""numba.cuda.kernels: numba's library kernels (``transpose``) on kaiojit."""
